package optim

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/hilbert-ml/hilbert/tensor"
)

// AdamW against float64 over four scheduled steps: decoupled weight decay
// p *= 1 - lr wd, bias correction, eps outside the sqrt, and S_t the step
// excluding weight decay. fp32 moments bound the agreement to ~1e-6
// relative of the step.
func TestAdamWReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	n := 24
	w0 := round32(randn(rng, n, 1))
	p := param(t, "embed.weight", w0, 4, 6)
	cfg := AdamWConfig{LR: 0.01, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.1, KeepStep: true}
	o, err := NewAdamW(cfg, []*tensor.Tensor{p})
	if err != nil {
		t.Fatal(err)
	}
	ref := append([]float64(nil), w0...)
	m, v := make([]float64, n), make([]float64, n)
	for k, scale := range []float64{0, 0.5, 1, 0.3} {
		step := k + 1
		g := round32(randn(rng, n, 1))
		setGrad(t, p, g)
		before := f64(p.Float32s())
		if err := o.Step(scale); err != nil {
			t.Fatal(err)
		}
		lr := 0.01 * scale
		s := make([]float64, n)
		for i := range ref {
			m[i] = 0.9*m[i] + 0.1*g[i]
			v[i] = 0.999*v[i] + 0.001*g[i]*g[i]
			mh := m[i] / (1 - math.Pow(0.9, float64(step)))
			vh := v[i] / (1 - math.Pow(0.999, float64(step)))
			s[i] = -lr * mh / (math.Sqrt(vh) + 1e-8)
			ref[i] = ref[i]*(1-lr*0.1) + s[i]
		}
		near(t, "W", f64(p.Float32s()), ref, 1e-6, 1e-6)
		st := f64(o.LastStep(p).Float32s())
		near(t, "S_t", st, s, 1e-8, 1e-5)
		// p_t = p_{t-1} (1 - lr wd) + S_t exactly as applied
		after := f64(p.Float32s())
		for i := range after {
			want := float64(float32(before[i])*float32(1-lr*0.1) + float32(st[i]))
			if after[i] != want {
				t.Fatalf("step %d: p[%d] = %v, want p(1-lr wd) + S = %v", step, i, after[i], want)
			}
		}
	}
}

// The moments against float64 at the paper's betas: they may differ from
// float64 by float32 rounding only (a few 1e-8 relative a step; v, a sum
// of positive terms, stays within 5e-7). With 1 - beta2 formed in float32
// from float32(0.999), v ran 1.3e-5 low.
func TestAdamWMomentsFloat64(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	n := 64
	p := param(t, "embed.weight", round32(randn(rng, n, 1)), 8, 8)
	cfg := PaperAdamW(4e-3)
	o, err := NewAdamW(cfg, []*tensor.Tensor{p})
	if err != nil {
		t.Fatal(err)
	}
	var m, v *tensor.Tensor
	for _, e := range o.State() {
		switch e.Name {
		case "adamw.m.embed.weight":
			m = e.Tensor
		case "adamw.v.embed.weight":
			v = e.Tensor
		}
	}
	mRef, vRef := make([]float64, n), make([]float64, n)
	for step := 1; step <= 5; step++ {
		g := round32(randn(rng, n, 1))
		setGrad(t, p, g)
		if err := o.Step(1); err != nil {
			t.Fatal(err)
		}
		for i := range g {
			mRef[i] = 0.9*mRef[i] + (1-0.9)*g[i]
			vRef[i] = 0.999*vRef[i] + (1-0.999)*g[i]*g[i]
		}
		near(t, "m", f64(m.Float32s()), mRef, 2e-8, 5e-7) // m may cancel: absolute slack
		near(t, "v", f64(v.Float32s()), vRef, 0, 5e-7)
	}
}

// The kernels' 1 - beta comes from the config's float64 betas: with a
// beta of eleven digits, one step from zero moments with a gradient of
// ones leaves m = 1 - beta1 and v = 1 - beta2 rounded once to float32
// (before, 1 - beta was taken of the float32 beta's shortest decimal,
// 0.99912345 here, which puts v 7.7e-6 (relative) off).
func TestAdamWCoefficientsFromFloat64Betas(t *testing.T) {
	const beta1, beta2 = 0.87654321012, 0.99912345678
	n := 6
	p := param(t, "embed.weight", make([]float64, n), 2, 3)
	o, err := NewAdamW(AdamWConfig{LR: 1e-3, Beta1: beta1, Beta2: beta2, Eps: 1e-8}, []*tensor.Tensor{p})
	if err != nil {
		t.Fatal(err)
	}
	ones := make([]float64, n)
	for i := range ones {
		ones[i] = 1
	}
	setGrad(t, p, ones)
	if err := o.Step(1); err != nil {
		t.Fatal(err)
	}
	want := map[string]float32{"adamw.m.embed.weight": float32(1 - beta1), "adamw.v.embed.weight": float32(1 - beta2)}
	for _, e := range o.State() {
		w, ok := want[e.Name]
		if !ok {
			continue
		}
		for i, x := range e.Tensor.Float32s() {
			if x != w {
				t.Fatalf("%s[%d] = %v, want %v", e.Name, i, x, w)
			}
		}
	}
}
