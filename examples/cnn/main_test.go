package main

import (
	"math"
	"testing"

	"github.com/hilbert-ml/hilbert/device/cpu"
)

// TestCNNLearns trains the example briefly: the loss starts near ln 4
// (uniform over the four orientations) and falls, and the held-out
// accuracy is far above chance (0.25); bad options are errors.
func TestCNNLearns(t *testing.T) {
	r, err := run(cpu.New(), options{train: 2048, test: 256, batch: 32, steps: 300, c1: 8, c2: 16, lr: 1e-2, noise: 0.3, seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("loss %.4f -> %.4f, held-out accuracy %.3f", r.FirstLoss, r.LastLoss, r.Accuracy)
	if math.Abs(r.FirstLoss-math.Log(classes)) > 0.7 {
		t.Errorf("initial loss %.4f, want near ln 4 = %.4f", r.FirstLoss, math.Log(classes))
	}
	if !(r.LastLoss < 0.25*r.FirstLoss) {
		t.Errorf("loss %.4f -> %.4f: did not fall to a quarter", r.FirstLoss, r.LastLoss)
	}
	if r.Accuracy < 0.85 {
		t.Errorf("held-out accuracy %.3f, want >= 0.85 (chance 0.25)", r.Accuracy)
	}
	if _, err := run(cpu.New(), options{train: 10, test: 10, batch: 20, steps: 1, c1: 1, c2: 1, lr: 1e-2}); err == nil {
		t.Error("batch larger than the training set: no error")
	}
}
