package fineweb

import (
	"compress/gzip"
	"io"
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

// readCorpusText returns the decompressed text of one corpus file.
func readCorpusText(t testing.TB, name string) string {
	t.Helper()
	f, err := os.Open(filepath.Join(corpusDir(t), name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(z)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
