package autograd

import (
	"fmt"

	"github.com/hilbert-ml/hilbert/tensor"
)

// Function is a differentiable operation defined outside this package,
// as PyTorch's autograd.Function: a forward computation and the backward
// one that gives each input's gradient from the output's. Both run with
// recording off, so the ops they call on the graph are computed but not
// differentiated; the tensors they make belong to the graph.
//
//	square := &autograd.Function{
//	    Name:    "Square",
//	    Forward: func(g *autograd.Graph, in []*tensor.Tensor) *tensor.Tensor { return g.Mul(in[0], in[0]) },
//	    Backward: func(g *autograd.Graph, gout *tensor.Tensor, in []*tensor.Tensor, out *tensor.Tensor) []*tensor.Tensor {
//	        return []*tensor.Tensor{g.Mul(gout, g.Scale(in[0], 2))}
//	    },
//	}
//	y := g.Apply(square, x)
type Function struct {
	// Name names the op in errors.
	Name string
	// Forward returns the output computed from the inputs.
	Forward func(g *Graph, inputs []*tensor.Tensor) *tensor.Tensor
	// Backward returns one gradient per input, each of its input's shape
	// and dtype, or nil for an input that needs none, from gout (the
	// gradient of the output), the inputs and the output.
	Backward func(g *Graph, gout *tensor.Tensor, inputs []*tensor.Tensor, out *tensor.Tensor) []*tensor.Tensor
}

// customCall is one recorded application of a Function.
type customCall struct {
	f      *Function
	inputs []*tensor.Tensor
}

// Apply runs f on inputs and records it for Backward. In-place changes to
// the first three inputs after the forward pass are detected as for the
// built-in ops.
func (g *Graph) Apply(f *Function, inputs ...*tensor.Tensor) *tensor.Tensor {
	name := "Apply"
	if f != nil && f.Name != "" {
		name = f.Name
	}
	if f == nil || f.Forward == nil || f.Backward == nil {
		return g.failf("%s: the Function needs Forward and Backward", name)
	}
	if !g.ok(name, inputs...) {
		return nil
	}
	was := g.noGrad
	g.noGrad = true
	out := f.Forward(g, inputs)
	g.noGrad = was
	if g.err != nil {
		return nil
	}
	if out == nil {
		return g.failf("%s: Forward returned no tensor", name)
	}
	for _, in := range inputs {
		if out == in || (out.Buffer() == in.Buffer()) {
			// The output must be a tensor of its own: copy an input
			// returned as is.
			c := g.allocOf(name, in.DType(), in.Shape()...)
			if c == nil {
				return nil
			}
			g.dev.Copy(c.Buffer(), in.Buffer())
			out = c
			break
		}
	}
	if g.wantsGrad(inputs...) {
		n := node{op: opCustom, out: out, ints: [4]int{len(g.custom)}}
		copy(n.in[:], inputs)
		g.custom = append(g.custom, customCall{f: f, inputs: append([]*tensor.Tensor(nil), inputs...)})
		g.record(n)
	}
	return out
}

func (g *Graph) customBackward(n *node, gout *tensor.Tensor) {
	call := g.custom[n.ints[0]]
	name := call.f.Name
	was := g.noGrad
	g.noGrad = true
	grads := call.f.Backward(g, gout, call.inputs, n.out)
	g.noGrad = was
	if g.err != nil {
		return
	}
	if len(grads) != len(call.inputs) {
		g.Fail(fmt.Errorf("autograd: Backward of %s returned %d gradients for %d inputs", name, len(grads), len(call.inputs)))
		return
	}
	for i, in := range call.inputs {
		d := grads[i]
		if d == nil || !in.RequiresGrad() {
			continue
		}
		if !d.SameShape(in) || d.DType() != in.DType() {
			g.Fail(fmt.Errorf("autograd: Backward of %s: gradient %d is %v %v, input %v %v", name, i, d.DType(), d.Shape(), in.DType(), in.Shape()))
			return
		}
		g.accumulate(in, g.copyOf(d))
	}
}
