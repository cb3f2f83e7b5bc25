package models

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/hilbert-ml/hilbert/autograd"
	"github.com/hilbert-ml/hilbert/device/cpu"
)

// TestGradCheck compares the whole model's backward pass with central
// finite differences of its float32 loss, on a tiny config (2 layers, 2
// heads of 16, vocab 37, batch 2 x 5) with a large init (std 0.5) so that
// every nonlinearity is exercised. For each parameter it checks the 3
// elements of largest analytic gradient and 3 random ones.
//
// Tolerance: with step h = 1e-2 on weights of scale 0.5, the truncation
// error h^2 f”'/6 is ~1e-5 relative; float32 rounding of a loss of ~4
// (~1e-6 absolute through the whole forward) contributes ~1e-6/(2h) = 5e-5
// absolute. |fd - g| <= 3e-2 |g| + 2e-4 leaves margin while a wrong
// formula (a factor, sign or missing term) is an O(1) error.
func TestGradCheck(t *testing.T) {
	const (
		h    = 1e-2
		rtol = 3e-2
		atol = 2e-4
	)
	dev := cpu.New()
	cfg := Config{Layers: 2, Dim: 32, HeadDim: 16, MLPHidden: 128, Vocab: 37, Context: 8, RoPEBase: 10000, InitStd: 0.5}
	m, err := New(dev, cfg, 3)
	if err != nil {
		t.Fatal(err)
	}
	inputs, targets := randomBatch(dev, 5, 2, 5, cfg.Vocab)
	g := autograd.New(dev)
	loss, _ := m.Forward(g, inputs, targets, ForwardOptions{})
	if err := g.Backward(loss); err != nil {
		t.Fatal(err)
	}
	lossAt := func() float64 {
		g.Reset()
		g.SetNoGrad(true)
		defer g.SetNoGrad(false)
		l, _ := m.Forward(g, inputs, targets, ForwardOptions{})
		if err := g.Err(); err != nil {
			t.Fatal(err)
		}
		return float64(l.Item())
	}
	rng := rand.New(rand.NewPCG(9, 9))
	var worst, largest float64
	for _, p := range m.Parameters() {
		grad := p.Grad().Float32s()
		idx := make([]int, len(grad))
		for i := range idx {
			idx[i] = i
		}
		sort.Slice(idx, func(a, b int) bool { return math.Abs(float64(grad[idx[a]])) > math.Abs(float64(grad[idx[b]])) })
		check := append(idx[:3:3], rng.IntN(len(grad)), rng.IntN(len(grad)), rng.IntN(len(grad)))
		w := p.Float32s()
		for _, i := range check {
			orig := w[i]
			w[i] = orig + h
			p.SetFloat32(w)
			up := lossAt()
			w[i] = orig - h
			p.SetFloat32(w)
			down := lossAt()
			w[i] = orig
			p.SetFloat32(w)
			fd, an := (up-down)/(2*h), float64(grad[i])
			worst = max(worst, math.Abs(fd-an)/(rtol*math.Abs(an)+atol))
			largest = max(largest, math.Abs(an))
			if math.Abs(fd-an) > rtol*math.Abs(an)+atol {
				t.Errorf("%s[%d]: analytic %.6g, finite difference %.6g", p.Name, i, an, fd)
			}
		}
	}
	t.Logf("largest checked |grad| %.3g; worst error at %.2f of the tolerance", largest, worst)
}
