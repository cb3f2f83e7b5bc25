package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hilbert-ml/hilbert/data/fineweb"
)

func TestPrepare(t *testing.T) {
	in := t.TempDir()
	for i, text := range []string{"First document.\n", "Second one, a little longer.\n"} {
		os.WriteFile(filepath.Join(in, "doc"+string(rune('a'+i))+".txt"), []byte(text), 0o644)
	}
	out := t.TempDir()
	args := []string{"-out", out, "-quiet", "-val-every", "2", filepath.Join(in, "*.txt")}
	var stdout, stderr bytes.Buffer
	if err := runPrepare(args, &stdout, &stderr); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	for _, want := range []string{"documents 2", "shards    1 train, 1 validation", "MB/s"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, stdout.String())
		}
	}
	for _, name := range []string{"fineweb_train_000000.bin", "fineweb_val_000000.bin"} {
		s, err := fineweb.OpenShard(filepath.Join(out, name), 50257)
		if err != nil {
			t.Fatal(err)
		}
		if s.Len() < 2 || s.Tokens()[0] != 50256 {
			t.Errorf("%s: %d tokens, first %v", name, s.Len(), s.Tokens()[:1])
		}
		s.Close()
	}
	if err := runPrepare(args, &stdout, &stderr); err == nil || !strings.Contains(err.Error(), "overwrit") {
		t.Errorf("second run without -overwrite: %v", err)
	}
	if err := runPrepare(append([]string{"-overwrite"}, args...), &stdout, &stderr); err != nil {
		t.Errorf("with -overwrite: %v", err)
	}
	if err := runPrepare([]string{"-out", out}, &stdout, &stderr); err == nil {
		t.Error("no inputs accepted")
	}
}
