package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hilbert-ml/hilbert/safetensors"
)

// setTensorValue rewrites one float32 of a tensor of a safetensors file
// (checksums recomputed, as a run that diverged would have written it).
func setTensorValue(t *testing.T, path, name string, i int, x float32) {
	t.Helper()
	f, err := safetensors.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []safetensors.Tensor
	for _, in := range f.Tensors() {
		v := make([]float32, in.Numel())
		if err := f.ReadFloat32(in.Name, in.Shape, v); err != nil {
			t.Fatal(err)
		}
		if in.Name == name {
			v[i] = x
		}
		out = append(out, safetensors.Tensor{Name: in.Name, DType: safetensors.F32, Shape: in.Shape, Data: safetensors.EncodeFloat32(v)})
	}
	meta := f.Metadata()
	f.Close()
	if err := safetensors.Save(path, out, meta); err != nil {
		t.Fatal(err)
	}
}

// sample and eval read a checkpoint as a resume does: NaN weights and a
// latest.json that points outside the run are errors that say so.
func TestSampleAndEvalCheckTheCheckpoint(t *testing.T) {
	run := tinyTextRun(t)
	val := filepath.Join(run, "data", "text_val_000000.bin")
	latest := filepath.Join(run, "checkpoints", "latest.json")
	good, err := os.ReadFile(latest)
	if err != nil {
		t.Fatal(err)
	}
	model := filepath.Join(run, "checkpoints", "step-0000003", "model.safetensors")
	clean, err := os.ReadFile(model)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		break_ func()
		want   string
	}{
		{"NaN weight", func() { setTensorValue(t, model, "head.weight", 9, float32(math.NaN())) }, `tensor "head.weight" holds NaN at index 9`},
		{"latest.json outside the run", func() { os.WriteFile(latest, []byte(`{"dir": "../../..", "step": 3}`), 0o644) }, `"../../.." points outside the run's checkpoints folder`},
	} {
		c.break_()
		for _, args := range [][]string{
			{"sample", "-run", run, "-tokens", "4"},
			{"eval", "-run", run, "-val", val},
		} {
			var stdout, stderr bytes.Buffer
			code := Run(args, &stdout, &stderr)
			if code == 0 || !strings.Contains(stderr.String(), c.want) {
				t.Errorf("%s: %s: exit %d, stdout %q, stderr %q; want an error saying %q", c.name, args[0], code, stdout.String(), stderr.String(), c.want)
			}
		}
		os.WriteFile(latest, good, 0o644)
		os.WriteFile(model, clean, 0o644)
	}
}

// With latest.json lost beside an intact checkpoint folder, a fresh start
// refuses to delete it, and -resume says how to restore latest.json, not
// to run without -resume.
func TestTrainWithLostLatest(t *testing.T) {
	run := tinyTextRun(t)
	latest := filepath.Join(run, "checkpoints", "latest.json")
	os.Remove(latest)
	args := tinyTextArgs(run)
	for _, c := range []struct {
		extra []string
		want  string
	}{
		{nil, "already has a checkpoint"},
		{[]string{"-resume"}, `write {"dir": "step-0000003", "step": 3} to ` + latest},
	} {
		var stdout, stderr bytes.Buffer
		code := Run(append(args, c.extra...), &stdout, &stderr)
		if code == 0 || !strings.Contains(stderr.String(), c.want) || strings.Contains(stderr.String(), "without -resume") {
			t.Errorf("train %q: exit %d, stderr %q, want %q", c.extra, code, stderr.String(), c.want)
		}
		if _, err := os.Stat(filepath.Join(run, "checkpoints", "step-0000003", "model.safetensors")); err != nil {
			t.Fatalf("train %q: the checkpoint is gone: %v", c.extra, err)
		}
	}
}

// tinyTextArgs is the train command line of tinyTextRun's run.
func tinyTextArgs(run string) []string {
	return []string{"train", "-name", "tiny", "-runs", filepath.Dir(run), "-text", filepath.Join(filepath.Dir(filepath.Dir(run)), "slice.txt"), "-text-val-tokens", "500",
		"-layers", "1", "-dim", "64", "-context", "32", "-micro-batch", "2", "-batch-seqs", "4",
		"-steps", "3", "-val-every", "3", "-val-tokens", "300", "-diag-every", "3",
		"-panel-seqs", "2", "-panel-positions", "8", "-quiet"}
}

// A resume at the update -steps asks for has nothing to train: it says so
// and gives the checkpoint's validation (logged, or computed when none
// was logged at that update, as for a checkpoint written on a signal),
// not "val loss NaN".
func TestResumeWithNothingToTrain(t *testing.T) {
	run := tinyTextRun(t)
	metrics := filepath.Join(run, "metrics.jsonl")
	recs := metricsLines(t, metrics)
	logged := recs[len(recs)-1]["val_loss"].(float64)
	for _, c := range []struct {
		name, want string
		edit       func()
	}{
		{"validation logged", "its validation at update 3: val loss " + fmt.Sprintf("%.4f", logged), func() {}},
		{"no validation logged", "the checkpoint's validation, computed now: val loss " + fmt.Sprintf("%.4f", logged) + " over 288 tokens", func() {
			b, _ := os.ReadFile(metrics)
			lines := strings.Split(strings.TrimSpace(string(b)), "\n")
			var last map[string]any
			json.Unmarshal([]byte(lines[len(lines)-1]), &last)
			delete(last, "val_loss")
			l, _ := json.Marshal(last)
			lines[len(lines)-1] = string(l)
			os.WriteFile(metrics, []byte(strings.Join(lines, "\n")+"\n"), 0o644)
		}},
	} {
		c.edit()
		var stdout, stderr bytes.Buffer
		code := Run(append(tinyTextArgs(run), "-resume"), &stdout, &stderr)
		out := stdout.String()
		if code != 0 || !strings.Contains(out, "is already at update 3 of -steps 3: nothing to train") || !strings.Contains(out, c.want) || strings.Contains(out, "NaN") {
			t.Errorf("%s: exit %d, stdout %q, stderr %q, want %q", c.name, code, out, stderr.String(), c.want)
		}
	}
}
