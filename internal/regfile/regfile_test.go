//go:build unix

package regfile_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hilbert-ml/hilbert/internal/regfile"
)

// openWithin runs regfile.Open and fails the test if it blocks: before
// regfile, opening a FIFO nobody writes hung forever.
func openWithin(t *testing.T, path string) (*os.File, error) {
	t.Helper()
	type result struct {
		f   *os.File
		err error
	}
	ch := make(chan result, 1)
	go func() {
		f, err := regfile.Open(path)
		ch <- result{f, err}
	}()
	select {
	case r := <-ch:
		return r.f, r.err
	case <-time.After(30 * time.Second):
		t.Fatalf("Open(%s) blocked", path)
		return nil, nil
	}
}

func TestOpen(t *testing.T) {
	dir := t.TempDir()
	regular := filepath.Join(dir, "model.safetensors")
	if err := os.WriteFile(regular, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(regular, link); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path, want string // want: "" for success, else a part of the error
	}{
		{"regular", regular, ""},
		{"symlink to regular", link, ""},
		{"fifo", fifo, "a named pipe (FIFO)"},
		{"directory", dir, "a directory"},
		{"device", os.DevNull, "a character device"},
		{"missing", filepath.Join(dir, "none"), "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := openWithin(t, tc.path)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Open: %v", err)
				}
				defer f.Close()
				b := make([]byte, 2)
				if n, _ := f.Read(b); n != 1 || b[0] != 'x' {
					t.Fatalf("read %q, want \"x\"", b[:n])
				}
				return
			}
			if err == nil {
				f.Close()
				t.Fatalf("Open(%s) succeeded, want an error with %q", tc.path, tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.path) {
				t.Fatalf("error %q: want it to name %s and say %q", err, tc.path, tc.want)
			}
			if tc.name != "missing" && !errors.Is(err, regfile.ErrNotRegular) {
				t.Fatalf("error %q does not wrap ErrNotRegular", err)
			}
		})
	}
}

// TestSamePath checks SamePath on cleaned spellings, a symbolic link to a
// folder, two different folders and paths that do not exist.
func TestSamePath(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	for _, d := range []string{a, b} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(a, link); err != nil {
		t.Skipf("no symbolic links here: %v", err)
	}
	for _, c := range []struct {
		x, y string
		want bool
	}{
		{a, a + "/./", true},
		{a, link, true},
		{a, b, false},
		{filepath.Join(dir, "gone"), filepath.Join(dir, "gone", "."), true},
		{filepath.Join(dir, "gone"), filepath.Join(dir, "other"), false},
	} {
		if got := regfile.SamePath(c.x, c.y); got != c.want {
			t.Errorf("SamePath(%q, %q) = %v, want %v", c.x, c.y, got, c.want)
		}
	}
}
