//go:build !unix

package fineweb

import (
	"io"
	"os"
)

// mapFile reads the file where memory mapping is not available.
func mapFile(f *os.File, size int) ([]byte, func() error, error) {
	b := make([]byte, size)
	if _, err := io.ReadFull(io.NewSectionReader(f, 0, int64(size)), b); err != nil {
		return nil, nil, err
	}
	return b, func() error { return nil }, nil
}
