//go:build unix

package atomicfile

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// The mode rule: Mode less the umask, for a new file and for one that
// replaces a file of another mode.
func TestModeRule(t *testing.T) {
	for _, c := range []struct {
		name  string
		umask int
		old   fs.FileMode // 0: no old file
		want  fs.FileMode
	}{
		{"new, umask 022", 0o022, 0, 0o644},
		{"new, umask 077", 0o077, 0, 0o600},
		{"replaces 0600, umask 022", 0o022, 0o600, 0o644},
		{"replaces 0755, umask 002", 0o002, 0o755, 0o644},
		{"new, umask 000", 0, 0, 0o644},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "f")
			if c.old != 0 {
				if err := os.WriteFile(path, []byte("old"), c.old); err != nil {
					t.Fatal(err)
				}
				os.Chmod(path, c.old)
			}
			old := syscall.Umask(c.umask)
			err := WriteFile(path, []byte("new"))
			syscall.Umask(old)
			if err != nil {
				t.Fatal(err)
			}
			info, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if got := info.Mode().Perm(); got != c.want {
				t.Errorf("mode %v, want %v", got, c.want)
			}
		})
	}
}
