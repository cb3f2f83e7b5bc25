package main

import (
	"testing"

	"github.com/hilbert-ml/hilbert/device/cpu"
)

// TestPaperRecipeLearns runs the loop briefly with each head: the loss
// falls, D(S_t) is logged, zero exactly when lr_t is (the first update,
// in warmup), and with RowNorm at most 2 lr_t (every row of a RowNorm
// step has norm lr_t); the AdamW head has no such bound to meet.
func TestPaperRecipeLearns(t *testing.T) {
	for _, head := range []string{"rownorm", "adamw"} {
		t.Run(head, func(t *testing.T) {
			logs, err := run(cpu.New(), options{head: head, layers: 1, dim: 64, context: 32, batch: 4, steps: 30, logEvery: 10,
				muonLR: 0.02, embedLR: 0.02, headLR: 0.01, seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			if len(logs) != 4 {
				t.Fatalf("%d log lines, want 4 (updates 1, 10, 20, 30)", len(logs))
			}
			first, last := logs[0], logs[len(logs)-1]
			t.Logf("loss %.4f -> %.4f; D %.4g at lr %.4g", first.Loss, last.Loss, last.D, last.LR)
			if !(last.Loss < 0.7*first.Loss) {
				t.Errorf("loss %.4f at update %d -> %.4f at %d: did not fall by 30%%", first.Loss, first.Step, last.Loss, last.Step)
			}
			for _, l := range logs {
				// The first update runs at lr 0 (warmup): a zero step.
				if (l.LR == 0) != (l.D == 0) || !(l.D >= 0) {
					t.Errorf("update %d: D(S_t) = %v at lr %v", l.Step, l.D, l.LR)
				}
				if head == "rownorm" && l.D > 2*l.LR*(1+1e-5) {
					t.Errorf("update %d: RowNorm D(S_t) %.6g exceeds 2 lr_t = %.6g", l.Step, l.D, 2*l.LR)
				}
			}
		})
	}
	if _, err := run(cpu.New(), options{head: "sgd", steps: 2, batch: 1, logEvery: 1}); err == nil {
		t.Error("-head sgd: no error")
	}
}
