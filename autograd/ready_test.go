package autograd

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/tensor"
)

// TestOnGradReady checks that the hook reports every parameter that got a
// gradient exactly once, after its last contribution: the gradient seen by
// the hook equals the gradient Backward leaves. The model ties the
// embedding to the head (two contributions, the embedding's last), uses one
// matrix twice, feeds a parameter through a Reshape view and one through the
// fourth input of a custom op (past the node's three input slots), and has a
// parameter whose op does not reach the loss.
func TestOnGradReady(t *testing.T) {
	dev := cpu.New()
	rng := rand.New(rand.NewPCG(1, 2))
	param := func(shape ...int) *tensor.Tensor {
		p, err := tensor.RandN(dev, rng, 0, 0.5, shape...)
		if err != nil {
			t.Fatal(err)
		}
		p.SetRequiresGrad(true)
		return p
	}
	const vocab, d, n = 7, 4, 5
	emb, w, bias, extra, unused := param(vocab, d), param(d, d), param(n*d), param(n, d), param(d)
	ids, _ := tensor.FromInt32(dev, []int32{1, 3, 3, 6, 0}, n)
	sum4 := &Function{
		Name: "sum4",
		Forward: func(g *Graph, in []*tensor.Tensor) *tensor.Tensor {
			return g.Add(g.Add(in[0], in[1]), g.Add(in[2], in[3]))
		},
		Backward: func(g *Graph, gout *tensor.Tensor, in []*tensor.Tensor, out *tensor.Tensor) []*tensor.Tensor {
			return []*tensor.Tensor{gout, gout, gout, gout}
		},
	}
	names := map[*tensor.Tensor]string{emb: "emb", w: "w", bias: "bias", extra: "extra", unused: "unused"}
	forward := func(g *Graph) *tensor.Tensor {
		x := g.Embedding(emb, ids)                                  // emb, first use: its last gradient
		h := g.MatMul(g.MatMul(x, w, false, false), w, false, true) // w twice
		h = g.Add(h, g.Reshape(bias, n, d))                         // bias through a view
		h = g.Apply(sum4, h, h, h, extra)                           // extra as input 3
		_ = g.Sum(unused)                                           // does not reach the loss
		logits := g.MatMul(g.Tanh(h), emb, false, true)             // emb tied as the head
		return g.Sum(g.Mul(logits, logits))
	}
	tests := []struct {
		name  string
		zero  bool // zero the gradients before the pass (false: accumulate)
		fresh bool // start without gradients
	}{
		{"first pass", false, true},
		{"zeroed", true, false},
		{"accumulating", false, false},
	}
	g := New(dev)
	params := []*tensor.Tensor{emb, w, bias, extra, unused}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.fresh {
				for _, p := range params {
					p.SetGrad(nil)
				}
			}
			if tt.zero {
				tensor.ZeroGrad(params)
			}
			seen := map[*tensor.Tensor][]float32{}
			var order []string
			count := map[string]int{}
			g.OnGradReady(func(p *tensor.Tensor) {
				count[names[p]]++
				order = append(order, names[p])
				seen[p] = slices.Clone(p.Grad().Float32s())
			})
			g.Reset()
			loss := forward(g)
			if err := g.Backward(loss); err != nil {
				t.Fatal(err)
			}
			for _, p := range []*tensor.Tensor{emb, w, bias, extra} {
				if count[names[p]] != 1 {
					t.Errorf("%s reported %d times, expected once", names[p], count[names[p]])
					continue
				}
				if !slices.Equal(seen[p], p.Grad().Float32s()) {
					t.Errorf("%s reported before its last contribution: gradient then %v, after Backward %v", names[p], seen[p], p.Grad().Float32s())
				}
			}
			if count["unused"] != 0 {
				t.Errorf("unused (not reaching the loss, no gradient) reported %d times", count["unused"])
			}
			if len(order) == 0 || order[len(order)-1] != "emb" {
				t.Errorf("report order %v: the embedding (first op) should be last", order)
			}
		})
	}
	// Without the hook, nothing is called and the gradients are the same.
	g.OnGradReady(nil)
	tensor.ZeroGrad(params)
	g.Reset()
	if err := g.Backward(forward(g)); err != nil {
		t.Fatal(err)
	}
	want := slices.Clone(emb.Grad().Float32s())
	called := 0
	g.OnGradReady(func(*tensor.Tensor) { called++ })
	tensor.ZeroGrad(params)
	g.Reset()
	if err := g.Backward(forward(g)); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(want, emb.Grad().Float32s()) {
		t.Errorf("the hook changed the gradients")
	}
	if called != 4 {
		t.Errorf("hook called %d times, expected 4 (emb, w, bias, extra)", called)
	}
}
