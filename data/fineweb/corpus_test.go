package fineweb

import (
	"os"
	"path/filepath"
	"testing"
)

// corpusDir returns ../shared/corpus beside the module root. When it is
// missing the test fails under CI=true and is skipped otherwise.
func corpusDir(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the test directory")
		}
		dir = parent
	}
	c := filepath.Join(dir, "..", "shared", "corpus")
	if _, err := os.Stat(c); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("shared corpus missing at %s (CI=true): %v", c, err)
		}
		t.Skipf("shared corpus not found at %s; put the shared/ directory beside the repository to run this test", c)
	}
	return c
}
