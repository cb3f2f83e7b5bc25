package autograd

import (
	"math"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/compose"
	"github.com/hilbert-ml/hilbert/tensor"
)

// The reductions: over one axis (SumAxis, MeanAxis, MaxAxis, MinAxis, the
// arg reductions) and over every element (Sum, Mean), and the ops
// composed from them (VarianceAxis, LogSumExp, Softmax, LogSoftmax).

// axisSplit returns [outer, n, inner] of axis (negative counts from the
// end) of shape, and the reduced shape with or without the axis.
func axisSplit(shape tensor.Shape, axis int, keepDim bool) (outer, n, inner, ax int, out []int, ok bool) {
	if axis < 0 {
		axis += len(shape)
	}
	if axis < 0 || axis >= len(shape) {
		return 0, 0, 0, 0, nil, false
	}
	outer, inner = 1, 1
	for _, d := range shape[:axis] {
		outer *= d
	}
	for _, d := range shape[axis+1:] {
		inner *= d
	}
	out = append(out, shape[:axis]...)
	if keepDim {
		out = append(out, 1)
	}
	out = append(out, shape[axis+1:]...)
	return outer, shape[axis], inner, axis, out, true
}

// SumAxis returns the sum of x over one axis (negative counts from the
// end), keeping it as size 1 when keepDim is set.
func (g *Graph) SumAxis(x *tensor.Tensor, axis int, keepDim bool) *tensor.Tensor {
	return g.reduceAxis("SumAxis", device.Sum, x, axis, keepDim, false)
}

// MeanAxis returns the mean of x over one axis.
func (g *Graph) MeanAxis(x *tensor.Tensor, axis int, keepDim bool) *tensor.Tensor {
	return g.reduceAxis("MeanAxis", device.Sum, x, axis, keepDim, true)
}

// MaxAxis returns the largest element of x over one axis; its gradient
// goes to the maximal elements, split evenly among ties.
func (g *Graph) MaxAxis(x *tensor.Tensor, axis int, keepDim bool) *tensor.Tensor {
	return g.reduceAxis("MaxAxis", device.Max, x, axis, keepDim, false)
}

// MinAxis returns the smallest element of x over one axis.
func (g *Graph) MinAxis(x *tensor.Tensor, axis int, keepDim bool) *tensor.Tensor {
	return g.reduceAxis("MinAxis", device.Min, x, axis, keepDim, false)
}

// ArgMaxAxis returns the int32 indices of the first largest elements of x
// over one axis (a NaN counts as the largest; not differentiable). The
// result records its range [0, n), so it can index (IndexSelect,
// GatherAxis) without a read back.
func (g *Graph) ArgMaxAxis(x *tensor.Tensor, axis int, keepDim bool) *tensor.Tensor {
	return g.reduceAxis("ArgMaxAxis", device.ArgMax, x, axis, keepDim, false)
}

// ArgMinAxis returns the int32 indices of the first smallest elements of x
// over one axis (a NaN counts as the smallest; not differentiable), with
// its range recorded as ArgMaxAxis's.
func (g *Graph) ArgMinAxis(x *tensor.Tensor, axis int, keepDim bool) *tensor.Tensor {
	return g.reduceAxis("ArgMinAxis", device.ArgMin, x, axis, keepDim, false)
}

// VarianceAxis returns the (biased) variance of x over one axis, composed
// as the mean of the squared deviations from the mean.
func (g *Graph) VarianceAxis(x *tensor.Tensor, axis int, keepDim bool) *tensor.Tensor {
	if !g.axisOK("VarianceAxis", x, axis) {
		return nil
	}
	dev := g.Sub(x, g.MeanAxis(x, axis, true))
	return g.MeanAxis(g.Unary(device.Square, dev), axis, keepDim)
}

func (g *Graph) reduceAxis(name string, op device.ReduceOp, x *tensor.Tensor, axis int, keepDim, mean bool) *tensor.Tensor {
	if !g.floatOK(name, x) {
		return nil
	}
	outer, n, inner, ax, shape, ok := axisSplit(x.Shape(), axis, keepDim)
	if !ok {
		return g.failf("%s: axis %d of shape %v", name, axis, x.Shape())
	}
	if n == 0 && (op != device.Sum || mean) {
		return g.failf("%s: empty axis %d of shape %v", name, ax, x.Shape())
	}
	dtype := x.DType()
	arg := op == device.ArgMax || op == device.ArgMin
	if arg {
		dtype = device.Int32
	}
	out := g.allocOf(name, dtype, shape...)
	if out == nil {
		return nil
	}
	g.dev.ReduceAxis(op, out.Buffer(), x.Buffer(), outer, n, inner)
	if arg {
		out.SetIndexRange(0, int32(n-1))
		return out
	}
	scale := 1.0
	if mean {
		scale = 1 / float64(n)
		g.binaryInto(device.Mul, out, out, g.Constant(scale, dtype))
	}
	var kind operation = sumAxisOp{}
	if op != device.Sum {
		kind = maxAxisOp{}
	}
	return g.recorded(node{op: kind, out: out, in: [3]*tensor.Tensor{x}, ints: [4]int{outer, n, inner}, f64: scale})
}

// floatOK is ok for a composed op of one float input x: its errors name
// op, the method the caller called, not the ops it is composed of.
func (g *Graph) floatOK(op string, x *tensor.Tensor) bool {
	if !g.ok(op, x) {
		return false
	}
	if !isFloat(x) {
		g.failf("%s: dtype %v (want float32 or float64)", op, x.DType())
		return false
	}
	return true
}

// axisOK is floatOK for a composed op over a non-empty axis of x
// (negative counts from the end).
func (g *Graph) axisOK(op string, x *tensor.Tensor, axis int) bool {
	if !g.floatOK(op, x) {
		return false
	}
	if _, n, _, _, _, ok := axisSplit(x.Shape(), axis, true); !ok || n == 0 {
		g.failf("%s: axis %d of shape %v (want a non-empty axis in [-%d, %d))", op, axis, x.Shape(), x.Rank(), x.Rank())
		return false
	}
	return true
}

// LogSumExp returns log(sum(exp(x))) over one axis, computed as
// m + log(sum(exp(x - m))) with m the (constant) maximum.
func (g *Graph) LogSumExp(x *tensor.Tensor, axis int, keepDim bool) *tensor.Tensor {
	if !g.axisOK("LogSumExp", x, axis) {
		return nil
	}
	return g.logSumExp(x, axis, keepDim)
}

// logSumExp is LogSumExp once x and axis are checked.
func (g *Graph) logSumExp(x *tensor.Tensor, axis int, keepDim bool) *tensor.Tensor {
	m := g.detachedMax(x, axis)
	if m == nil {
		return nil
	}
	lse := g.Add(g.Log(g.SumAxis(g.Exp(g.Sub(x, m)), axis, true)), m)
	if keepDim || lse == nil {
		return lse
	}
	_, _, _, _, shape, _ := axisSplit(x.Shape(), axis, false)
	return g.Reshape(lse, shape...)
}

// LogSoftmax returns x - LogSumExp(x) over one axis.
func (g *Graph) LogSoftmax(x *tensor.Tensor, axis int) *tensor.Tensor {
	if !g.axisOK("LogSoftmax", x, axis) {
		return nil
	}
	return g.Sub(x, g.logSumExp(x, axis, true))
}

// Softmax returns exp(x - LogSumExp(x)) over one axis.
func (g *Graph) Softmax(x *tensor.Tensor, axis int) *tensor.Tensor {
	if !g.axisOK("Softmax", x, axis) {
		return nil
	}
	return g.Exp(g.Sub(x, g.logSumExp(x, axis, true)))
}

// detachedMax returns the maximum of x over axis with the axis kept, as a
// constant (not recorded).
func (g *Graph) detachedMax(x *tensor.Tensor, axis int) *tensor.Tensor {
	outer, n, inner, _, shape, ok := axisSplit(x.Shape(), axis, true)
	if !ok || n == 0 {
		return g.failf("LogSumExp: axis %d of shape %v", axis, x.Shape())
	}
	m := g.allocOf("LogSumExp", x.DType(), shape...)
	if m == nil {
		return nil
	}
	g.dev.ReduceAxis(device.Max, m.Buffer(), x.Buffer(), outer, n, inner)
	// A row of infinities would give inf - inf: shift by 0 there instead.
	// (m requires no grad, so none of this is recorded.)
	fin := g.Compare(device.Lt, g.Unary(device.Abs, m), g.Constant(math.Inf(1), x.DType()))
	return g.Where(fin, m, g.Constant(0, x.DType()))
}

// spread broadcasts r, x's [outer, n, inner] reduced over n, back to x's
// shape.
func (g *Graph) spread(r, x *tensor.Tensor, outer, n, inner int) *tensor.Tensor {
	return g.Reshape(g.BroadcastTo(g.Reshape(r, outer, 1, inner), outer, n, inner), x.Shape()...)
}

// sumAxisOp is a recorded SumAxis or MeanAxis: ints holds [outer, n,
// inner], f64 the mean's factor (1 for a sum).
type sumAxisOp struct{}

func (sumAxisOp) name() string      { return "SumAxis" }
func (sumAxisOp) reads(*node) slots { return 0 }
func (sumAxisOp) backward(g *Graph, n *node, dy *tensor.Tensor) {
	x := n.in[0]
	d := g.spread(dy, x, n.ints[0], n.ints[1], n.ints[2])
	if n.f64 != 1 {
		d = g.Mul(d, g.Constant(n.f64, x.DType()))
	}
	g.give(x, d)
}

// maxAxisOp is a recorded MaxAxis or MinAxis: the gradient goes to the
// elements equal to the result, split evenly among ties.
type maxAxisOp struct{}

func (maxAxisOp) name() string      { return "MaxAxis" }
func (maxAxisOp) reads(*node) slots { return in0 | output }
func (maxAxisOp) backward(g *Graph, n *node, dy *tensor.Tensor) {
	x := n.in[0]
	outer, m, inner := n.ints[0], n.ints[1], n.ints[2]
	mask := g.Compare(device.Eq, x, g.spread(n.out, x, outer, m, inner))
	count := g.SumAxis(g.Reshape(mask, outer, m, inner), 1, true)
	share := g.Div(g.Reshape(dy, outer, 1, inner), count)
	g.give(x, g.Mul(g.spread(share, x, outer, m, inner), mask))
}

// Sum returns the sum of all elements of x as a scalar (shape []).
func (g *Graph) Sum(x *tensor.Tensor) *tensor.Tensor { return g.sum("Sum", x, false) }

// Mean returns the mean of all elements of x as a scalar (shape []).
func (g *Graph) Mean(x *tensor.Tensor) *tensor.Tensor { return g.sum("Mean", x, true) }

// sum is Sum and Mean, the sum times the reciprocal of the count.
func (g *Graph) sum(op string, x *tensor.Tensor, mean bool) *tensor.Tensor {
	if !g.ok(op, x) {
		return nil
	}
	if x.Len() == 0 {
		return g.failf("%s: empty tensor %v", op, x.Shape())
	}
	out := g.allocOf(op, x.DType())
	if out == nil {
		return nil
	}
	if x.DType() == device.Float32 {
		compose.Reduce(g.dev, device.Sum, 1, out.Buffer(), x.Buffer(), 1, x.Len())
	} else {
		g.dev.ReduceAxis(device.Sum, out.Buffer(), x.Buffer(), 1, x.Len(), 1)
	}
	scale := 1.0
	if mean {
		scale = reciprocal(x.DType(), x.Len())
		g.scaleInto(out.Buffer(), out.Buffer(), scale)
	}
	return g.recorded(node{op: sumOp{}, out: out, in: [3]*tensor.Tensor{x}, f64: scale})
}

// sumOp is a recorded Sum or Mean, f64 its factor.
type sumOp struct{}

func (sumOp) name() string      { return "Sum" }
func (sumOp) reads(*node) slots { return 0 }
func (sumOp) backward(g *Graph, n *node, dy *tensor.Tensor) {
	x := n.in[0]
	d := g.BroadcastTo(dy, x.Shape()...)
	if n.f64 != 1 {
		d = g.Scale(d, n.f64)
	}
	g.give(x, d)
}
