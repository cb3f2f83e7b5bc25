package autograd

import (
	"math"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/tensor"
)

// TopK returns the k largest elements of x along axis (negative counts
// from the end), or with largest false the k smallest, and their int32
// indices into the axis: both of x's shape with the axis of size k,
// sorted (the largest first, or the smallest first), as torch.topk.
//
// Order of ties: equal elements are taken in increasing index order. A
// NaN ranks before every number either way (the convention of ArgMaxAxis
// and ArgMinAxis; torch.topk ranks NaN largest, so its smallest-k differ
// on NaNs).
//
// The values are differentiable in x: their gradient is scattered back to
// the chosen positions (GatherAxis). The indices are constant and record
// their range [0, n), so they index without a read back.
//
// It is composed from the Core in k passes over x (ArgMax or ArgMin of x
// with the elements taken so far masked off), which suits the small k of
// sampling and routing; the axis may have at most 2^24 elements.
func (g *Graph) TopK(x *tensor.Tensor, axis, k int, largest bool) (values, indices *tensor.Tensor) {
	const name = "TopK"
	if !g.floatOK(name, x) {
		return nil, nil
	}
	outer, n, inner, ax, _, ok := axisSplit(x.Shape(), axis, false)
	if !ok {
		g.failf("%s: axis %d of shape %v", name, axis, x.Shape())
		return nil, nil
	}
	if k < 0 || k > n {
		g.failf("%s: k = %d for axis %d of size %d (want 0 <= k <= %d)", name, k, ax, n, n)
		return nil, nil
	}
	if n > 1<<24 {
		g.failf("%s: axis %d of size %d exceeds 2^24", name, ax, n)
		return nil, nil
	}
	shape := append([]int(nil), x.Shape()...)
	shape[ax] = k
	indices = g.allocOf(name, device.Int32, shape...)
	if indices == nil {
		return nil, nil
	}
	g.topKIndices(indices, x, outer, n, inner, k, largest)
	indices.SetIndexRange(0, int32(max(n-1, 0)))
	return g.GatherAxis(x, ax, indices), indices
}

// topKIndices writes the indices of TopK into idx [outer, k, inner]. Each
// round takes the ArgMax (ArgMin) of x with the taken elements replaced
// by -Inf (+Inf); when that lands on a taken element (every element left
// equals the sentinel), it takes the first element not yet taken instead.
func (g *Graph) topKIndices(idx, x *tensor.Tensor, outer, n, inner, k int, largest bool) {
	d, dt := g.dev, x.DType()
	op, sentinel := device.ArgMax, math.Inf(-1)
	if !largest {
		op, sentinel = device.ArgMin, math.Inf(1)
	}
	full := device.DimsOf(outer, n, inner)
	row := device.DimsOf(outer, 1, inner)
	key := g.scratchOf(dt, outer, n, inner)
	taken := g.scratchOf(dt, outer, n, inner)
	free := g.scratchOf(dt, outer, n, inner)
	ia, ib := g.scratchOf(device.Int32, outer, inner), g.scratchOf(device.Int32, outer, inner)
	fa, fb := g.scratchOf(dt, outer, inner), g.scratchOf(dt, outer, inner)
	takenAtA, ones := g.scratchOf(dt, outer, inner), g.scratchOf(dt, outer, inner)
	sent, zero := g.konst(dt, sentinel), g.konst(dt, 0)
	defer release(key, taken, free, ia, ib, fa, fb, takenAtA, ones, sent, zero)
	d.Fill(taken.Buffer(), 0)
	d.Fill(ones.Buffer(), 1)
	xv, tv := device.Contiguous(x.Buffer(), full), device.Contiguous(taken.Buffer(), full)
	rowIdx := func(b *tensor.Tensor) device.View { return device.Contiguous(b.Buffer(), row) }
	flat := device.DimsOf(outer * inner)
	for r := range k {
		d.Where(full, key.Buffer(), tv, device.View{Buf: sent.Buffer()}, xv)
		d.ReduceAxis(op, ia.Buffer(), key.Buffer(), outer, n, inner)
		// The fallback: the first element not taken.
		d.BinaryStrided(device.Eq, full, free.Buffer(), tv, device.View{Buf: zero.Buffer()})
		d.ReduceAxis(device.ArgMax, ib.Buffer(), free.Buffer(), outer, n, inner)
		d.GatherAxis(takenAtA.Buffer(), taken.Buffer(), rowIdx(ia), outer, n, inner, 1)
		d.Cast(fa.Buffer(), ia.Buffer())
		d.Cast(fb.Buffer(), ib.Buffer())
		d.Where(flat, fa.Buffer(), device.Contiguous(takenAtA.Buffer(), flat),
			device.Contiguous(fb.Buffer(), flat), device.Contiguous(fa.Buffer(), flat))
		d.Cast(ia.Buffer(), fa.Buffer())
		dst := device.View{Buf: idx.Buffer(), Layout: device.Layout{Offset: r * inner}}
		dst.Strides[0], dst.Strides[1] = k*inner, 1
		d.CopyStrided(device.DimsOf(outer, inner), dst, device.Contiguous(ia.Buffer(), device.DimsOf(outer, inner)))
		d.ScatterAddAxis(taken.Buffer(), ones.Buffer(), rowIdx(ia), outer, n, inner, 1)
	}
}
