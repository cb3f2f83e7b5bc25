// Package regfile opens files that must be regular files: model files,
// shards, text and Arrow inputs. A named pipe, a device, a socket or a
// directory given where one of those belongs is refused at once with an
// error naming the path and what it is, instead of blocking forever on a
// FIFO that no process writes or reading a device without end.
//
// It depends on the standard library only.
package regfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// ErrNotRegular is wrapped by Open's error for a path that is not a regular
// file.
var ErrNotRegular = errors.New("not a regular file")

// Open opens path for reading and checks that it is a regular file (after
// following symbolic links). On Unix the open does not block: a FIFO is
// opened with O_NONBLOCK, so that Open returns even when no process holds
// its other end, and is then refused. The error wraps ErrNotRegular, or the
// open's *fs.PathError.
func Open(path string) (*os.File, error) {
	f, err := openNonBlocking(path)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if err := Check(path, st.Mode()); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// Check returns nil if mode is a regular file's, else an error naming path
// and the kind of file it is, wrapping ErrNotRegular.
func Check(path string, mode fs.FileMode) error {
	if mode.IsRegular() {
		return nil
	}
	return fmt.Errorf("%s: %w (it is %s); expected a regular file", path, ErrNotRegular, kind(mode))
}

// kind names the type of a file that is not regular.
func kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeIrregular != 0:
		return "a file of unknown type"
	}
	return "not a regular file"
}

// SamePath reports whether two paths name the same file or folder: the
// same path once cleaned, or two that exist and are one (os.SameFile).
func SamePath(a, b string) bool {
	if filepath.Clean(a) == filepath.Clean(b) {
		return true
	}
	ia, ea := os.Stat(a)
	ib, eb := os.Stat(b)
	return ea == nil && eb == nil && os.SameFile(ia, ib)
}
