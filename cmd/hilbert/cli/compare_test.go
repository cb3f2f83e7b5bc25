package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// -heads, compare's old name for -head-optimizers, still sets them (on the
// command line or as the config key heads) with a warning on stderr; the
// new name gives none.
func TestCompareHeadOptimizersFlag(t *testing.T) {
	dir := t.TempDir()
	config := func(body string) string {
		p := filepath.Join(dir, strings.Fields(body)[0]+"yaml")
		os.WriteFile(p, []byte(body), 0o644)
		return p
	}
	const warning = "-heads is deprecated and will be removed: use -head-optimizers"
	for _, c := range []struct {
		name string
		args []string
		warn bool
	}{
		{"new flag", []string{"-head-optimizers", "sgd"}, false},
		{"old flag", []string{"-heads", "sgd"}, true},
		{"new config key", []string{"-config", config("head_optimizers: sgd\n")}, false},
		{"old config key", []string{"-config", config("heads: sgd\n")}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := Run(append([]string{"compare", "-runs", dir}, c.args...), &stdout, &stderr)
			e := stderr.String()
			// The value reached the head-optimizer list: "sgd" is refused.
			if code != 2 || !strings.Contains(e, `-head-optimizers "sgd": "sgd": want adamw or rownorm`) {
				t.Errorf("exit %d, stderr:\n%s", code, e)
			}
			if got := strings.Contains(e, warning); got != c.warn {
				t.Errorf("warning printed: %v, want %v; stderr:\n%s", got, c.warn, e)
			}
		})
	}
}
