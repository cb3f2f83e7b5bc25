//go:build unix

package data

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hilbert-ml/hilbert/internal/regfile"
)

// TestInputsNotRegular: a FIFO, a directory or a device given as a text,
// Parquet, Arrow or shard input is refused at once (a FIFO nobody writes
// used to block the open forever), naming the path.
func TestInputsNotRegular(t *testing.T) {
	dir := t.TempDir()
	opens := map[string]func(path string) error{
		"text": func(p string) error {
			_, err := BuildFromTextFiles(context.Background(), BuildConfig{Dir: t.TempDir()}, p)
			return err
		},
		"parquet": func(p string) error {
			b, err := NewBuilder(BuildConfig{Dir: t.TempDir()})
			if err != nil {
				return err
			}
			defer b.Abort()
			return b.AddParquet(context.Background(), p)
		},
		"arrow": func(p string) error {
			b, err := NewBuilder(BuildConfig{Dir: t.TempDir()})
			if err != nil {
				return err
			}
			defer b.Abort()
			return b.AddArrow(context.Background(), p)
		},
		"shard": func(p string) error {
			s, err := OpenShard(p, 0)
			if err == nil {
				s.Close()
			}
			return err
		},
	}
	for _, kind := range []string{"fifo", "directory", "device"} {
		for name, open := range opens {
			t.Run(kind+"/"+name, func(t *testing.T) {
				var p string
				switch kind {
				case "fifo":
					p = filepath.Join(t.TempDir(), "input")
					if err := syscall.Mkfifo(p, 0o644); err != nil {
						t.Skipf("mkfifo: %v", err)
					}
				case "directory":
					p = dir
				case "device":
					p = os.DevNull
				}
				done := make(chan error, 1)
				go func() { done <- open(p) }()
				var err error
				select {
				case err = <-done:
				case <-time.After(30 * time.Second):
					t.Fatalf("opening %s blocked", p)
				}
				if !errors.Is(err, regfile.ErrNotRegular) || !strings.Contains(err.Error(), p) {
					t.Fatalf("got %v, expected a not-a-regular-file error naming %s", err, p)
				}
			})
		}
	}
}
