package autograd

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/tensor"
)

// TestZeroGradDeferredFill checks ZeroGrad's deferred fill against the
// gradients of a first step: after a step with other data, ZeroGrad and a
// step with the first data give the first step's gradients bit for bit,
// whichever way a gradient arrives (the fused head's direct write, the
// embedding's scatter into a gradient already written, a plain
// accumulation, a parameter used twice); a parameter the step does not
// use reads zero; a gradient written whole takes the backward's buffer
// (SwapStorage) instead of a copy; and a second step without ZeroGrad
// doubles every
// gradient (to rounding: a gradient of two parts adds them in another
// order the second time).
func TestZeroGradDeferredFill(t *testing.T) {
	dev := cpu.New()
	rng := rand.New(rand.NewPCG(3, 5))
	const vocab, dim, rows = 11, 6, 5
	param := func(shape ...int) *tensor.Tensor {
		n := tensor.Shape(shape).Numel()
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		p, err := tensor.FromFloat32(dev, v, shape...)
		if err != nil {
			t.Fatal(err)
		}
		p.SetRequiresGrad(true)
		return p
	}
	embed, mix, unused := param(vocab, dim), param(dim, dim), param(dim)
	params := []*tensor.Tensor{embed, mix, unused}
	ids := func(seed uint64) *tensor.Tensor {
		r := rand.New(rand.NewPCG(seed, 1))
		v := make([]int32, rows)
		for i := range v {
			v[i] = int32(r.IntN(vocab))
		}
		x, err := tensor.FromInt32(dev, v, rows)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	// The tied embedding gets the head's gradient (written straight into
	// the parameter's) and the lookup's scatter; mix is used twice.
	step := func(inputs, targets *tensor.Tensor, withUnused bool) {
		g := New(dev)
		h := g.Embedding(embed, inputs)
		h = g.Tanh(g.MatMul(g.MatMul(h, mix, false, true), mix, false, false))
		loss := g.LinearCrossEntropy(h, embed, targets, 0)
		if withUnused {
			loss = g.Add(loss, g.Sum(unused))
		}
		if err := g.Backward(loss); err != nil {
			t.Fatal(err)
		}
	}
	grads := func() [][]float32 {
		var out [][]float32
		for _, p := range params {
			if p.Grad() == nil {
				out = append(out, nil)
				continue
			}
			out = append(out, p.Grad().Float32s())
		}
		return out
	}
	in, tg := ids(1), ids(2)
	step(in, tg, false)
	first := grads()
	if first[2] != nil {
		t.Fatalf("unused parameter has a gradient before any step uses it")
	}
	step(ids(3), ids(4), true) // other data; unused gets a gradient
	tensor.ZeroGrad(params)
	mixBuf := mix.Grad().Buffer()
	tensor.ZeroGrad(params) // Grad filled it: defer the fill again
	step(in, tg, false)
	if mix.Grad().Buffer() == mixBuf {
		t.Errorf("mix's gradient kept its buffer: the step's first gradient was copied, not handed over")
	}
	again := grads()
	for i, name := range []string{"embed", "mix"} {
		if !slices.Equal(again[i], first[i]) {
			t.Errorf("%s after ZeroGrad: %v, first step %v", name, again[i], first[i])
		}
	}
	for _, v := range again[2] {
		if v != 0 {
			t.Fatalf("unused after ZeroGrad: %v, want zeros", again[2])
		}
	}
	step(in, tg, false) // no ZeroGrad: the step adds
	twice := grads()
	for i, name := range []string{"embed", "mix"} {
		for j, v := range twice[i] {
			if want := 2 * first[i][j]; math.Abs(float64(v-want)) > 1e-6*(math.Abs(float64(want))+1e-3) {
				t.Fatalf("%s[%d] after two steps: %v, want 2 x %v", name, j, v, first[i][j])
			}
		}
	}
}
