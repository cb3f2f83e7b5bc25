// Package testcorpus finds the shared public-domain corpus for tests and
// benchmarks: ../shared/corpus beside the module root (where CI puts a copy
// of shared/). When it is missing a test fails under CI=true and is skipped
// otherwise, saying where it looked.
//
// It is test support only; nothing outside _test.go files imports it.
package testcorpus

import (
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// Dir returns the corpus folder.
func Dir(t testing.TB) string {
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

// Text returns the decompressed text of one corpus file (name.txt.gz).
func Text(t testing.TB, name string) string {
	t.Helper()
	f, err := os.Open(filepath.Join(Dir(t), name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	b, err := io.ReadAll(z)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return string(b)
}
