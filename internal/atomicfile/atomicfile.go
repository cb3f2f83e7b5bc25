// Package atomicfile writes files so that a crash leaves either the old
// file or the new one under the target's name, never a part of either.
// Every file Hilbert writes for keeps (checkpoints, safetensors, shards and
// their manifest, metrics, reports, plots, tokenizer merges) goes through
// it.
//
// The bytes go to a temporary file beside the target, named TempPrefix,
// the target's base name, "-" and a random suffix. Commit fsyncs it,
// closes it, renames it over the target and then fsyncs the directory, so
// that the rename itself survives a power loss. On any error, and on
// Abort, the temporary file is removed and the target is left as it was.
//
// One file-mode rule: the new file has mode Mode (0644) less the process's
// umask, as os.WriteFile(path, data, 0o644) gives a new file, whatever the
// mode of a file it replaces. A symbolic link at the target is replaced,
// not followed.
//
// It depends on the standard library only.
package atomicfile

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// TempPrefix starts the name of every temporary file, so a folder's
// leftovers from a killed writer can be found with
// filepath.Glob(filepath.Join(dir, TempPrefix+"*")).
const TempPrefix = ".tmp-"

// Mode is the mode a written file is created with, before the umask.
const Mode fs.FileMode = 0o644

// syncDir fsyncs a directory; tests replace it to see that Commit calls it.
var syncDir = func(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	// Some file systems cannot fsync a directory; the rename stands.
	if errors.Is(err, syscall.EINVAL) || errors.Is(err, errors.ErrUnsupported) {
		return nil
	}
	return err
}

// File is a file being written that appears under its target's name only
// when Commit succeeds. It is not safe for concurrent use.
type File struct {
	path string
	f    *os.File
	done bool // committed or aborted
}

// Create starts a file that will appear at path on Commit. The folder must
// exist.
func Create(path string) (*File, error) {
	dir, base := filepath.Split(path)
	dir = cmp.Or(dir, ".")
	for range 100 {
		name := filepath.Join(dir, TempPrefix+base+"-"+strconv.FormatUint(rand.Uint64(), 36))
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, Mode)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("writing %s: %w", path, err)
		}
		return &File{path: path, f: f}, nil
	}
	return nil, fmt.Errorf("writing %s: no free temporary name in %s after 100 tries", path, dir)
}

// Name returns the temporary file's path, where the bytes are until Commit.
func (f *File) Name() string { return f.f.Name() }

// Write appends p to the temporary file (os.ErrClosed after Commit or
// Abort).
func (f *File) Write(p []byte) (int, error) { return f.f.Write(p) }

// WriteAt writes p at offset off of the temporary file, to fill in a
// header once the body is written.
func (f *File) WriteAt(p []byte, off int64) (int, error) { return f.f.WriteAt(p, off) }

// Commit fsyncs and closes the temporary file, renames it over the target
// and fsyncs the target's directory. On error the temporary file is
// removed; the target is then the old file, except when only the
// directory's fsync failed (the rename is done but may not survive a power
// loss), which the error says.
func (f *File) Commit() error {
	if f.done {
		return fmt.Errorf("writing %s: %w", f.path, os.ErrClosed)
	}
	f.done = true
	tmp := f.f.Name()
	err := f.f.Sync()
	if cerr := f.f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, f.path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing %s: %w", f.path, err)
	}
	if err := syncDir(filepath.Dir(f.path)); err != nil {
		return fmt.Errorf("writing %s: syncing its directory: %w", f.path, err)
	}
	return nil
}

// Abort closes and removes the temporary file; the target is untouched.
// After Commit, or a second time, it does nothing.
func (f *File) Abort() {
	if f.done {
		return
	}
	f.done = true
	tmp := f.f.Name()
	f.f.Close()
	os.Remove(tmp)
}

// Write creates path's new contents with fn and commits them (see File);
// when fn returns an error, or panics, the target is left as it was and
// fn's error is returned as it is.
func Write(path string, fn func(w io.Writer) error) error {
	f, err := Create(path)
	if err != nil {
		return err
	}
	defer f.Abort()
	if err := fn(f); err != nil {
		return err
	}
	return f.Commit()
}

// WriteFile atomically replaces path's contents with data (see File).
func WriteFile(path string, data []byte) error {
	return Write(path, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}
