//go:build unix

package regfile

import (
	"os"
	"syscall"
)

// openNonBlocking opens path read-only with O_NONBLOCK, which makes opening
// a FIFO return at once; for a regular file the flag has no effect (reads
// of regular files never block on Unix).
func openNonBlocking(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
}
