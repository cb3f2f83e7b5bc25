package optim

import (
	"strings"
	"testing"

	"github.com/hilbert-ml/hilbert/autograd"
	"github.com/hilbert-ml/hilbert/tensor"
)

// TestStepBetweenForwardAndBackward steps an optimizer after a forward
// pass that saved the parameter for its backward: Backward must then
// refuse, naming the op, instead of computing gradients with the updated
// weights.
func TestStepBetweenForwardAndBackward(t *testing.T) {
	cases := []struct {
		name string
		cfg  Config
	}{
		{"Muon", PaperMuon(1e-2)},
		{"RowNorm", PaperRowNorm(1e-2)},
		{"AdamW", PaperAdamW(1e-2)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := param(t, "w", []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, 4, 3)
			x, err := tensor.FromFloat32(p.Device(), []float32{1, -1, 2, 0.5, 3, 1, -2, 1}, 2, 4)
			if err != nil {
				t.Fatal(err)
			}
			opt, err := c.cfg.New([]*tensor.Tensor{p})
			if err != nil {
				t.Fatal(err)
			}
			g := autograd.New(p.Device())
			forward := func() *tensor.Tensor {
				y := g.MatMul(x, p, false, false)
				return g.Sum(g.Mul(y, y))
			}
			if err := g.Backward(forward()); err != nil {
				t.Fatal(err)
			}
			g.Reset()
			loss := forward()
			if err := opt.Step(1); err != nil {
				t.Fatal(err)
			}
			err = g.Backward(loss)
			if err == nil || !strings.Contains(err.Error(), "MatMul") {
				t.Fatalf("Backward after %s's step: %v, want an error naming MatMul", c.name, err)
			}
		})
	}
}
