package autograd

import (
	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/tensor"
)

// Movement ops: Permute, Slice, Concat, IndexSelect and BroadcastTo, each one strided
// copy (or gather) of the core, with the adjoint copy (or scatter-add) as
// its backward pass. They take any float dtype the backend has.

// rowMajor returns the row-major strides of shape.
func rowMajor(shape []int) [device.MaxDims]int {
	return device.DimsOf(shape...).RowMajor().Strides
}

// Permute returns x with its axes reordered: output axis i is input axis
// perm[i] (a copy, as torch's permute followed by contiguous).
func (g *Graph) Permute(x *tensor.Tensor, perm ...int) *tensor.Tensor {
	const name = "Permute"
	if !g.ok(name, x) {
		return nil
	}
	r := x.Rank()
	if len(perm) != r || r > device.MaxDims {
		return g.failf("%s: permutation %v of shape %v", name, perm, x.Shape())
	}
	seen := 0
	for _, p := range perm {
		if p < 0 || p >= r || seen&(1<<p) != 0 {
			return g.failf("%s: %v is not a permutation of %d axes", name, perm, r)
		}
		seen |= 1 << p
	}
	in := x.Shape()
	shape := make([]int, r)
	for i, p := range perm {
		shape[i] = in[p]
	}
	out := g.allocOf(name, x.DType(), shape...)
	if out == nil {
		return nil
	}
	g.permuteInto(out, x, perm)
	code := 0 // perm in octal digits, axis 0 the lowest
	for i := r - 1; i >= 0; i-- {
		code = code*8 + perm[i]
	}
	return g.recorded(node{op: permuteOp{}, out: out, in: [3]*tensor.Tensor{x}, ints: [4]int{code, r}})
}

// permuteInto writes x with axes perm into out (shaped accordingly).
func (g *Graph) permuteInto(out, x *tensor.Tensor, perm []int) {
	st := rowMajor(x.Shape())
	var l device.Layout
	for i, p := range perm {
		l.Strides[i] = st[p]
	}
	dims := device.DimsOf(out.Shape()...)
	g.dev.CopyStrided(dims, device.Contiguous(out.Buffer(), dims), device.View{Buf: x.Buffer(), Layout: l})
}

// permuteOp is a recorded Permute: ints[0] holds the permutation in
// octal digits (axis i's source in digit i), ints[1] the rank.
type permuteOp struct{}

func (permuteOp) name() string      { return "Permute" }
func (permuteOp) reads(*node) slots { return 0 }
func (permuteOp) backward(g *Graph, n *node, dy *tensor.Tensor) {
	var inv [device.MaxDims]int
	for i, code := 0, n.ints[0]; i < n.ints[1]; i, code = i+1, code/8 {
		inv[code%8] = i
	}
	g.give(n.in[0], g.Permute(dy, inv[:n.ints[1]]...))
}

// sliceLayout is the layout of x[..., start:stop, ...] along axis within
// x's row-major buffer, and the slice's shape.
func sliceLayout(shape tensor.Shape, axis, start, stop int) (device.Dims, device.Layout) {
	st := rowMajor(shape)
	s := append([]int(nil), shape...)
	s[axis] = stop - start
	return device.DimsOf(s...), device.Layout{Offset: start * st[axis], Strides: st}
}

// Slice returns x[..., start:stop, ...] along axis, a copy, with Python's
// slice rules: a negative axis, start or stop counts from the end, start
// and stop are then clamped to [0, n] (n the axis' size), and a stop at or
// before start gives an empty axis. So Slice(x, -1, -3, n) is x[..., -3:]
// for any n >= the size. An axis out of range is an error.
func (g *Graph) Slice(x *tensor.Tensor, axis, start, stop int) *tensor.Tensor {
	const name = "Slice"
	if !g.ok(name, x) {
		return nil
	}
	if ax := axis; axis < 0 {
		axis += x.Rank()
		if axis < 0 {
			return g.failf("%s: axis %d of shape %v", name, ax, x.Shape())
		}
	}
	if axis >= x.Rank() {
		return g.failf("%s: axis %d of shape %v", name, axis, x.Shape())
	}
	n := x.Dim(axis)
	start, stop = sliceIndex(start, n), sliceIndex(stop, n)
	stop = max(stop, start)
	dims, l := sliceLayout(x.Shape(), axis, start, stop)
	out := g.allocOf(name, x.DType(), dims.Shape()...)
	if out == nil {
		return nil
	}
	g.dev.CopyStrided(dims, device.Contiguous(out.Buffer(), dims), device.View{Buf: x.Buffer(), Layout: l})
	return g.recorded(node{op: sliceOp{}, out: out, in: [3]*tensor.Tensor{x}, ints: [4]int{axis, start, stop}})
}

// sliceIndex is Python's reading of a slice bound i of an axis of size n:
// negative counts from the end, then clamped to [0, n].
func sliceIndex(i, n int) int {
	if i < 0 {
		i += n
	}
	return min(max(i, 0), n)
}

// sliceOp is a recorded Slice of ints[0] (axis) from ints[1] to ints[2].
// Its gradient is dy between zeros, as candle's narrow.
type sliceOp struct{}

func (sliceOp) name() string      { return "Slice" }
func (sliceOp) reads(*node) slots { return 0 }
func (sliceOp) backward(g *Graph, n *node, dy *tensor.Tensor) {
	x, axis, start, stop := n.in[0], n.ints[0], n.ints[1], n.ints[2]
	zeros := func(size int) *tensor.Tensor {
		shape := x.Shape()
		shape[axis] = size
		return g.BroadcastTo(g.Constant(0, x.DType()), shape...)
	}
	parts := make([]*tensor.Tensor, 0, 3)
	if start > 0 {
		parts = append(parts, zeros(start))
	}
	parts = append(parts, dy)
	if rest := x.Dim(axis) - stop; rest > 0 {
		parts = append(parts, zeros(rest))
	}
	g.give(x, g.Concat(axis, parts...))
}

// Concat joins tensors of one dtype along axis; their other axes agree.
// It is recorded as a Function, so it takes any number of inputs.
func (g *Graph) Concat(axis int, xs ...*tensor.Tensor) *tensor.Tensor {
	const name = "Concat"
	if !g.ok(name, xs...) {
		return nil
	}
	if len(xs) == 0 {
		return g.failf("%s: no tensors", name)
	}
	r := xs[0].Rank()
	if axis < 0 {
		axis += r
	}
	if axis < 0 || axis >= r {
		return g.failf("%s: axis %d of shape %v", name, axis, xs[0].Shape())
	}
	shape := xs[0].Shape()
	total := 0
	for i, x := range xs {
		s := x.Shape()
		ok := len(s) == r && x.DType() == xs[0].DType()
		for k := 0; ok && k < r; k++ {
			ok = k == axis || s[k] == shape[k]
		}
		if !ok {
			return g.failf("%s: tensor %d is %v %v, tensor 0 %v %v (axis %d)", name, i, x.DType(), s, xs[0].DType(), shape, axis)
		}
		total += s[axis]
	}
	shape[axis] = total
	return g.Apply(&Function{Name: name, Forward: func(g *Graph, in []*tensor.Tensor) *tensor.Tensor {
		out := g.allocOf(name, in[0].DType(), shape...)
		if out == nil {
			return nil
		}
		at := 0
		for _, x := range in {
			dims, l := sliceLayout(out.Shape(), axis, at, at+x.Dim(axis))
			g.dev.CopyStrided(dims, device.View{Buf: out.Buffer(), Layout: l}, device.Contiguous(x.Buffer(), dims))
			at += x.Dim(axis)
		}
		return out
	}, Backward: func(g *Graph, gout *tensor.Tensor, in []*tensor.Tensor, _ *tensor.Tensor) []*tensor.Tensor {
		grads := make([]*tensor.Tensor, len(in))
		at := 0
		for i, x := range in {
			grads[i] = g.Slice(gout, axis, at, at+x.Dim(axis))
			at += x.Dim(axis)
		}
		return grads
	}}, xs...)
}

// IndexSelect returns the rows of x along axis picked by the int32 ids
// (any shape, values in [0, x.Dim(axis))): the axis is replaced by the
// ids' axes, as Embedding does for axis 0 of a matrix. Its backward
// scatter-adds into the gradient.
func (g *Graph) IndexSelect(x *tensor.Tensor, axis int, ids *tensor.Tensor) *tensor.Tensor {
	const name = "IndexSelect"
	if !g.ok(name, x, ids) {
		return nil
	}
	outer, n, inner, ax, _, ok := axisSplit(x.Shape(), axis, false)
	if !ok {
		return g.failf("%s: axis %d of shape %v", name, axis, x.Shape())
	}
	if !g.checkIDs(name, "ids", ids, n) {
		return nil
	}
	xs := x.Shape()
	shape := append(append(append([]int(nil), xs[:ax]...), ids.Shape()...), xs[ax+1:]...)
	if len(shape) > tensor.MaxRank {
		return g.failf("%s: result rank %d exceeds %d", name, len(shape), tensor.MaxRank)
	}
	out := g.allocOf(name, x.DType(), shape...)
	if out == nil {
		return nil
	}
	idx := device.View{Buf: ids.Buffer(), Layout: device.Layout{Strides: [device.MaxDims]int{0, 1, 0}}}
	g.dev.GatherAxis(out.Buffer(), x.Buffer(), idx, outer, n, inner, ids.Len())
	return g.recorded(node{op: indexSelectOp{}, out: out, in: [3]*tensor.Tensor{x}, saved: [3]*tensor.Tensor{ids}, ints: [4]int{outer, n, inner}})
}

// indexSelectOp is a recorded IndexSelect (saved[0] the ids, ints
// [outer, n, inner] of x about the axis). Its backward, an index-add,
// scatter-adds through the ids as a stride-0 view: Graph's ScatterAddAxis
// takes an index of the source's full shape, which would have to be
// materialised.
type indexSelectOp struct{}

func (indexSelectOp) name() string      { return "IndexSelect" }
func (indexSelectOp) reads(*node) slots { return saved0 }
func (indexSelectOp) backward(g *Graph, n *node, gout *tensor.Tensor) {
	x, ids := n.in[0], n.saved[0]
	d := g.scratchLike(x, x.Shape()...)
	g.dev.Fill(d.Buffer(), 0)
	idx := device.View{Buf: ids.Buffer(), Layout: device.Layout{Strides: [device.MaxDims]int{0, 1, 0}}}
	g.dev.ScatterAddAxis(d.Buffer(), gout.Buffer(), idx, n.ints[0], n.ints[1], n.ints[2], ids.Len())
	g.accumulate(x, d)
}

// BroadcastTo returns x materialised at shape by NumPy's broadcasting
// rules (x's shape aligned with the trailing axes of shape, its size-1 and
// missing leading axes repeated), a copy as torch's expand followed by
// contiguous. Its gradient sums over the repeated axes.
func (g *Graph) BroadcastTo(x *tensor.Tensor, shape ...int) *tensor.Tensor {
	const name = "BroadcastTo"
	if !g.ok(name, x) {
		return nil
	}
	if len(shape) > device.MaxDims {
		return g.failf("%s: shape %v has more than %d axes", name, shape, device.MaxDims)
	}
	for _, n := range shape {
		if n < 0 {
			return g.failf("%s: negative size in shape %v", name, shape)
		}
	}
	dims := device.DimsOf(shape...)
	src, ok := device.Broadcast(x.Buffer(), x.Shape(), dims)
	if !ok {
		return g.failf("%s: shape %v does not broadcast to %v", name, x.Shape(), shape)
	}
	out := g.allocOf(name, x.DType(), shape...)
	if out == nil {
		return nil
	}
	g.dev.CopyStrided(dims, device.Contiguous(out.Buffer(), dims), src)
	return g.recorded(node{op: broadcastToOp{}, out: out, in: [3]*tensor.Tensor{x}})
}

// broadcastToOp is a recorded BroadcastTo.
type broadcastToOp struct{}

func (broadcastToOp) name() string      { return "BroadcastTo" }
func (broadcastToOp) reads(*node) slots { return 0 }
func (broadcastToOp) backward(g *Graph, n *node, dy *tensor.Tensor) {
	g.give(n.in[0], g.sumTo(dy, n.in[0]))
}
