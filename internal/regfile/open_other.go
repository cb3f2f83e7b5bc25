//go:build !unix

package regfile

import "os"

// openNonBlocking opens path read-only (where FIFOs do not block an open).
func openNonBlocking(path string) (*os.File, error) { return os.Open(path) }
