package autograd

import (
	"strings"
	"testing"

	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/tensor"
)

// expSaved is exp(x) with a Backward that reuses the forward's output
// through SaveForBackward instead of recomputing it.
var expSaved = &Function{
	Name: "ExpSaved",
	Forward: func(g *Graph, in []*tensor.Tensor) *tensor.Tensor {
		y := g.Exp(in[0])
		g.SaveForBackward(y)
		return g.Mul(y, in[1])
	},
	Backward: func(g *Graph, gout *tensor.Tensor, in []*tensor.Tensor, _ *tensor.Tensor) []*tensor.Tensor {
		s := g.Saved()
		if len(s) != 1 {
			g.failf("ExpSaved: %d saved tensors", len(s))
			return nil
		}
		e := s[0]
		return []*tensor.Tensor{g.Mul(gout, g.Mul(e, in[1])), g.Mul(gout, e)}
	},
}

// sum4Fn adds four tensors; its backward passes gout to each.
var sum4Fn = &Function{
	Name: "Sum4",
	Forward: func(g *Graph, in []*tensor.Tensor) *tensor.Tensor {
		return g.Add(g.Add(in[0], in[1]), g.Add(in[2], in[3]))
	},
	Backward: func(g *Graph, gout *tensor.Tensor, in []*tensor.Tensor, _ *tensor.Tensor) []*tensor.Tensor {
		return []*tensor.Tensor{gout, gout, gout, gout}
	},
}

// TestFunctionSaveForBackward: a Function's Backward gets the tensors its
// Forward saved, and the gradient checks in float64; SaveForBackward
// outside a Forward is an error.
func TestFunctionSaveForBackward(t *testing.T) {
	in := []*tensor.Tensor{input64(t, 500, []int{3, 4}, 1, 0, 0), input64(t, 501, []int{3, 4}, 1, 0, 0)}
	f := func(g *Graph, in []*tensor.Tensor) *tensor.Tensor { return g.Apply(expSaved, in[0], in[1]) }
	if err := GradCheck(cpu.New(), f, in, GradCheckOptions{}); err != nil {
		t.Fatal(err)
	}
	g := New(cpu.New())
	g.SaveForBackward(in[0])
	if err := g.Err(); err == nil || !strings.Contains(err.Error(), "outside a Function's Forward") {
		t.Errorf("SaveForBackward outside Forward: %v", err)
	}
	if g.Saved() != nil {
		t.Error("Saved outside a Backward is not nil")
	}
}

// TestFunctionVersions: Backward fails, naming the Function and the
// tensor, when any input (the fourth too) or a saved intermediate was
// modified in place after the forward pass; unmodified, it succeeds.
func TestFunctionVersions(t *testing.T) {
	dev := cpu.New()
	leaf := func(v float32) *tensor.Tensor {
		x, _ := tensor.FromFloat32(dev, []float32{v, v}, 2)
		x.SetRequiresGrad(true)
		return x
	}
	cases := []struct {
		name string
		run  func(g *Graph) (loss *tensor.Tensor, mutate func())
		want []string // substrings of the error; nil: Backward succeeds
	}{
		{"untouched", func(g *Graph) (*tensor.Tensor, func()) {
			xs := []*tensor.Tensor{leaf(1), leaf(2), leaf(3), leaf(4)}
			return g.Sum(g.Apply(sum4Fn, xs...)), func() {}
		}, nil},
		{"fourth input", func(g *Graph) (*tensor.Tensor, func()) {
			xs := []*tensor.Tensor{leaf(1), leaf(2), leaf(3), leaf(4)}
			return g.Sum(g.Apply(sum4Fn, xs...)), func() { xs[3].SetFloat32([]float32{9, 9}) }
		}, []string{"Sum4", "input 3", "modified in place"}},
		{"saved intermediate", func(g *Graph) (*tensor.Tensor, func()) {
			var saved *tensor.Tensor
			spy := *expSaved
			spy.Forward = func(g *Graph, in []*tensor.Tensor) *tensor.Tensor {
				out := expSaved.Forward(g, in)
				saved = g.applying.saved[0]
				return out
			}
			x, y := leaf(0.5), leaf(2)
			return g.Sum(g.Apply(&spy, x, y)), func() { saved.MarkModified() }
		}, []string{"ExpSaved", "SaveForBackward", "modified in place"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := New(dev)
			defer g.Reset()
			loss, mutate := c.run(g)
			if err := g.Err(); err != nil {
				t.Fatal(err)
			}
			mutate()
			err := g.Backward(loss)
			if c.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatal("Backward succeeded")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// TestFunctionGradientsSharingABuffer: a Backward may return one tensor it
// made, or views of it, for several inputs, whose gradients already hold
// a value (so each is added and the tensor released): every input gets the
// whole gradient, none a released or aliased buffer.
func TestFunctionGradientsSharingABuffer(t *testing.T) {
	shared := &Function{Name: "Shared",
		Forward: func(g *Graph, in []*tensor.Tensor) *tensor.Tensor {
			return g.Add(g.Add(in[0], g.Reshape(in[1], 4)), in[2])
		},
		Backward: func(g *Graph, gout *tensor.Tensor, in []*tensor.Tensor, _ *tensor.Tensor) []*tensor.Tensor {
			d := g.Scale(gout, 2)
			return []*tensor.Tensor{d, g.Reshape(d, 2, 2), g.Scale(gout, 3)}
		}}
	dev := cpu.New()
	var in []*tensor.Tensor
	for _, shape := range [][]int{{4}, {2, 2}, {4}} {
		x, err := tensor.FromFloat32(dev, []float32{1, 2, 3, 4}, shape...)
		if err != nil {
			t.Fatal(err)
		}
		x.SetRequiresGrad(true)
		in = append(in, x)
	}
	for pass := 1; pass <= 2; pass++ { // the second pass adds to the first's gradients
		g := New(dev)
		y := g.Apply(shared, in...) // input 1's gradient is a view of input 0's
		if err := g.Backward(g.Sum(g.Mul(y, y))); err != nil {
			t.Fatal(err)
		}
		for i, scale := range []float32{2, 2, 3} {
			got := in[i].Grad().Float32s()
			for k, v := range got {
				want := float32(pass) * scale * 2 * 3 * float32(k+1) // d(sum y^2) = 2y, y = 3x
				if v != want {
					t.Fatalf("pass %d: input %d gradient %v, want %v at %d", pass, i, got, want, k)
				}
			}
		}
	}
}
