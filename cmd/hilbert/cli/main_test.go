package cli

import (
	"bytes"
	"strings"
	"testing"
)

// TestSubcommandScaffolding runs every subcommand (and bench target)
// through the shared flag scaffolding: -h prints the usage and exits 0; a stray positional argument is a usage error (exit 2)
// naming it, except for prepare, whose inputs are positional.
func TestSubcommandScaffolding(t *testing.T) {
	var cmds [][]string
	for name := range subcommands {
		if name != "bench" {
			cmds = append(cmds, []string{name})
		}
	}
	for _, target := range benchTargetNames() {
		cmds = append(cmds, []string{"bench", target})
	}
	for _, cmd := range cmds {
		name := strings.Join(cmd, " ")
		var stdout, stderr bytes.Buffer
		if code := Run(append(cmd[:len(cmd):len(cmd)], "-h"), &stdout, &stderr); code != 0 || !strings.Contains(strings.ToLower(stderr.String()), "usage") {
			t.Errorf("%s -h: exit %d, want 0 and the usage:\n%s", name, code, stderr.String())
		}
		if name == "prepare" {
			continue
		}
		stdout.Reset()
		stderr.Reset()
		code := Run(append(cmd[:len(cmd):len(cmd)], "stray"), &stdout, &stderr)
		if want := `unexpected arguments ["stray"]`; code != 2 || !strings.Contains(stderr.String(), want) {
			t.Errorf("%s stray: exit %d, want 2 and %q:\n%s", name, code, want, stderr.String())
		}
	}
}
