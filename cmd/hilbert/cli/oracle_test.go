package cli

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hilbert-ml/hilbert/study/oraclestudy"
)

// TestOracleStudy runs `hilbert oracle` end to end on a slice of Opticks
// (gzip-compressed, as the shared corpus is) with a tiny byte-level
// model: the flags reach the study (package study/oraclestudy, where the
// measurements themselves are tested), its files appear, the summary line
// goes to stdout, and a second run without -overwrite is refused.
func TestOracleStudy(t *testing.T) {
	full := opticksText(t)
	dir := t.TempDir()
	text := filepath.Join(dir, "slice.txt.gz")
	writeGzip(t, text, full[:60_000])
	out := filepath.Join(dir, "study")
	args := []string{"oracle", "-out", out, "-text", text, "-dim", "64", "-layers", "1", "-context", "16",
		"-micro-batch", "4", "-batch-seqs", "4", "-steps", "4", "-every", "2", "-val-tokens", "300", "-val-every", "2",
		"-tol", "1e-3", "-quiet"}
	var stdout, stderr bytes.Buffer
	if code := Run(args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout.String(), stderr.String())
	}
	if !strings.Contains(stdout.String(), "oracle: 3 measurements over 4 updates") {
		t.Errorf("stdout: %s", stdout.String())
	}
	if strings.Contains(stderr.String(), "update ") || !strings.Contains(stderr.String(), "d 64, 1 layers, V 256") {
		t.Errorf("stderr with -quiet: %s", stderr.String())
	}
	rows, err := oraclestudy.ReadRows(filepath.Join(out, "oracle.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3 || rows[2].Step != 4 || rows[0].Gap > 1e-3 {
		t.Errorf("oracle.jsonl: %+v", rows)
	}
	for _, name := range []string{"oracle.csv", "ratio.png", "summary.md", "train/metrics.jsonl", "data/bytes_train_000000.bin", "data/bytes_val_000000.bin"} {
		if _, err := os.Stat(filepath.Join(out, name)); err != nil {
			t.Error(err)
		}
	}
	stdout.Reset()
	stderr.Reset()
	if code := Run(args, &stdout, &stderr); code == 0 || !strings.Contains(stderr.String(), "-overwrite") {
		t.Errorf("second run: exit %d, stderr %s", code, stderr.String())
	}
	stderr.Reset()
	if code := Run([]string{"oracle", "-out", out, "-replot"}, &stdout, &stderr); code != 0 {
		t.Errorf("-replot: exit %d, stderr %s", code, stderr.String())
	}
}

// Bad flags fail with an error naming the setting, before any training.
func TestOracleFlagErrors(t *testing.T) {
	opticks, err := opticksPath()
	if err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-vocab", "255"}, "vocab 255"},
		{[]string{"-vocab", "1048577"}, "vocab 1048577"},
		{[]string{"-every", "0"}, "every 0"},
		{[]string{"-timing", "8by3"}, `-timing: size "8by3"`},
		{[]string{"extra"}, "unexpected arguments"},
		{[]string{"-val-text", opticks + ".other", "-val-tokens", "100"}, "-val-tokens with -val-text"},
		{[]string{"-val-text", opticks}, "both training text and val text"},
	} {
		var stdout, stderr bytes.Buffer
		args := append([]string{"oracle", "-out", filepath.Join(dir, "bad"), "-text", opticks}, c.args...)
		if code := Run(args, &stdout, &stderr); code == 0 || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %s; want %q", c.args, code, stderr.String(), c.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "bad", "train")); err == nil {
		t.Error("a bad flag started a training run")
	}
}

// -timing prints the table and writes timing.md without training.
func TestOracleTiming(t *testing.T) {
	out := t.TempDir()
	var stdout, stderr bytes.Buffer
	if code := Run([]string{"oracle", "-out", out, "-timing", "8x3,20x6", "-timing-samples", "200"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d\nstderr: %s", code, stderr.String())
	}
	table, err := os.ReadFile(filepath.Join(out, "timing.md"))
	if err != nil {
		t.Fatal(err)
	}
	if string(table) != stdout.String() || !strings.Contains(string(table), "| 8 | 3 | 3 | 28 |") || !strings.Contains(string(table), "| 20 | 6 | 6 | 190 |") {
		t.Errorf("timing table:\n%s\nstdout:\n%s", table, stdout.String())
	}
	if _, err := os.Stat(filepath.Join(out, "train")); err == nil {
		t.Error("-timing trained a model")
	}
}

func writeGzip(t *testing.T, path string, data []byte) {
	t.Helper()
	var buf bytes.Buffer
	z := gzip.NewWriter(&buf)
	z.Write(data)
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// -val-text names the validation files and leaves -val-tokens at 0 (the
// whole of them).
func TestOracleValTextFlag(t *testing.T) {
	f, err := parseOracleFlags([]string{"-val-text", "a.txt,b.txt.gz"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c := f.study; !slices.Equal(c.ValText, []string{"a.txt", "b.txt.gz"}) || c.ValTokens != 0 {
		t.Errorf("val text %q, val tokens %d", c.ValText, c.ValTokens)
	}
	if f, err = parseOracleFlags(nil, io.Discard); err != nil || f.study.ValText != nil || f.study.ValTokens != 65_536 {
		t.Errorf("defaults: %+v, %v", f, err)
	}
}
