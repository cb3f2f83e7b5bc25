package optim

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/hilbert-ml/hilbert/tensor"
)

// The recipe's Newton-Schulz values are fp64; ours run in fp32. Five
// iterations with coefficients up to 4.8 amplify the input rounding
// (~6e-8) by at most a few hundred, so 2e-5 absolute is a safe bound.
func TestNewtonSchulzReference(t *testing.T) {
	cases := []struct {
		in, want []float64
	}{
		{[]float64{1, 2, 3, 4}, []float64{-0.6806599844395561, 0.8255398969672973, 0.7412962395767617, 0.2594416974868792}},
		{[]float64{2, 0, 0, 1}, []float64{0.6887714464325794, 0, 0, 1.1141695251558015}},
	}
	for _, c := range cases {
		x := param(t, "x", c.in, 2, 2)
		if err := NewtonSchulz(x, 5, 1e-5); err != nil {
			t.Fatal(err)
		}
		near(t, "NS", f64(x.Float32s()), c.want, 2e-5, 0)
		// The float64 reference of the test file reproduces them exactly.
		near(t, "ns64", ns64(c.in, 2, 2, 5, 1e-5), c.want, 1e-14, 0)
	}
}

// Wide and tall matrices (the tall case runs on the transpose, written as
// X B instead of B X) against the float64 reference.
func TestNewtonSchulzShapes(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, sh := range [][2]int{{3, 7}, {7, 3}, {5, 5}, {1, 6}, {6, 1}, {16, 48}, {48, 16}} {
		in := round32(randn(rng, sh[0]*sh[1], 1))
		x := param(t, "x", in, sh[0], sh[1])
		if err := NewtonSchulz(x, 5, 1e-5); err != nil {
			t.Fatal(err)
		}
		near(t, "NS", f64(x.Float32s()), ns64(in, sh[0], sh[1], 5, 1e-5), 5e-5, 0)
	}
}

// Recipe test: no Newton-Schulz (0 steps, eps 0), lr 0.1, momentum 0.5,
// W0 = 0, gradients diag(3,4) then [[0,2],[1,0]], without Nesterov.
func TestMuonTwoSteps(t *testing.T) {
	want := []float64{-0.10472135954999581, -0.0596284793999944, -0.0298142396999972, -0.1396284793999944}
	grads := [][]float64{{3, 0, 0, 4}, {0, 2, 1, 0}}
	for _, nesterov := range []bool{false, true} {
		w := param(t, "blocks.0.attn.q.weight", make([]float64, 4), 2, 2)
		o, err := NewMuon(MuonConfig{LR: 0.1, Momentum: 0.5, Nesterov: nesterov, KeepStep: true}, []*tensor.Tensor{w})
		if err != nil {
			t.Fatal(err)
		}
		// float64 reference of the same recipe
		ref := make([]float64, 4)
		buf := make([]float64, 4)
		for _, g := range grads {
			setGrad(t, w, g)
			if err := o.Step(1); err != nil {
				t.Fatal(err)
			}
			u := make([]float64, 4)
			var ss float64
			for i := range buf {
				buf[i] = 0.5*buf[i] + g[i]
				u[i] = buf[i]
				if nesterov {
					u[i] = g[i] + 0.5*buf[i]
				}
				ss += u[i] * u[i]
			}
			for i := range ref {
				ref[i] -= 0.1 * u[i] / math.Sqrt(ss)
			}
		}
		near(t, "W", f64(w.Float32s()), ref, 1e-7, 0)
		if !nesterov {
			near(t, "W (recipe value)", f64(w.Float32s()), want, 1e-7, 0)
			near(t, "ref", ref, want, 1e-16, 0)
		}
	}
}

// Full Muon: Nesterov, 5 NS steps, weight decay with the scheduled LR and
// the shape scale sqrt(max(1, rows/cols)), against float64, over 3 steps.
func TestMuonFull(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, sh := range [][2]int{{8, 4}, {4, 8}, {6, 6}} {
		rows, cols := sh[0], sh[1]
		n := rows * cols
		w0 := round32(randn(rng, n, 1))
		w := param(t, "blocks.0.mlp.up.weight", w0, rows, cols)
		cfg := PaperMuon(0.02)
		cfg.KeepStep = true
		o, err := NewMuon(cfg, []*tensor.Tensor{w})
		if err != nil {
			t.Fatal(err)
		}
		ref := append([]float64(nil), w0...)
		buf := make([]float64, n)
		for step, scale := range []float64{0.5, 1, 0.25} {
			g := round32(randn(rng, n, 1))
			setGrad(t, w, g)
			if err := o.Step(scale); err != nil {
				t.Fatal(err)
			}
			lr := 0.02 * scale
			u := make([]float64, n)
			for i := range buf {
				buf[i] = 0.95*buf[i] + g[i]
				u[i] = g[i] + 0.95*buf[i]
			}
			x := ns64(u, rows, cols, 5, 1e-5)
			shape := math.Sqrt(max(1, float64(rows)/float64(cols)))
			s := make([]float64, n)
			for i := range ref {
				s[i] = -lr * shape * x[i]
				ref[i] = ref[i]*(1-lr*0.1) + s[i]
			}
			near(t, "W", f64(w.Float32s()), ref, 2e-6, 0)
			near(t, "S_t", f64(o.LastStep(w).Float32s()), s, 2e-6, 0)
			_ = step
		}
	}
}
