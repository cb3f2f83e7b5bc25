package optim

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/optim/geometry"
	"github.com/hilbert-ml/hilbert/tensor"
)

// headLoss returns the mean cross-entropy of the head u (v x d) on hidden
// states h (n x d) with targets y, and its gradient, in float64.
func headLoss(u []float32, h []float64, y []int, v, d int) (float64, []float64) {
	n := len(y)
	g := make([]float64, v*d)
	var loss float64
	z := make([]float64, v)
	for k := range n {
		hk := h[k*d : (k+1)*d]
		m := math.Inf(-1)
		for i := range v {
			var x float64
			for j := range d {
				x += float64(u[i*d+j]) * hk[j]
			}
			z[i] = x
			m = max(m, x)
		}
		var s float64
		for i := range z {
			s += math.Exp(z[i] - m)
		}
		lse := m + math.Log(s)
		loss += (lse - z[y[k]]) / float64(n)
		for i := range v {
			dz := math.Exp(z[i] - lse)
			if i == y[k] {
				dz--
			}
			for j := range d {
				g[i*d+j] += dz * hk[j] / float64(n)
			}
		}
	}
	return loss, g
}

// The exact projected RowNorm and the practical form give the same D(S_t),
// the same Hilbert RMS and the same loss after each step on cross-entropy
// gradients (1^T G = 0): their steps differ by a common row only. Both
// satisfy D(S_t) <= 2 lr_t.
func TestProjectedMatchesPractical(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 20))
	v, d, n := 40, 8, 16
	u0 := round32(randn(rng, v*d, 0.5))
	h := round32(randn(rng, n*d, 1))
	h32 := make([]float32, len(h))
	for i, x := range h {
		h32[i] = float32(x)
	}
	y := make([]int, n)
	for k := range y {
		y[k] = rng.IntN(v)
	}
	var heads [2]*tensor.Tensor
	var opts [2]*RowNorm
	for f, projected := range []bool{false, true} {
		heads[f] = param(t, "head.weight", u0, v, d)
		cfg := PaperRowNorm(0.05)
		cfg.Projected, cfg.KeepStep = projected, true
		var err error
		if opts[f], err = NewRowNorm(cfg, []*tensor.Tensor{heads[f]}); err != nil {
			t.Fatal(err)
		}
	}
	for step, scale := range []float64{0.2, 1, 1, 0.6} {
		var D, rms, loss [2]float64
		for f := range 2 {
			_, g := headLoss(heads[f].Float32s(), h, y, v, d)
			setGrad(t, heads[f], g)
			if err := opts[f].Step(scale); err != nil {
				t.Fatal(err)
			}
			s := opts[f].LastStep(heads[f]).Float32s()
			r, err := geometry.RowDiameter(cpu.New(), s, v, d)
			if err != nil {
				t.Fatal(err)
			}
			D[f] = r.D
			if rms[f], err = geometry.HilbertRMS(cpu.New(), s, v, d, h32, n); err != nil {
				t.Fatal(err)
			}
			loss[f], _ = headLoss(heads[f].Float32s(), h, y, v, d)
			if lr := 0.05 * scale; D[f] > 2*lr*(1+1e-6) {
				t.Fatalf("step %d: D(S_t) = %v > 2 lr_t = %v", step, D[f], 2*lr)
			}
		}
		// fp32 steps of size ~0.05: agreement to ~1e-6 relative.
		near(t, "D(S_t)", D[:1], D[1:], 0, 1e-5)
		near(t, "Hilbert RMS", rms[:1], rms[1:], 0, 1e-5)
		near(t, "loss", loss[:1], loss[1:], 1e-6, 0)
	}
}

// D(S_t) <= 2 lr_t for RowNorm on arbitrary (uncentred) gradients, both
// forms, several steps and betas.
func TestRowNormDiameterBound(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	for trial := range 12 {
		v, d := 2+rng.IntN(50), 1+rng.IntN(16)
		w := param(t, "head.weight", randn(rng, v*d, 1), v, d)
		cfg := RowNormConfig{LR: 0.01 + rng.Float64(), Beta: rng.Float64() * 0.99, Eps: 1e-8, Projected: trial%2 == 1, KeepStep: true}
		o, err := NewRowNorm(cfg, []*tensor.Tensor{w})
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			g := randn(rng, v*d, math.Pow(10, float64(rng.IntN(7)-3)))
			setGrad(t, w, g)
			scale := rng.Float64()
			if err := o.Step(scale); err != nil {
				t.Fatal(err)
			}
			r, _ := geometry.RowDiameter(cpu.New(), o.LastStep(w).Float32s(), v, d)
			if lr := cfg.LR * scale; r.D > 2*lr*(1+1e-6) {
				t.Fatalf("D(S_t) = %v > 2 lr_t = %v (%+v)", r.D, 2*lr, cfg)
			}
		}
	}
}
