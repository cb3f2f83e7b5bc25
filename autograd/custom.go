package autograd

import (
	"fmt"

	"github.com/hilbert-ml/hilbert/tensor"
)

// Function is a differentiable operation defined outside this package,
// as PyTorch's autograd.Function: a forward computation and the backward
// one that gives each input's gradient from the output's. Both run with
// recording off, so the ops they call on the graph are computed but not
// differentiated; the tensors they make belong to the graph (those
// Backward makes are released once the gradients it returns have been
// accumulated). Forward may keep intermediates for Backward with
// g.SaveForBackward; Backward reads them with g.Saved().
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

// customCall is one recorded application of a Function: its inputs and
// the tensors its Forward saved (SaveForBackward), with their versions
// when it was recorded.
type customCall struct {
	f              *Function
	inputs         []*tensor.Tensor
	inputVersions  []uint64
	saved          []*tensor.Tensor
	savedVersions  []uint64
	savingDisabled bool // Forward ran without recording: SaveForBackward keeps nothing
}

// SaveForBackward keeps tensors that a Function's Forward computed (or any
// tensors it read) for its Backward, which gets them back from Saved, as
// PyTorch's ctx.save_for_backward: an intermediate need not be recomputed.
// It may be called only from inside a Function's Forward (elsewhere it
// records an error on the graph). Like the inputs, a saved tensor modified
// in place before Backward makes Backward fail, naming the op and the
// tensor. Tensors the Forward made belong to the graph and stay valid
// until the Backward has run.
func (g *Graph) SaveForBackward(ts ...*tensor.Tensor) {
	if g.applying == nil {
		g.failf("SaveForBackward: called outside a Function's Forward")
		return
	}
	if g.applying.savingDisabled {
		return
	}
	for i, t := range ts {
		if t == nil {
			g.failf("%s: SaveForBackward: tensor %d is nil", g.applying.f.Name, i)
			return
		}
	}
	g.applying.saved = append(g.applying.saved, ts...)
}

// Saved returns, inside a Function's Backward, the tensors its Forward
// passed to SaveForBackward, in order (nil elsewhere).
func (g *Graph) Saved() []*tensor.Tensor {
	if g.backwardCall == nil {
		return nil
	}
	return g.backwardCall.saved
}

// Apply runs f on inputs and records it for Backward. In-place changes to
// any input, or to a tensor Forward saved with SaveForBackward, after the
// forward pass make Backward fail, as for the built-in ops.
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
	record := g.wantsGrad(inputs...)
	call := &customCall{f: f, inputs: append([]*tensor.Tensor(nil), inputs...), savingDisabled: !record}
	was, outer := g.noGrad, g.applying
	g.noGrad, g.applying = true, call
	out := f.Forward(g, inputs)
	g.noGrad, g.applying = was, outer
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
	if record {
		for _, t := range call.inputs {
			call.inputVersions = append(call.inputVersions, t.Version())
		}
		for _, t := range call.saved {
			call.savedVersions = append(call.savedVersions, t.Version())
		}
		g.record(node{op: call, out: out})
	}
	return out
}

// name names the call by its Function.
func (c *customCall) name() string {
	if c.f.Name == "" {
		return "custom op"
	}
	return c.f.Name
}

// reads is the output: the inputs and saved tensors, which the node's
// slots do not hold, are checked by checkVersions.
func (c *customCall) reads(*node) slots { return output }

// checkVersions returns an error naming the Function and the tensor when
// an input of the call, or a tensor its Forward saved, was modified in
// place after the call was recorded.
func (c *customCall) checkVersions() error {
	for i, t := range c.inputs {
		if t.Version() != c.inputVersions[i] {
			return modifiedError(c.name(), fmt.Sprintf("input %d", i), t, c.inputVersions[i])
		}
	}
	for i, t := range c.saved {
		if t.Version() != c.savedVersions[i] {
			return modifiedError(c.name(), fmt.Sprintf("tensor (SaveForBackward) %d", i), t, c.savedVersions[i])
		}
	}
	return nil
}

// backward runs the Function's Backward and accumulates the gradients it
// returns: handed on (give) when no other gradient shares its buffer, as a
// copy when one does (a Backward may return one tensor, or views of it,
// for two inputs); the other tensors it made are released after it.
func (c *customCall) backward(g *Graph, n *node, gout *tensor.Tensor) {
	was, outer := g.noGrad, g.backwardCall
	g.noGrad, g.backwardCall = true, c
	grads := c.f.Backward(g, gout, c.inputs, n.out)
	g.noGrad, g.backwardCall = was, outer
	if g.err != nil {
		return
	}
	if len(grads) != len(c.inputs) {
		g.Fail(fmt.Errorf("autograd: Backward of %s returned %d gradients for %d inputs", c.f.Name, len(grads), len(c.inputs)))
		return
	}
	shared := sharedBuffers(grads)
	for i, in := range c.inputs {
		d := grads[i]
		if d == nil || !in.RequiresGrad() {
			continue
		}
		if !d.SameShape(in) || d.DType() != in.DType() {
			g.Fail(fmt.Errorf("autograd: Backward of %s: gradient %d is %v %v, input %v %v", c.f.Name, i, d.DType(), d.Shape(), in.DType(), in.Shape()))
			return
		}
		if shared[i] {
			g.accumulate(in, g.copyOf(d))
		} else {
			g.give(in, d)
		}
	}
}

// sharedBuffers reports for each of ts whether another shares its buffer.
func sharedBuffers(ts []*tensor.Tensor) []bool {
	shared := make([]bool, len(ts))
	for i, t := range ts {
		for j := i + 1; t != nil && j < len(ts); j++ {
			if ts[j] != nil && ts[j].Buffer() == t.Buffer() {
				shared[i], shared[j] = true, true
			}
		}
	}
	return shared
}
