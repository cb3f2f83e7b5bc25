package cli

import (
	"flag"
	"io"
	"os"
	"strings"
	"testing"
	"time"
)

// FuzzConfig parses arbitrary bytes as a train config file and applies
// what it accepts to train's flags: an error naming the file, never a
// panic. The seeds are the repository's example config and files that
// use every kind of key, so `go test` runs them as tests.
func FuzzConfig(f *testing.F) {
	example, err := os.ReadFile("../../../configs/opticks.yaml")
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{
		string(example),
		"",
		"# only a comment\n",
		"name: tiny\nruns: /tmp/runs\nmodel: {layers: 1, dim: 64, context: 16, vocab: 61}\nsteps: 6\nval_every: 3\n",
		"text: [a.txt, b.txt]\ntext_val_tokens: 400\nhead: adamw\nmuon_lr: 0.01\nclip: 0.5\nwarmup: 0\n",
		"train: 'shards/*.bin'\nval: shards/val.bin\nmodel:\n  rope_base: 500000\n  init_std: 0.02\n  mlp_hidden: 100\n",
		"steps: 3\nsteps: 4\n",
		"runs_dir: x\n",
		"model: [1, 2]\n",
		"- a\n- b\n",
		"threads: -2\n",
	} {
		f.Add([]byte(s))
	}
	timeout := time.Minute
	f.Fuzz(func(t *testing.T, data []byte) {
		const path = "fuzz.yaml"
		cf, err := parseConfig(path, data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "config "+path) {
				t.Fatalf("the error does not name the file: %v", err)
			}
			return
		}
		var fs *flag.FlagSet
		if _, err := parseTrainFlags("train", trainUsage, []string{"-h"}, io.Discard, func(f *flag.FlagSet) { rankFlags(f, &timeout); fs = f }); err != nil || fs == nil {
			t.Fatalf("no flag set: %v", err)
		}
		set, err := cf.apply(fs, map[string]bool{})
		if err != nil {
			if !strings.HasPrefix(err.Error(), "config "+path+" line ") {
				t.Fatalf("the error does not name the file and line: %v", err)
			}
			return
		}
		for name := range set {
			if fs.Lookup(name) == nil {
				t.Fatalf("apply set %q, which is no flag", name)
			}
		}
	})
}
