package main

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/nn"
)

// TestCustomModelLearns trains the model briefly: the loss starts near
// ln vocab and falls by half; the saved checkpoint loads into a fresh
// model; bad options are errors.
func TestCustomModelLearns(t *testing.T) {
	out := filepath.Join(t.TempDir(), "m.safetensors")
	o := options{vocab: 16, dim: 16, layers: 1, batch: 4, seq: 8, steps: 40, lr: 3e-2, seed: 1, out: out}
	first, last, err := run(cpu.New(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("loss %.4f -> %.4f", first, last)
	if math.Abs(first-math.Log(16)) > 0.3 {
		t.Errorf("first loss %.4f, want near ln 16 = %.4f", first, math.Log(16))
	}
	if !(last < 0.5*first) {
		t.Errorf("loss %.4f -> %.4f: did not halve", first, last)
	}
	init := nn.NewInit(cpu.New(), 9, 0.02)
	fresh := newMLPLM(init, 16, 16, 1)
	if _, err := nn.Load(out, fresh); err != nil {
		t.Errorf("reload the checkpoint: %v", err)
	}
	o.steps = 1
	if _, _, err := run(cpu.New(), o); err == nil {
		t.Error("steps 1: no error")
	}
}
