//go:build unix

package safetensors

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

// TestOpenNotRegular: a FIFO as model.safetensors used to hang forever (the
// open blocks until a writer comes); it, a directory and a device are
// refused at once, naming the path.
func TestOpenNotRegular(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "model.safetensors")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	for _, p := range []string{fifo, t.TempDir(), os.DevNull} {
		done := make(chan error, 1)
		go func() {
			f, err := Open(p)
			if err == nil {
				f.Close()
			}
			done <- err
		}()
		select {
		case err := <-done:
			if !errors.Is(err, regfile.ErrNotRegular) || !strings.Contains(err.Error(), p) {
				t.Errorf("Open(%s): %v, expected a not-a-regular-file error naming it", p, err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("Open(%s) blocked", p)
		}
	}
}
