package tokenizer

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// opticks returns the text of Go's own testdata file, present wherever Go is.
func opticks(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(runtime.GOROOT(), "src", "testdata", "Isaac.Newton-Opticks.txt"))
	if err != nil {
		t.Skipf("Go's testdata not available: %v", err)
	}
	return string(b)
}
