// Package autograd is Hilbert's reverse-mode automatic differentiation.
//
// A Graph records differentiable operations as they run (define-by-run).
// Backward, from a scalar, walks the record in reverse, accumulates
// gradients into every leaf tensor that requires them (parameters), and
// frees the graph: intermediate buffers go back to the device pool, so a
// training loop that repeats the same shapes reuses memory step after step.
//
// Errors are sticky, as in bufio.Scanner: an operation given bad input
// (shape mismatch, wrong device or dtype, out-of-range ids) records an
// error that names the operation and the shapes, returns nil, and turns
// every later operation into a no-op; Err and Backward report it. Check
// Err before reading values of a forward pass.
//
//	g := autograd.New(dev)
//	for step := range steps {
//	    g.Reset()
//	    loss := model.Forward(g, inputs, targets)
//	    if err := g.Backward(loss); err != nil { ... }
//	}
//
// Fused ops (RMSNorm, RoPE, SwiGLU, Attention, the cross-entropies,
// Embedding, Scale, Sum) go through device/compose: the backend's fused
// kernel when it has the capability, the composition from the core
// otherwise, so every op runs on a backend of the core alone.
//
// Every recorded op is a value with its own backward rule (op.go), as a
// user's Function is: the rules of the core ops are written in Graph ops
// (autograd/unary.go's table gives each unary op's derivative in a line),
// those of MatMul and the fused ops at buffer level, each saying why.
//
// This package depends on device/ (and device/compose) and tensor/ only;
// it never knows which backend runs.
package autograd

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/compose"
	"github.com/hilbert-ml/hilbert/tensor"
)

// ErrFreed is returned by Backward on a graph whose record was already
// consumed by an earlier Backward.
var ErrFreed = errors.New("autograd: Backward called twice: the graph was freed by the first Backward (call Reset and run the forward pass again)")

// Graph records operations on one device for one forward/backward pass.
// A Graph is not safe for concurrent use.
type Graph struct {
	dev device.Device
	// id names the graph in errors; pass counts its Resets. A recorded
	// output carries both (origin), so an op refuses a tensor recorded by
	// another graph or before the last Reset, whose gradient would stop
	// there.
	id, pass uint32
	noGrad   bool
	autocast device.DType // 0: off
	err      error
	freed    bool
	nodes    []node
	// owned holds the tensors this graph allocated in the forward pass;
	// Reset (and Backward, for all but the loss and kept tensors) returns
	// them to the pool.
	owned []*tensor.Tensor
	// applying is the call whose Forward is running (SaveForBackward adds
	// to it); backwardCall the one whose Backward is.
	applying, backwardCall *customCall
	// backwardFrom is where in owned the running backward rule's tensors
	// start (give hands them on, releaseSince releases the rest).
	backwardFrom int
	// ready is the OnGradReady hook (nil: none); readyPlan and readySeen
	// are its reusable bookkeeping.
	ready     func(*tensor.Tensor)
	readyPlan []readyLeaf
	readySeen map[*tensor.Tensor]struct{}
	// casts holds this pass's autocast copies by source tensor (castCopy).
	casts map[*tensor.Tensor]castEntry
}

// castEntry is an autocast copy and the version of its source it was made
// from.
type castEntry struct {
	version uint64
	dtype   device.DType
	copy    *tensor.Tensor
}

// graphs counts the graphs made, to give each an id.
var graphs atomic.Uint32

// New returns an empty graph that records operations on dev.
func New(dev device.Device) *Graph {
	return &Graph{dev: dev, id: graphs.Add(1)}
}

// String names the graph as errors do: "graph #3".
func (g *Graph) String() string { return fmt.Sprintf("graph #%d", g.id) }

// origin is the id of the current pass's recordings (never 0: id is not).
func (g *Graph) origin() uint64 { return uint64(g.id)<<32 | uint64(g.pass) }

// foreign returns the error for input i of op, a tensor recorded under
// another origin than this pass's.
func (g *Graph) foreign(op string, i int, t *tensor.Tensor) error {
	const fix = "record both ops in one pass of one graph, or call SetRequiresGrad(false) on it to use it as a constant"
	if id := uint32(t.Origin() >> 32); id != g.id {
		return fmt.Errorf("autograd: %s: input %d %v was recorded by graph #%d, not by this one (%v): gradients flow only through the graph that recorded an op, so its gradient would never reach graph #%d's inputs (%s)", op, i, t, id, g, id, fix)
	}
	return fmt.Errorf("autograd: %s: input %d %v was recorded by this graph (%v) before its last Reset, which dropped that record: its gradient would stop there (%s)", op, i, t, g, fix)
}

// Device returns the graph's device.
func (g *Graph) Device() device.Device { return g.dev }

// SetNoGrad turns recording off (evaluation) or on. With recording off, no
// backward information is kept and Backward is an error.
func (g *Graph) SetNoGrad(on bool) { g.noGrad = on }

// NoGrad reports whether recording is off.
func (g *Graph) NoGrad() bool { return g.noGrad }

// SetAutocast makes MatMul cast its float32 operands to dtype (only
// device.BFloat16 is meaningful) and multiply them with float32
// accumulation and a float32 result, in the forward and the backward pass:
// mixed precision as PyTorch's autocast runs it, with parameters, gradients
// and every other op (norms, attention, the fused head and loss) in
// float32. 0 turns it off. The backend must support the dtype as a GEMM
// operand.
func (g *Graph) SetAutocast(dtype device.DType) { g.autocast = dtype }

// Autocast returns the MatMul operand dtype, or 0 when autocast is off.
func (g *Graph) Autocast() device.DType { return g.autocast }

// castCopy returns a graph-owned copy of t in dtype, made once per pass
// and version of t: a tensor multiplied several times (the normalized
// input of q, k and v, or of the MLP's gate and up) is cast once, and one
// changed in place since is cast again. The copies are read-only.
func (g *Graph) castCopy(op string, t *tensor.Tensor, dtype device.DType) *tensor.Tensor {
	if e, ok := g.casts[t]; ok && e.dtype == dtype && e.version == t.Version() {
		return e.copy
	}
	c := g.allocOf(op, dtype, t.Shape()...)
	if c != nil {
		g.dev.Cast(c.Buffer(), t.Buffer())
		if g.casts == nil {
			g.casts = make(map[*tensor.Tensor]castEntry)
		}
		g.casts[t] = castEntry{t.Version(), dtype, c}
	}
	return c
}

// Err returns the first error an operation recorded, or nil.
func (g *Graph) Err() error { return g.err }

// Fail records err as the graph's error if none is recorded yet. Modules
// built on the graph use it to report their own bad input.
func (g *Graph) Fail(err error) {
	if g.err == nil && err != nil {
		g.err = err
	}
}

// failf records a formatted error and returns nil for convenience.
func (g *Graph) failf(format string, args ...any) *tensor.Tensor {
	g.Fail(fmt.Errorf("autograd: "+format, args...))
	return nil
}

// Reset releases every tensor the graph still owns, clears its record and
// error, and makes it ready for a new forward pass. Tensors returned by
// earlier operations must not be used after Reset, except those passed to
// Keep.
func (g *Graph) Reset() {
	for _, t := range g.owned {
		releaseWithGrad(t)
	}
	clear(g.owned)
	g.owned = g.owned[:0]
	clear(g.casts)
	g.clearNodes()
	g.applying, g.backwardCall = nil, nil
	g.err = nil
	g.freed = false
	g.pass++
}

func releaseWithGrad(t *tensor.Tensor) {
	if gr := t.Grad(); gr != nil && gr.Pooled() {
		gr.Release()
		t.SetGrad(nil)
	}
	t.Release()
}

func (g *Graph) clearNodes() {
	clear(g.nodes)
	g.nodes = g.nodes[:0]
}

// Keep removes t from the graph's ownership: it survives Reset and
// Backward, and the caller must Release it when done. t may be a view
// (Reshape) of a tensor the graph owns: the view then takes over the
// buffer. Keeping a tensor the graph does not own (a parameter, an input,
// a view of one) changes nothing.
func (g *Graph) Keep(t *tensor.Tensor) {
	for i, o := range g.owned {
		if o == t || t.TakeOwnership(o) {
			g.owned[i] = g.owned[len(g.owned)-1]
			g.owned = g.owned[:len(g.owned)-1]
			return
		}
	}
}

func (g *Graph) allocOf(op string, dtype device.DType, shape ...int) *tensor.Tensor {
	t, err := tensor.NewPooled(g.dev, dtype, shape...)
	if err != nil {
		return g.failf("%s: %v", op, err)
	}
	g.owned = append(g.owned, t)
	return t
}

// scratchOf returns a pooled tensor that the caller releases itself (used
// in backward for gradients).
func (g *Graph) scratchOf(dtype device.DType, shape ...int) *tensor.Tensor {
	t, err := tensor.NewPooled(g.dev, dtype, shape...)
	if err != nil {
		panic(fmt.Sprintf("autograd: backward allocation %v failed: %v", tensor.Shape(shape), err))
	}
	return t
}

// ok checks that the graph has no error and every input is usable on the
// graph's device; it records an error naming op otherwise.
func (g *Graph) ok(op string, inputs ...*tensor.Tensor) bool {
	if g.err != nil {
		return false
	}
	if g.freed {
		g.err = fmt.Errorf("autograd: %s on a graph freed by Backward (call Reset first)", op)
		return false
	}
	for i, t := range inputs {
		if t == nil {
			g.failf("%s: input %d is nil", op, i)
			return false
		}
		if t.Released() {
			g.failf("%s: input %d %v was released (Reset and Backward release the tensors a graph made; Keep one to use it in a later pass)", op, i, t.Shape())
			return false
		}
		if t.Device() != g.dev {
			g.failf("%s: input %d %v is on %s, the graph on %s", op, i, t.Shape(), t.Device().Name(), g.dev.Name())
			return false
		}
		if !g.noGrad && t.RequiresGrad() && !t.IsLeaf() && t.Origin() != g.origin() {
			g.Fail(g.foreign(op, i, t))
			return false
		}
	}
	return true
}

// wantsGrad reports whether an op on these inputs must be recorded.
func (g *Graph) wantsGrad(inputs ...*tensor.Tensor) bool {
	if g.noGrad {
		return false
	}
	for _, t := range inputs {
		if t != nil && t.RequiresGrad() {
			return true
		}
	}
	return false
}

// Backward computes gradients of the scalar loss with respect to every
// leaf tensor that requires them, accumulating into their Grad, then
// frees the graph's intermediate tensors (loss itself and kept tensors
// stay readable until Reset).
func (g *Graph) Backward(loss *tensor.Tensor) error {
	if g.err != nil {
		return g.err
	}
	if g.freed {
		return ErrFreed
	}
	if g.noGrad {
		return errors.New("autograd: Backward on a graph in no-grad mode")
	}
	if loss == nil || loss.Len() != 1 {
		shape := tensor.Shape(nil)
		if loss != nil {
			shape = loss.Shape()
		}
		return fmt.Errorf("autograd: Backward needs a scalar loss, got shape %v", shape)
	}
	if !loss.RequiresGrad() {
		return errors.New("autograd: Backward: the loss does not depend on any tensor that requires grad")
	}
	if !loss.IsLeaf() && loss.Origin() != g.origin() {
		return g.foreign("Backward", 0, loss)
	}
	seed := g.scratchLike(loss, loss.Shape()...)
	g.dev.Fill(seed.Buffer(), 1)
	loss.SetGrad(seed)
	next := 0 // leaves of readyPlan not yet reported
	if g.ready != nil {
		g.planReady()
		next = len(g.readyPlan)
	}
	for i := len(g.nodes) - 1; i >= 0; i-- {
		if next > 0 { // report the leaves whose last node (i+1 or later) has run
			next = g.fireReady(i+1, next)
		}
		n := &g.nodes[i]
		gout := n.out.Grad()
		if gout == nil {
			continue // the output did not reach the loss
		}
		if err := g.checkVersions(n); err != nil {
			g.abandon(i, loss)
			return err
		}
		g.runBackward(n, gout)
		if g.err != nil { // a backward rule failed
			gout.Release()
			n.out.SetGrad(nil)
			g.abandon(i-1, loss)
			return g.err
		}
		gout.Release() // a no-op when backward moved it to an input
		n.out.SetGrad(nil)
	}
	if next > 0 {
		g.fireReady(0, next)
	}
	g.releaseForward(loss) // free the forward tensors now, except the loss
	if err := g.dev.Synchronize(); err != nil {
		return fmt.Errorf("autograd: Backward: %w", err)
	}
	return nil
}

// runBackward runs n's backward rule with recording off, as a Function's
// Backward runs, then releases the tensors the rule made and did not give
// to an input.
func (g *Graph) runBackward(n *node, gout *tensor.Tensor) {
	g.noGrad, g.backwardFrom = true, len(g.owned)
	n.op.backward(g, n, gout)
	g.releaseSince(g.backwardFrom)
	g.noGrad = false
}

// abandon ends a Backward that stopped at node last: it releases the
// gradients of the nodes not yet run and the forward tensors but the loss,
// and marks the graph freed.
func (g *Graph) abandon(last int, loss *tensor.Tensor) {
	for i := last; i >= 0; i-- {
		n := &g.nodes[i]
		if gr := n.out.Grad(); gr != nil {
			gr.Release()
			n.out.SetGrad(nil)
		}
	}
	g.releaseForward(loss)
}

// releaseForward drops the recorded nodes, marks the graph freed and
// releases the forward tensors (and their gradients) except the loss.
func (g *Graph) releaseForward(loss *tensor.Tensor) {
	g.clearNodes()
	clear(g.casts)
	g.freed = true
	kept := g.owned[:0]
	for _, t := range g.owned {
		if t == loss {
			kept = append(kept, t)
			continue
		}
		releaseWithGrad(t)
	}
	clear(g.owned[len(kept):])
	g.owned = kept
}

// accumulate adds grad into t's gradient. It takes ownership of grad: grad
// becomes t's gradient or is released after being added.
func (g *Graph) accumulate(t, grad *tensor.Tensor) {
	if !t.RequiresGrad() {
		grad.Release()
		return
	}
	cur, overwrite := t.GradToOverwrite()
	switch {
	case overwrite: // a parameter's first gradient of the step (ZeroGrad)
		if !tensor.SwapStorage(cur, grad) {
			g.dev.Copy(cur.Buffer(), grad.Buffer())
		}
		grad.Release() // to the pool, with the parameter's old buffer if swapped
	case cur == nil && t.IsLeaf():
		// A parameter's gradient is persistent, outside the pool.
		p, err := tensor.NewOf(g.dev, t.DType(), t.Shape()...)
		if err != nil {
			panic(fmt.Sprintf("autograd: gradient of %v: %v", t, err))
		}
		g.dev.Copy(p.Buffer(), grad.Buffer())
		t.SetGrad(p)
		grad.Release()
	case cur == nil:
		if !grad.SameShape(t) {
			moved, err := grad.MoveTo(t.Shape()...)
			if err != nil {
				panic(fmt.Sprintf("autograd: gradient shape %v for %v", grad.Shape(), t))
			}
			grad = moved
		}
		t.SetGrad(grad)
	default:
		g.addInto(cur, grad)
		grad.Release()
	}
}

// addInto computes dst += src (same length): the float32 kernel of the
// paper's model, the core's broadcasting add for other dtypes.
func (g *Graph) addInto(dst, src *tensor.Tensor) {
	if dst.DType() == device.Float32 {
		compose.Axpby(g.dev, dst.Buffer(), src.Buffer(), 1, 1)
		return
	}
	dims := device.DimsOf(dst.Len())
	g.dev.BinaryStrided(device.Add, dims, dst.Buffer(), device.Contiguous(dst.Buffer(), dims), device.Contiguous(src.Buffer(), dims))
}

// leafGrad returns t's persistent gradient, allocating a zeroed one if
// needed, for ops that accumulate straight into it (embedding backward).
func (g *Graph) leafGrad(t *tensor.Tensor) *tensor.Tensor {
	if t.Grad() == nil {
		p, err := tensor.New(g.dev, t.Shape()...)
		if err != nil {
			panic(fmt.Sprintf("autograd: gradient of %v: %v", t, err))
		}
		t.SetGrad(p)
	}
	return t.Grad()
}
