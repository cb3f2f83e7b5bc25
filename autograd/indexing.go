package autograd

import (
	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/tensor"
)

// axisIndex checks the operands of GatherAxis and ScatterAddAxis: idx an
// int32 tensor of x's rank whose sizes match x's on every axis but axis,
// with values in [0, x.Dim(axis)). It returns the split of x's shape
// (outer, n, inner), idx's size m on the axis, and idx's row-major view.
func (g *Graph) axisIndex(op string, x *tensor.Tensor, axis int, idx *tensor.Tensor) (outer, n, inner, m int, v device.View, ok bool) {
	outer, n, inner, ax, _, ok := axisSplit(x.Shape(), axis, false)
	if !ok {
		g.failf("%s: axis %d of shape %v", op, axis, x.Shape())
		return 0, 0, 0, 0, v, false
	}
	xs, is := x.Shape(), idx.Shape()
	match := len(is) == len(xs)
	for d := 0; match && d < len(xs); d++ {
		match = d == ax || is[d] == xs[d]
	}
	if !match {
		g.failf("%s: index shape %v for input %v along axis %d: want the input's sizes on every other axis", op, is, xs, ax)
		return 0, 0, 0, 0, v, false
	}
	if !g.checkIDs(op, "indices", idx, n) {
		return 0, 0, 0, 0, v, false
	}
	m = is[ax]
	dims := device.DimsOf(outer, m, inner)
	return outer, n, inner, m, device.Contiguous(idx.Buffer(), dims), true
}

// GatherAxis is torch.gather: out[..., j, ...] = x[..., idx[..., j, ...], ...]
// along axis, for int32 indices idx of x's rank whose sizes equal x's on
// every other axis (torch allows smaller ones; here slice x first). The
// result has idx's shape and x's dtype. Its gradient scatter-adds into x's
// shape (repeated indices accumulate).
func (g *Graph) GatherAxis(x *tensor.Tensor, axis int, idx *tensor.Tensor) *tensor.Tensor {
	const name = "GatherAxis"
	if !g.ok(name, x, idx) {
		return nil
	}
	outer, n, inner, m, iv, ok := g.axisIndex(name, x, axis, idx)
	if !ok {
		return nil
	}
	shape := idx.Shape()
	return g.Apply(&Function{Name: name, Forward: func(g *Graph, in []*tensor.Tensor) *tensor.Tensor {
		out := g.allocOf(name, in[0].DType(), shape...)
		if out == nil {
			return nil
		}
		g.dev.GatherAxis(out.Buffer(), in[0].Buffer(), iv, outer, n, inner, m)
		return out
	}, Backward: func(g *Graph, gout *tensor.Tensor, in []*tensor.Tensor, _ *tensor.Tensor) []*tensor.Tensor {
		return []*tensor.Tensor{g.ScatterAddAxis(g.zerosLike(in[0]), axis, in[1], gout), nil}
	}}, x, idx)
}

// ScatterAddAxis is torch.scatter_add out of place: a copy of x with
// src[..., j, ...] added at x[..., idx[..., j, ...], ...] along axis, for
// int32 indices idx of src's shape, whose sizes equal x's on every other
// axis. Repeated indices accumulate. The gradient is the output's for x,
// and its GatherAxis through idx for src.
func (g *Graph) ScatterAddAxis(x *tensor.Tensor, axis int, idx, src *tensor.Tensor) *tensor.Tensor {
	const name = "ScatterAddAxis"
	if !g.ok(name, x, idx, src) {
		return nil
	}
	if !isFloat(x) || src.DType() != x.DType() || !src.SameShape(idx) {
		return g.failf("%s: input %v %v, indices %v, source %v %v: want one float dtype and source of the indices' shape",
			name, x.DType(), x.Shape(), idx.Shape(), src.DType(), src.Shape())
	}
	outer, n, inner, m, iv, ok := g.axisIndex(name, x, axis, idx)
	if !ok {
		return nil
	}
	return g.Apply(&Function{Name: name, Forward: func(g *Graph, in []*tensor.Tensor) *tensor.Tensor {
		out := g.allocOf(name, in[0].DType(), in[0].Shape()...)
		if out == nil {
			return nil
		}
		g.dev.Copy(out.Buffer(), in[0].Buffer())
		g.dev.ScatterAddAxis(out.Buffer(), in[2].Buffer(), iv, outer, n, inner, m)
		return out
	}, Backward: func(g *Graph, gout *tensor.Tensor, in []*tensor.Tensor, _ *tensor.Tensor) []*tensor.Tensor {
		var dsrc *tensor.Tensor
		if in[2].RequiresGrad() {
			dsrc = g.GatherAxis(gout, axis, in[1])
		}
		return []*tensor.Tensor{gout, nil, dsrc}
	}}, x, idx, src)
}

// Cast returns x converted to dtype (float32, float64, bfloat16 or
// int32; the backend converts what it stores: CUDA has no float64).
// Between float32 and float64 it rounds to nearest and is differentiable,
// the gradient cast back. To or from bfloat16 storage it rounds to nearest
// even and is not differentiable (autocast is the way to compute in
// bfloat16). To int32 it rounds toward zero, saturating at the int32
// limits, with NaN giving 0; from int32 it rounds to nearest even (to
// float64 exactly). A cast to or from int32 records no gradient: casting a
// float tensor that requires grad to int32 is allowed, as in PyTorch, and
// the result simply has no gradient path back to x. An int32 result keeps
// x's recorded index range when x is int32 (tensor.IndexRange); from a
// float it has none, and an index op reads it back once. Casting to x's
// own dtype copies.
func (g *Graph) Cast(x *tensor.Tensor, dtype device.DType) *tensor.Tensor {
	const name = "Cast"
	if !g.ok(name, x) {
		return nil
	}
	known := func(dt device.DType) bool {
		return dt == device.Float32 || dt == device.Float64 || dt == device.BFloat16 || dt == device.Int32
	}
	if !known(x.DType()) || !known(dtype) {
		return g.failf("%s: %v to %v: Cast converts between float32, float64, bfloat16 and int32", name, x.DType(), dtype)
	}
	forward := func(g *Graph, in []*tensor.Tensor) *tensor.Tensor {
		out := g.allocOf(name, dtype, in[0].Shape()...)
		if out == nil {
			return nil
		}
		g.dev.Cast(out.Buffer(), in[0].Buffer())
		if dtype == device.Int32 && in[0].DType() == device.Int32 {
			if lo, hi, ok := in[0].IndexRange(); ok {
				out.SetIndexRange(lo, hi)
			}
		}
		return out
	}
	if !g.wantsGrad(x) || x.DType() == device.Int32 || dtype == device.Int32 {
		return g.constant(name, forward, x)
	}
	if x.DType() == device.BFloat16 || dtype == device.BFloat16 {
		return g.failf("%s: %v to %v of a tensor that requires grad: bfloat16 is storage here, not differentiated (use autocast for bfloat16 products)", name, x.DType(), dtype)
	}
	return g.Apply(&Function{Name: name, Forward: forward,
		Backward: func(g *Graph, gout *tensor.Tensor, in []*tensor.Tensor, _ *tensor.Tensor) []*tensor.Tensor {
			return []*tensor.Tensor{g.Cast(gout, in[0].DType())}
		}}, x)
}

// constant runs a forward computation that records nothing (its inputs
// need no gradient), with the graph's usual error handling.
func (g *Graph) constant(name string, forward func(*Graph, []*tensor.Tensor) *tensor.Tensor, inputs ...*tensor.Tensor) *tensor.Tensor {
	out := forward(g, inputs)
	if out == nil && g.err == nil {
		return g.failf("%s: no output", name)
	}
	return out
}
