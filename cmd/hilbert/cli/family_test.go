package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// gpt2Args is docs/writing-a-model.md's GPT-2 run on the bundled text, made small:
// gpt2-tiny with its head untied (so that RowNorm takes it), 20 updates.
func gpt2Args(runs, name string) []string {
	return []string{"train", "-quiet", "-runs", runs, "-name", name, "-model", "gpt2", "-preset", "gpt2-tiny", "-untie-head",
		"-steps", "20", "-micro-batch", "4", "-batch-seqs", "8", "-val-every", "10", "-val-tokens", "2048",
		"-diag-every", "5", "-checkpoint-every", "5"}
}

// metricsWithoutTimes is metrics.jsonl with the timings removed, one
// record per line.
func metricsWithoutTimes(t *testing.T, path string) []string {
	t.Helper()
	var out []string
	for _, m := range metricsLines(t, path) {
		delete(m, "elapsed_s")
		delete(m, "tokens_per_s")
		b, _ := json.Marshal(m)
		out = append(out, string(b))
	}
	return out
}

// TestGPT2RunKilledResumedSampledEvaluated: hilbert train -model gpt2
// -preset gpt2-tiny -untie-head on the bundled text, killed (SIGKILL)
// after a checkpoint and resumed (-resume -break-lock: the kill left its
// lock), ends bit for bit where the
// uninterrupted run does (every metric, the final weights); hilbert
// sample and eval read the run; the tied head with RowNorm is refused
// before anything is tokenized.
func TestGPT2RunKilledResumedSampledEvaluated(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts hilbert processes")
	}
	runs := t.TempDir()
	var stdout, stderr bytes.Buffer
	if code := Run(gpt2Args(runs, "straight"), &stdout, &stderr); code != 0 {
		t.Fatalf("uninterrupted run: exit %d: %s", code, stderr.String())
	}

	// The same run in a child process, killed once update 10's
	// checkpoint is in force.
	cmd := exec.Command(os.Args[0], "-test.run=^TestHilbertProcess$")
	cmd.Env = append(os.Environ(), "HILBERT_TEST_ARGS="+strings.Join(gpt2Args(runs, "killed"), "\x1f"))
	var childErr bytes.Buffer
	cmd.Stderr = &childErr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	latest := filepath.Join(runs, "killed", "checkpoints", "latest.json")
	deadline := time.Now().Add(3 * time.Minute)
	for {
		var ptr struct{ Step int }
		if b, err := os.ReadFile(latest); err == nil && json.Unmarshal(b, &ptr) == nil && ptr.Step >= 10 {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("no checkpoint of update 10:\n%s", childErr.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	cmd.Process.Kill()
	cmd.Wait()
	var ptr struct{ Step int }
	b, _ := os.ReadFile(latest)
	json.Unmarshal(b, &ptr)
	if ptr.Step >= 20 {
		t.Fatalf("the child finished (update %d) before it was killed", ptr.Step)
	}
	stderr.Reset()
	if code := Run(append(gpt2Args(runs, "killed"), "-resume", "-break-lock"), &stdout, &stderr); code != 0 {
		t.Fatalf("resume after kill -9 at update %d: exit %d: %s", ptr.Step, code, stderr.String())
	}
	a := metricsWithoutTimes(t, filepath.Join(runs, "straight", "metrics.jsonl"))
	k := metricsWithoutTimes(t, filepath.Join(runs, "killed", "metrics.jsonl"))
	if len(a) != 21 || strings.Join(a, "\n") != strings.Join(k, "\n") {
		t.Fatalf("metrics differ after kill -9 and resume (%d and %d records):\n%s\n---\n%s", len(a), len(k), strings.Join(a, "\n"), strings.Join(k, "\n"))
	}
	if !strings.Contains(a[20], `"diameter"`) || !strings.Contains(a[20], `"hilbert_rms"`) {
		t.Errorf("the untied head's last record has no D(S_t) or Hilbert RMS: %s", a[20])
	}
	for _, f := range []string{"model.safetensors", "optim.safetensors"} {
		x, err1 := os.ReadFile(filepath.Join(runs, "straight", "checkpoints", "step-0000020", f))
		y, err2 := os.ReadFile(filepath.Join(runs, "killed", "checkpoints", "step-0000020", f))
		if err1 != nil || err2 != nil || !bytes.Equal(x, y) {
			t.Errorf("%s differs between the uninterrupted and the resumed run (%v, %v)", f, err1, err2)
		}
	}

	// sample: greedy, the same text from both runs.
	samples := map[string]string{}
	for _, name := range []string{"straight", "killed"} {
		stdout.Reset()
		stderr.Reset()
		if code := Run([]string{"sample", "-run", filepath.Join(runs, name), "-prompt", "Light", "-tokens", "8", "-temperature", "0"}, &stdout, &stderr); code != 0 {
			t.Fatalf("sample %s: exit %d: %s", name, code, stderr.String())
		}
		samples[name] = stdout.String()
	}
	if !strings.HasPrefix(samples["killed"], "Light") || len(samples["killed"]) <= len("Light\n") || samples["killed"] != samples["straight"] {
		t.Errorf("samples %q and %q", samples["straight"], samples["killed"])
	}
	// eval: the validation loss the run logged at its last update.
	var last struct {
		ValLoss float64 `json:"val_loss"`
	}
	json.Unmarshal([]byte(k[20]), &last)
	stdout.Reset()
	run := filepath.Join(runs, "killed")
	if code := Run([]string{"eval", "-run", run, "-val", filepath.Join(run, "data", "text_val_000000.bin"), "-val-tokens", "2048"}, &stdout, &stderr); code != 0 {
		t.Fatalf("eval: exit %d: %s", code, stderr.String())
	}
	if want := fmt.Sprintf("update 20: val loss %.6f", last.ValLoss); !strings.Contains(stdout.String(), want) {
		t.Errorf("eval printed %q, want %q", stdout.String(), want)
	}

	// The tied head with RowNorm: refused at once, naming the ways out.
	stderr.Reset()
	args := []string{"train", "-quiet", "-runs", runs, "-name", "tied", "-model", "gpt2", "-preset", "gpt2-tiny", "-steps", "2"}
	if code := Run(args, &stdout, &stderr); code != exitUsage || !strings.Contains(stderr.String(), "-untie-head") || !strings.Contains(stderr.String(), "-head adamw") {
		t.Errorf("tied head with RowNorm: exit %d: %s", code, stderr.String())
	}
	if _, err := os.Stat(filepath.Join(runs, "tied", "data")); err == nil {
		t.Error("the refused run tokenized its data first")
	}
}

// TestCompareGPT2: hilbert compare -model gpt2 trains both heads with
// -untie-head, and without it refuses RowNorm's tied head before any run.
func TestCompareGPT2(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: trains")
	}
	cfg, runs := tinyRun(t, "")
	var stdout, stderr bytes.Buffer
	base := []string{"compare", "-config", cfg, "-model", "gpt2", "-preset", "gpt2-tiny", "-layers", "1", "-context", "16", "-seeds", "0", "-steps", "4", "-quiet"}
	if code := Run(base, &stdout, &stderr); code != exitUsage || !strings.Contains(stderr.String(), "-untie-head") {
		t.Fatalf("compare with a tied head: exit %d: %s", code, stderr.String())
	}
	if entries, _ := os.ReadDir(runs); len(entries) != 0 {
		t.Errorf("the refused comparison left %d entries in %s", len(entries), runs)
	}
	stdout.Reset()
	stderr.Reset()
	if code := Run(append(base, "-untie-head"), &stdout, &stderr); code != 0 {
		t.Fatalf("compare -untie-head: exit %d: %s", code, stderr.String())
	}
	for _, want := range []string{"adamw-seed0: val loss", "rownorm-seed0: val loss", "compare.md"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("compare's output lacks %q:\n%s", want, stdout.String())
		}
	}
}
