package autograd

import "github.com/hilbert-ml/hilbert/tensor"

// OnGradReady makes Backward call fn(p) for each leaf tensor p that requires
// a gradient, as soon as p's gradient is final for this backward pass: right
// after the last recorded op that has p as an input has run its backward
// (Backward walks the record in reverse, so that is the op recorded first
// with p). fn is called once per leaf per Backward, in the order the
// gradients become final, on Backward's goroutine, and only for leaves that
// have a gradient at that point (a parameter used only by ops that did not
// reach the loss, and without a gradient from an earlier pass, is skipped).
// A parameter used twice (tied weights) is reported once, after its second
// contribution. nil removes the hook; a graph without one does no extra work.
//
// This is what data-parallel training needs to start all-reducing a bucket of
// gradients while the backward pass goes on. On an asynchronous backend the
// gradient's kernels are issued, not necessarily finished, when fn runs: work
// fn issues on the same device stream is ordered after them. fn must not
// modify tensors the rest of the backward pass reads; p's gradient is not
// touched again by this Backward. With gradient accumulation, set the hook
// only for the last micro-batch's Backward.
func (g *Graph) OnGradReady(fn func(p *tensor.Tensor)) { g.ready = fn }

// readyLeaf is a leaf to report after node at has run its backward.
type readyLeaf struct {
	at int
	t  *tensor.Tensor
}

// planReady lists, in increasing node order, every leaf requiring a
// gradient with the index of the first recorded node that reads it: the
// last one Backward runs for it.
func (g *Graph) planReady() {
	clear(g.readySeen)
	if g.readySeen == nil {
		g.readySeen = make(map[*tensor.Tensor]struct{})
	}
	clear(g.readyPlan)
	g.readyPlan = g.readyPlan[:0]
	for i := range g.nodes {
		n := &g.nodes[i]
		inputs := n.in[:]
		if c, ok := n.op.(*customCall); ok {
			inputs = c.inputs
		}
		for _, t := range inputs {
			if t == nil || !t.RequiresGrad() || !t.IsLeaf() {
				continue
			}
			if _, dup := g.readySeen[t]; dup {
				continue
			}
			g.readySeen[t] = struct{}{}
			g.readyPlan = append(g.readyPlan, readyLeaf{i, t})
		}
	}
	clear(g.readySeen)
}

// fireReady reports the leaves whose last backward node is at or after
// node i, consuming them from the end of the plan (next is the count not yet
// reported), and returns the new count.
func (g *Graph) fireReady(i, next int) int {
	for next > 0 && g.readyPlan[next-1].at >= i {
		next--
		if t := g.readyPlan[next].t; t.Grad() != nil {
			g.ready(t)
		}
	}
	return next
}
