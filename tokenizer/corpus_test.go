package tokenizer

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/hilbert-ml/hilbert/internal/testcorpus"
)

// corpusDir returns the shared corpus folder (see testcorpus.Dir).
func corpusDir(t testing.TB) string {
	t.Helper()
	return testcorpus.Dir(t)
}

// readCorpus returns the decompressed text of one corpus file.
func readCorpus(t testing.TB, name string) string {
	t.Helper()
	return testcorpus.Text(t, name)
}

// opticks returns the text of Go's own testdata file, present wherever Go is.
func opticks(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(runtime.GOROOT(), "src", "testdata", "Isaac.Newton-Opticks.txt"))
	if err != nil {
		t.Skipf("Go's testdata not available: %v", err)
	}
	return string(b)
}
