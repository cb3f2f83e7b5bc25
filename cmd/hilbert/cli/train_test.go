package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTrainFromTextWithConfigFile runs `hilbert train` end to end on a
// slice of Opticks tokenized on the fly, configured by a YAML file whose
// values a flag overrides.
func TestTrainFromTextWithConfigFile(t *testing.T) {
	full := opticksText(t)
	dir := t.TempDir()
	text := filepath.Join(dir, "slice.txt")
	if err := os.WriteFile(text, full[:40_000], 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "run.yaml")
	yamlText := `name: cli
runs: ` + filepath.Join(dir, "runs") + `
model:
  layers: 1
  dim: 64
  context: 16
text: [` + text + `]
text_val_tokens: 400
micro_batch: 2
batch_seqs: 4
steps: 50
val_every: 2
val_tokens: 300
diag_every: 1000
panel_seqs: 2
panel_positions: 8
`
	if err := os.WriteFile(cfg, []byte(yamlText), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	// -steps on the command line wins over the file's 50.
	if code := Run([]string{"train", "-config", cfg, "-steps", "4", "-quiet"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout.String(), stderr.String())
	}
	if !strings.Contains(stdout.String(), "run cli: 4 updates") {
		t.Errorf("stdout: %s", stdout.String())
	}
	metrics, err := os.ReadFile(filepath.Join(dir, "runs", "cli", "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(metrics)), "\n")
	if len(lines) != 5 {
		t.Fatalf("%d metrics lines, want 5 (update 0, the initial validation, and 4 updates)", len(lines))
	}
	var last struct {
		Step       int      `json:"step"`
		ValLoss    *float64 `json:"val_loss"`
		Diameter   *float64 `json:"diameter"`
		HilbertRMS *float64 `json:"hilbert_rms"`
	}
	if err := json.Unmarshal([]byte(lines[4]), &last); err != nil {
		t.Fatal(err)
	}
	if last.Step != 4 || last.ValLoss == nil || last.Diameter == nil || last.HilbertRMS == nil {
		t.Errorf("last record %s lacks the final validation and diagnostics", lines[4])
	}
	// A second start without -resume or -overwrite is refused.
	stderr.Reset()
	if code := Run([]string{"train", "-config", cfg, "-steps", "4", "-quiet"}, &stdout, &stderr); code == 0 ||
		!strings.Contains(stderr.String(), "-resume") {
		t.Errorf("rerun over a checkpoint: exit %d, stderr %s", code, stderr.String())
	}
	// A config file with an unknown key names it.
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("stepz: 3\n"), 0o644)
	stderr.Reset()
	if code := Run([]string{"train", "-config", bad}, &stdout, &stderr); code == 0 || !strings.Contains(stderr.String(), "stepz") {
		t.Errorf("unknown key: exit %d, stderr %s", code, stderr.String())
	}
}

// TestCompareWritesTable runs `hilbert compare` on tiny shards with a small
// vocabulary and checks the report.
func TestCompareWritesTable(t *testing.T) {
	dir := t.TempDir()
	train, val := writeTinyShards(t, dir)
	cfg := filepath.Join(dir, "cmp.yaml")
	os.WriteFile(cfg, []byte(`name: cmp
runs: `+filepath.Join(dir, "runs")+`
model: {layers: 1, dim: 64, context: 16, vocab: 61}
train: [`+train+`]
val: `+val+`
micro_batch: 2
steps: 6
val_every: 3
val_tokens: 200
diag_every: 3
panel_seqs: 2
panel_positions: 8
`), 0o644)
	var stdout, stderr bytes.Buffer
	if code := Run([]string{"compare", "-config", cfg, "-seeds", "0,1", "-quiet"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout.String(), stderr.String())
	}
	report, err := os.ReadFile(filepath.Join(dir, "runs", "cmp", "compare.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| adamw | 0,1 |", "| rownorm | 0,1 |", "AdamW/RowNorm ratios: diameter"} {
		if !strings.Contains(string(report), want) {
			t.Errorf("compare.md lacks %q:\n%s", want, report)
		}
	}
	for _, f := range []string{"compare_val_loss.png", "compare_diameter.png", "adamw-seed1/metrics.jsonl", "rownorm-seed0/summary.md"} {
		if _, err := os.Stat(filepath.Join(dir, "runs", "cmp", f)); err != nil {
			t.Error(err)
		}
	}
	// Running it again continues (here: finds every run complete).
	stdout.Reset()
	if code := Run([]string{"compare", "-config", cfg, "-seeds", "0,1", "-quiet"}, &stdout, &stderr); code != 0 {
		t.Fatalf("second compare: exit %d: %s", code, stderr.String())
	}
}

// opticksText returns Newton's Opticks, the text every Go installation
// ships (the default job's), skipping the test where it is missing.
func opticksText(t *testing.T) []byte {
	t.Helper()
	opticks, err := opticksPath()
	if err != nil {
		t.Skip(err)
	}
	full, err := os.ReadFile(opticks)
	if err != nil {
		t.Fatal(err)
	}
	return full
}
