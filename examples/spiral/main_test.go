package main

import (
	"math"
	"testing"

	"github.com/hilbert-ml/hilbert/device/cpu"
)

// TestSpiralLearns runs the example briefly: the loss starts near ln 3
// (uniform over three classes) and falls, and the classifier beats
// chance; bad options are errors.
func TestSpiralLearns(t *testing.T) {
	r, err := run(cpu.New(), options{points: 60, classes: 3, hidden: 32, steps: 80, lr: 2e-2, seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("loss %.4f -> %.4f, accuracy %.3f", r.FirstLoss, r.LastLoss, r.Accuracy)
	if math.Abs(r.FirstLoss-math.Log(3)) > 0.5 {
		t.Errorf("initial loss %.4f, want near ln 3 = %.4f", r.FirstLoss, math.Log(3))
	}
	if !(r.LastLoss < 0.7*r.FirstLoss) {
		t.Errorf("loss %.4f -> %.4f: did not fall by 30%%", r.FirstLoss, r.LastLoss)
	}
	if r.Accuracy < 0.6 {
		t.Errorf("training accuracy %.3f, want > 0.6 (chance: 0.33)", r.Accuracy)
	}
	if _, err := run(cpu.New(), options{points: 10, classes: 1, hidden: 8, steps: 1, lr: 1e-2}); err == nil {
		t.Error("one class: no error")
	}
}
