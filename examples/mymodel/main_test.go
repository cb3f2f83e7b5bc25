package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hilbert-ml/hilbert/cmd/hilbert/cli"
)

// run is the mymodel command (cli.Run with this package's family
// registered), returning its stdout; a non-zero exit fails the test.
func run(t *testing.T, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := cli.Run(args, &stdout, &stderr); code != 0 {
		t.Fatalf("mymodel %s: exit %d:\n%s", strings.Join(args, " "), code, stderr.String())
	}
	return stdout.String()
}

func records(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		delete(m, "elapsed_s")
		delete(m, "tokens_per_s")
		s, _ := json.Marshal(m)
		out = append(out, string(s))
	}
	return out
}

// TestMyModel: the example's own model, through the whole command: trained
// on the bundled text, stopped at update 6 and resumed to 12 bit for bit
// as the straight run of 12, its loss falling and RowNorm's D(S_t) <=
// 2 lr_t on its head; then sampled and evaluated; and -layers, a size
// the model does not have, refused naming it.
func TestMyModel(t *testing.T) {
	runs := t.TempDir()
	common := []string{"train", "-quiet", "-runs", runs, "-model", "mine", "-preset", "mine-tiny", "-schedule-steps", "12",
		"-micro-batch", "4", "-batch-seqs", "8", "-seq-len", "32", "-val-every", "6", "-val-tokens", "2048", "-diag-every", "3"}
	run(t, append(common, "-name", "straight", "-steps", "12")...)
	run(t, append(common, "-name", "resumed", "-steps", "6")...)
	run(t, append(common, "-name", "resumed", "-steps", "12", "-resume")...)
	a := records(t, filepath.Join(runs, "straight", "metrics.jsonl"))
	b := records(t, filepath.Join(runs, "resumed", "metrics.jsonl"))
	if len(a) != 13 || strings.Join(a, "\n") != strings.Join(b, "\n") {
		t.Fatalf("the resumed run differs from the straight one:\n%s\n---\n%s", strings.Join(a, "\n"), strings.Join(b, "\n"))
	}
	var first, last struct {
		ValLoss  *float64 `json:"val_loss"`
		Diameter *float64 `json:"diameter"`
		HeadLR   *float64 `json:"head_lr"`
	}
	json.Unmarshal([]byte(a[0]), &first)
	json.Unmarshal([]byte(a[12]), &last)
	if first.ValLoss == nil || last.ValLoss == nil || !(*last.ValLoss < *first.ValLoss-0.5) {
		t.Errorf("validation loss %v -> %v: want a fall of more than 0.5", first.ValLoss, last.ValLoss)
	}
	if last.Diameter == nil || last.HeadLR == nil || *last.Diameter > 2**last.HeadLR*(1+1e-6) {
		t.Errorf("D(S_T) %v with head LR %v: want D <= 2 lr", last.Diameter, last.HeadLR)
	}

	out := run(t, "sample", "-run", filepath.Join(runs, "resumed"), "-prompt", "Light", "-tokens", "6", "-temperature", "0")
	if !strings.HasPrefix(out, "Light") || len(out) <= len("Light\n") {
		t.Errorf("sample printed %q", out)
	}
	dir := filepath.Join(runs, "resumed")
	out = run(t, "eval", "-run", dir, "-val", filepath.Join(dir, "data", "text_val_000000.bin"), "-val-tokens", "2048")
	if !strings.Contains(out, "update 12: val loss") || !strings.Contains(out, "D(S_t)") {
		t.Errorf("eval printed %q", out)
	}

	var stdout, stderr bytes.Buffer
	if code := cli.Run([]string{"train", "-runs", runs, "-name", "x", "-model", "mine", "-preset", "mine-tiny", "-layers", "2"}, &stdout, &stderr); code == 0 ||
		!strings.Contains(stderr.String(), "-layers") || !strings.Contains(stderr.String(), "no Layers field") {
		t.Errorf("-layers for a model without layers: exit %d: %s", code, stderr.String())
	}
}
