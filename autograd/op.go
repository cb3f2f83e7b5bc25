package autograd

import (
	"fmt"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/tensor"
)

// operation is what a recorded node does backward: a built-in op (one
// small value type per op, most of them zero-size, so that recording
// allocates nothing) or a user's Function call (*customCall), through the
// same three methods.
//
// Backward rules are written in Graph ops where that costs no speed (the
// unary and binary ops, Where, the reductions, movement, the index ops'
// and Cast's Functions): Backward runs them with recording off, and the
// tensors they make are released as soon as the node's backward has run,
// but for the gradients it hands on (give). MatMul, the fused ops,
// IndexSelect and conv's patches keep buffer-level rules, each saying why.
type operation interface {
	// name names the op as the Graph method that records it, in errors.
	name() string
	// reads returns the slots of n that backward reads: the tensors whose
	// in-place modification after the forward pass would corrupt the
	// gradient. Graph-internal tensors (a norm's saved rstd, a loss's
	// saved gradient blocks, autocast copies) are not listed: only this
	// package writes them.
	reads(n *node) slots
	// backward accumulates the gradients of n's inputs from gout, the
	// gradient of n.out.
	backward(g *Graph, n *node, gout *tensor.Tensor)
}

// node is one recorded operation. It is a plain struct (no closures) so
// that recording a step allocates nothing once the node slice has grown.
type node struct {
	op  operation
	out *tensor.Tensor
	// in are the differentiable inputs; saved are extra tensors kept for
	// the backward pass (owned by the graph).
	in    [3]*tensor.Tensor
	saved [3]*tensor.Tensor
	ints  [4]int
	f64   float64
	flags [2]bool
	// lowp: a MatMul run under autocast; saved[0], saved[1] hold the
	// low-precision operands.
	lowp  bool
	shape device.AttentionShape
	// versions are the versions at record time of the slots op.reads.
	versions [numSlots]uint64
}

// slots is a set of a node's tensors, by bit: in[0..2], saved[0..2], out.
type slots uint8

const (
	in0 slots = 1 << iota
	in1
	in2
	saved0
	saved1
	saved2
	output

	numSlots = 7
)

// slot returns the tensor in slot i (the bit 1<<i).
func (n *node) slot(i int) *tensor.Tensor {
	switch {
	case i < 3:
		return n.in[i]
	case i < 6:
		return n.saved[i-3]
	}
	return n.out
}

// slotName names slot i in an error.
func slotName(i int) string {
	switch {
	case i < 3:
		return fmt.Sprintf("input %d", i)
	case i < 6:
		return fmt.Sprintf("tensor %d", i-3)
	}
	return "its output"
}

// record appends a node whose output requires grad, remembering the
// versions of the tensors its backward pass reads.
func (g *Graph) record(n node) {
	n.out.SetRequiresGrad(true)
	n.out.MarkOutput(g.origin())
	g.nodes = append(g.nodes, n)
	p := &g.nodes[len(g.nodes)-1] // not &n, which the interface call would move to the heap
	reads := p.op.reads(p)
	for i := range numSlots {
		if reads&(1<<i) != 0 {
			p.versions[i] = p.slot(i).Version()
		}
	}
}

// recorded returns n.out, recording n first when one of its inputs wants
// a gradient (wantsGrad): how a differentiable op ends.
func (g *Graph) recorded(n node) *tensor.Tensor {
	if g.wantsGrad(n.in[:]...) {
		g.record(n)
	}
	return n.out
}

// checkVersions returns an error naming the op and the tensor when a
// tensor n's backward reads was written in place after n was recorded.
func (g *Graph) checkVersions(n *node) error {
	if c, ok := n.op.(*customCall); ok {
		if err := c.checkVersions(); err != nil {
			return err
		}
	}
	reads := n.op.reads(n)
	for i := range numSlots {
		if reads&(1<<i) == 0 {
			continue
		}
		if t := n.slot(i); t.Version() != n.versions[i] {
			return modifiedError(n.op.name(), slotName(i), t, n.versions[i])
		}
	}
	return nil
}

// modifiedError is the error of a tensor that op's backward reads, saved
// at version then and written in place since.
func modifiedError(op, what string, t *tensor.Tensor, then uint64) error {
	return fmt.Errorf("autograd: Backward: %s saved %s %v for its backward pass, and it was modified in place afterwards (version %d, now %d): its gradient would be wrong; leaf gradients may hold part of this pass (zero them, Reset, and run the forward pass again)",
		op, what, t, then, t.Version())
}

// give accumulates d, a gradient that a backward rule computed with Graph
// ops, into t's gradient. A tensor the rule made (or a view of one) is
// handed on without a copy, taken out of the tensors released after the
// node's backward; any other (gout, an input) is copied. A rule must not
// give one tensor twice. A nil d (the graph failed) is ignored.
func (g *Graph) give(t, d *tensor.Tensor) {
	if d == nil || !t.RequiresGrad() {
		return
	}
	for i := len(g.owned) - 1; i >= g.backwardFrom; i-- {
		if o := g.owned[i]; o == d || d.TakeOwnership(o) {
			last := len(g.owned) - 1
			g.owned[i], g.owned[last] = g.owned[last], nil
			g.owned = g.owned[:last]
			g.accumulate(t, d)
			return
		}
	}
	g.accumulate(t, g.copyOf(d))
}

// releaseSince releases the tensors the graph took ownership of from
// owned[from] on: those a backward rule made and did not give.
func (g *Graph) releaseSince(from int) {
	for _, t := range g.owned[from:] {
		t.Release()
	}
	clear(g.owned[from:])
	g.owned = g.owned[:from]
}
