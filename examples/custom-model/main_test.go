package main

import (
	"path/filepath"
	"testing"
)

func TestRun(t *testing.T) {
	out := filepath.Join(t.TempDir(), "m.safetensors")
	if err := run(16, 16, 1, 2, 8, 3, 0.5, 1, out); err != nil {
		t.Fatal(err)
	}
}
