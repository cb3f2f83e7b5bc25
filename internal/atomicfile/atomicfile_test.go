package atomicfile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// leftovers returns the temporary files left in dir.
func leftovers(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, TempPrefix+"*"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// A writer that fails or panics part way leaves the old file, byte for
// byte, and no temporary file; a writer that finishes replaces it.
func TestWriteCrashLeavesOldFile(t *testing.T) {
	errDisk := errors.New("disk on fire")
	for _, c := range []struct {
		name    string
		fn      func(w io.Writer) error
		want    string // the file's contents afterwards
		wantErr error
		panics  bool
	}{
		{"completes", func(w io.Writer) error { _, err := io.WriteString(w, "new contents"); return err }, "new contents", nil, false},
		{"fails mid-write", func(w io.Writer) error { io.WriteString(w, "new cont"); return errDisk }, "old", errDisk, false},
		{"fails before writing", func(io.Writer) error { return errDisk }, "old", errDisk, false},
		{"panics mid-write", func(w io.Writer) error { io.WriteString(w, "new"); panic("killed") }, "old", nil, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "state.json")
			if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
				t.Fatal(err)
			}
			var err error
			func() {
				defer func() {
					if r := recover(); (r != nil) != c.panics {
						t.Errorf("recovered %v, want a panic: %v", r, c.panics)
					}
				}()
				err = Write(path, c.fn)
			}()
			if !errors.Is(err, c.wantErr) || (c.wantErr == nil) != (err == nil) {
				t.Errorf("error %v, want %v", err, c.wantErr)
			}
			if b, _ := os.ReadFile(path); string(b) != c.want {
				t.Errorf("file holds %q, want %q", b, c.want)
			}
			if l := leftovers(t, dir); len(l) != 0 {
				t.Errorf("temporary files left: %v", l)
			}
		})
	}
}

// Commit fsyncs the target's directory, after the rename; an error there
// is reported with the target's name, and the new file stands.
func TestCommitSyncsDirectory(t *testing.T) {
	defer func(f func(string) error) { syncDir = f }(syncDir)
	dir := t.TempDir()
	path := filepath.Join(dir, "latest.json")
	for _, c := range []struct {
		name    string
		syncErr error
		wantErr string
	}{
		{"synced", nil, ""},
		{"sync fails", errors.New("EIO"), "latest.json: syncing its directory: EIO"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var synced []string
			syncDir = func(d string) error {
				if _, err := os.Stat(path); err != nil {
					t.Errorf("directory synced before the rename: %v", err)
				}
				synced = append(synced, d)
				return c.syncErr
			}
			os.Remove(path)
			err := WriteFile(path, []byte(c.name))
			if c.wantErr == "" && err != nil || c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)) {
				t.Errorf("error %v, want %q", err, c.wantErr)
			}
			if len(synced) != 1 || synced[0] != dir {
				t.Errorf("directories synced: %v, want [%s]", synced, dir)
			}
			if b, _ := os.ReadFile(path); string(b) != c.name {
				t.Errorf("file holds %q, want %q", b, c.name)
			}
		})
	}
}

// The default syncDir fsyncs a real directory and reports a missing one.
func TestSyncDirDefault(t *testing.T) {
	if err := syncDir(t.TempDir()); err != nil {
		t.Errorf("syncing a directory: %v", err)
	}
	if err := syncDir(filepath.Join(t.TempDir(), "gone")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("syncing a missing directory: %v, want ErrNotExist", err)
	}
}

// A streamed file with a header filled in last appears whole on Commit
// and not before; Abort leaves nothing; a committed File refuses writes.
func TestFileStreamed(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "shard.bin")
	f, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(filepath.Base(f.Name()), TempPrefix+"shard.bin-") || filepath.Dir(f.Name()) != dir {
		t.Errorf("temporary file %s, want %s/%sshard.bin-*", f.Name(), dir, TempPrefix)
	}
	f.Write([]byte("....body"))
	f.WriteAt([]byte("HEAD"), 0)
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("target exists before Commit: %v", err)
	}
	if err := f.Commit(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "HEADbody" {
		t.Errorf("file holds %q, want HEADbody", b)
	}
	f.Abort() // no-op after Commit
	if _, err := os.Stat(path); err != nil {
		t.Errorf("Abort after Commit removed the file: %v", err)
	}
	if _, err := f.Write([]byte("x")); !errors.Is(err, os.ErrClosed) {
		t.Errorf("Write after Commit: %v, want ErrClosed", err)
	}
	if err := f.Commit(); !errors.Is(err, os.ErrClosed) {
		t.Errorf("second Commit: %v, want ErrClosed", err)
	}

	g, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	g.Write([]byte("discarded"))
	g.Abort()
	g.Abort()
	if b, _ := os.ReadFile(path); string(b) != "HEADbody" {
		t.Errorf("after Abort the file holds %q, want HEADbody", b)
	}
	if l := leftovers(t, dir); len(l) != 0 {
		t.Errorf("temporary files left: %v", l)
	}
}

// Errors name the target: a missing folder at Create, a rename that
// cannot happen at Commit (which then removes the temporary file).
func TestErrorsNameTarget(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "no-such-folder", "model.safetensors")
	if _, err := Create(missing); err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("Create in a missing folder: %v, want an error naming %s", err, missing)
	}
	// A non-empty directory cannot be renamed over.
	busy := filepath.Join(dir, "busy")
	os.MkdirAll(filepath.Join(busy, "inside"), 0o755)
	if err := WriteFile(busy, []byte("x")); err == nil || !strings.Contains(err.Error(), busy) {
		t.Errorf("Commit over a directory: %v, want an error naming %s", err, busy)
	}
	if l := leftovers(t, dir); len(l) != 0 {
		t.Errorf("temporary files left: %v", l)
	}
}

func ExampleWriteFile() {
	dir, _ := os.MkdirTemp("", "atomicfile")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "summary.md")
	if err := WriteFile(path, []byte("# run\n")); err != nil {
		fmt.Println(err)
	}
	b, _ := os.ReadFile(path)
	fmt.Printf("%q\n", b)
	// Output: "# run\n"
}
