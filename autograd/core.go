package autograd

import (
	"math"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/tensor"
)

// The differentiable ops over the device's core primitives: unary maps,
// broadcasting binary ops, comparisons, Where, and reductions over one
// axis. They take float32 tensors, and float64 ones on a backend that has
// them (the CPU), which is what GradCheck uses. Their backward passes are
// compositions of the same primitives; a broadcast operand's gradient is
// summed back to its shape.

// isFloat reports whether t has a float compute dtype.
func isFloat(t *tensor.Tensor) bool {
	return t.DType() == device.Float32 || t.DType() == device.Float64
}

// Constant returns a scalar (shape []) graph-owned tensor holding v in
// dtype, which broadcasts against any tensor.
func (g *Graph) Constant(v float64, dtype device.DType) *tensor.Tensor {
	if g.err != nil {
		return nil
	}
	c := g.allocOf("Constant", dtype)
	if c == nil {
		return nil
	}
	vals := [1]float64{v}
	g.dev.CopyFloat64FromHost(c.Buffer(), vals[:])
	return c
}

// broadcastNames names the broadcasting binary ops in errors.
var broadcastNames = [...]string{device.Add: "Add", device.Sub: "Sub", device.Mul: "Mul", device.Div: "Div",
	device.Maximum: "Maximum", device.Minimum: "Minimum", device.Pow: "Pow", device.Eq: "Eq", device.Ne: "Ne",
	device.Lt: "Lt", device.Le: "Le", device.Gt: "Gt", device.Ge: "Ge"}

// Div returns a / b with broadcasting.
func (g *Graph) Div(a, b *tensor.Tensor) *tensor.Tensor { return g.broadcast(device.Div, a, b) }

// Maximum returns the elementwise larger of a and b with broadcasting; a
// tie sends half the gradient to each.
func (g *Graph) Maximum(a, b *tensor.Tensor) *tensor.Tensor { return g.broadcast(device.Maximum, a, b) }

// Minimum returns the elementwise smaller of a and b with broadcasting.
func (g *Graph) Minimum(a, b *tensor.Tensor) *tensor.Tensor { return g.broadcast(device.Minimum, a, b) }

// Pow returns a^b with broadcasting.
func (g *Graph) Pow(a, b *tensor.Tensor) *tensor.Tensor { return g.broadcast(device.Pow, a, b) }

// Compare returns the 0/1 mask of a op b (Eq, Ne, Lt, Le, Gt, Ge) with
// broadcasting, in the operands' dtype (float, or int32 on a backend with
// int32 arithmetic). It is not differentiable: the mask is a constant.
func (g *Graph) Compare(op device.BinaryOp, a, b *tensor.Tensor) *tensor.Tensor {
	if !op.IsComparison() {
		return g.failf("Compare: %v is not a comparison", op)
	}
	return g.broadcast(op, a, b)
}

// broadcast runs a binary op with NumPy broadcasting and records it.
func (g *Graph) broadcast(op device.BinaryOp, a, b *tensor.Tensor) *tensor.Tensor {
	name := broadcastNames[op]
	if !g.ok(name, a, b) {
		return nil
	}
	if a.DType() != b.DType() || !isFloat(a) && !(a.DType() == device.Int32 && int32Op(op)) {
		if a.DType() == b.DType() && a.DType() == device.Int32 {
			return g.failf("%s: int32 operands: int32 takes Add, Sub, Mul, Maximum, Minimum and the comparisons (Cast to a float dtype for %s)", name, name)
		}
		return g.failf("%s: dtypes %v and %v (want one float dtype, or int32 for both)", name, a.DType(), b.DType())
	}
	shape, ok := device.BroadcastShapes(a.Shape(), b.Shape())
	if !ok || len(shape) > device.MaxDims {
		return g.failf("%s: shapes %v and %v do not broadcast", name, a.Shape(), b.Shape())
	}
	out := g.allocOf(name, a.DType(), shape...)
	if out == nil {
		return nil
	}
	g.binaryInto(op, out, a, b)
	if !op.IsComparison() && isFloat(a) && g.wantsGrad(a, b) {
		g.record(node{op: binaryOp(op), out: out, in: [3]*tensor.Tensor{a, b}})
	}
	return out
}

// int32Op reports whether op takes int32 operands: the ops whose int32
// results are exact or wrap (two's complement), not Div and Pow.
func int32Op(op device.BinaryOp) bool { return op != device.Div && op != device.Pow }

// binaryInto writes a op b into out, whose shape is their broadcast.
func (g *Graph) binaryInto(op device.BinaryOp, out, a, b *tensor.Tensor) {
	dims := device.DimsOf(out.Shape()...)
	av, _ := device.Broadcast(a.Buffer(), a.Shape(), dims)
	bv, _ := device.Broadcast(b.Buffer(), b.Shape(), dims)
	g.dev.BinaryStrided(op, dims, out.Buffer(), av, bv)
}

// Where returns cond != 0 ? a : b elementwise with broadcasting of all
// three. a and b share a dtype: float (differentiable in a and b) or
// int32 (on a backend with int32 arithmetic, the CPU). cond, not
// differentiated, is a mask of any of those dtypes, such as Compare's:
// one of another dtype than a's is first turned into a 0/1 mask of a's
// (so a float cond of 0.5 selects a for int32 operands too).
func (g *Graph) Where(cond, a, b *tensor.Tensor) *tensor.Tensor {
	const name = "Where"
	if !g.ok(name, cond, a, b) {
		return nil
	}
	known := func(t *tensor.Tensor) bool { return isFloat(t) || t.DType() == device.Int32 }
	if a.DType() != b.DType() || !known(a) || !known(cond) {
		return g.failf("%s: dtypes %v (cond), %v and %v (want a and b of one float dtype or int32, and a float or int32 cond)",
			name, cond.DType(), a.DType(), b.DType())
	}
	if cond.DType() != a.DType() {
		if isFloat(cond) {
			cond = g.Compare(device.Ne, cond, g.Constant(0, cond.DType()))
		}
		if cond = g.Cast(cond, a.DType()); cond == nil {
			return nil
		}
	}
	ab, ok1 := device.BroadcastShapes(a.Shape(), b.Shape())
	shape, ok2 := device.BroadcastShapes(cond.Shape(), ab)
	if !ok1 || !ok2 || len(shape) > device.MaxDims {
		return g.failf("%s: shapes %v, %v and %v do not broadcast", name, cond.Shape(), a.Shape(), b.Shape())
	}
	out := g.allocOf(name, a.DType(), shape...)
	if out == nil {
		return nil
	}
	g.whereInto(out, cond, a, b)
	if isFloat(a) && g.wantsGrad(a, b) {
		g.record(node{op: whereOp{}, out: out, in: [3]*tensor.Tensor{a, b}, saved: [3]*tensor.Tensor{cond}})
	}
	return out
}

func (g *Graph) whereInto(out, cond, a, b *tensor.Tensor) {
	dims := device.DimsOf(out.Shape()...)
	cv, _ := device.Broadcast(cond.Buffer(), cond.Shape(), dims)
	av, _ := device.Broadcast(a.Buffer(), a.Shape(), dims)
	bv, _ := device.Broadcast(b.Buffer(), b.Shape(), dims)
	g.dev.Where(dims, out.Buffer(), cv, av, bv)
}

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
	if !g.ok(name, x) {
		return nil
	}
	if !isFloat(x) {
		return g.failf("%s: dtype %v (want float32 or float64)", name, x.DType())
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
	if g.wantsGrad(x) {
		var kind operation = sumAxisOp{}
		if op != device.Sum {
			kind = maxAxisOp{}
		}
		g.record(node{op: kind, out: out, in: [3]*tensor.Tensor{x}, ints: [4]int{outer, n, inner}, f64: scale})
	}
	return out
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

// Backward passes at buffer level (the fused ops, MatMul) take pooled
// scratch tensors and hand them to accumulate.

// scratchLike returns a pooled tensor of t's dtype and the given shape,
// released by the caller.
func (g *Graph) scratchLike(t *tensor.Tensor, shape ...int) *tensor.Tensor {
	return g.scratchOf(t.DType(), shape...)
}

// konst returns a scalar scratch tensor of t's dtype holding v.
func (g *Graph) konst(t *tensor.Tensor, v float64) *tensor.Tensor {
	c := g.scratchLike(t)
	vals := [1]float64{v}
	g.dev.CopyFloat64FromHost(c.Buffer(), vals[:])
	return c
}

// release releases scratch tensors.
func release(ts ...*tensor.Tensor) {
	for _, t := range ts {
		t.Release()
	}
}

// copyOf returns a scratch copy of t.
func (g *Graph) copyOf(t *tensor.Tensor) *tensor.Tensor {
	c := g.scratchLike(t, t.Shape()...)
	g.dev.Copy(c.Buffer(), t.Buffer())
	return c
}

// Backward passes in Graph ops.

// zerosLike returns zeros of t's dtype and shape.
func (g *Graph) zerosLike(t *tensor.Tensor) *tensor.Tensor {
	return g.BroadcastTo(g.Constant(0, t.DType()), t.Shape()...)
}

// sumTo sums d, the gradient of a broadcast result, over the axes that
// broadcasting added or stretched, back to x's shape.
func (g *Graph) sumTo(d, x *tensor.Tensor) *tensor.Tensor {
	if d == nil || d.SameShape(x) {
		return d
	}
	shape, ds := x.Shape(), d.Shape()
	pad := len(ds) - len(shape)
	for i := range ds {
		if (i < pad || shape[i-pad] == 1) && ds[i] != 1 {
			d = g.SumAxis(d, i, true)
		}
	}
	return g.Reshape(d, shape...)
}

// binaryRule is the gradient of y = a op b in Graph ops: da and db at the
// broadcast shape (summed back to each operand's by the caller), and the
// slots they read.
type binaryRule struct {
	reads  slots
	da, db binaryGrad
}

// binaryGrad is one operand's gradient of y = a op b, from dy.
type binaryGrad func(g *Graph, a, b, y, dy *tensor.Tensor) *tensor.Tensor

// binaryRules holds the gradients of the differentiable device.BinaryOps.
// The float32 results are those of the buffer-level rules they replaced:
// the same operations in the same order.
var binaryRules = [...]binaryRule{
	device.Add: {0, passGrad, passGrad},
	device.Sub: {0, passGrad, func(g *Graph, a, b, y, dy *tensor.Tensor) *tensor.Tensor { return g.Neg(dy) }},
	device.Mul: {in0 | in1,
		func(g *Graph, a, b, y, dy *tensor.Tensor) *tensor.Tensor { return g.Mul(dy, b) },
		func(g *Graph, a, b, y, dy *tensor.Tensor) *tensor.Tensor { return g.Mul(dy, a) }},
	device.Div: {in1 | output,
		func(g *Graph, a, b, y, dy *tensor.Tensor) *tensor.Tensor { return g.Div(dy, b) },
		func(g *Graph, a, b, y, dy *tensor.Tensor) *tensor.Tensor { return g.Div(g.Neg(g.Mul(dy, y)), b) }},
	device.Maximum: {in0 | in1, tieSplit(device.Gt, device.Ge, false), tieSplit(device.Gt, device.Ge, true)},
	device.Minimum: {in0 | in1, tieSplit(device.Lt, device.Le, false), tieSplit(device.Lt, device.Le, true)},
	device.Pow: {in0 | in1 | output,
		func(g *Graph, a, b, y, dy *tensor.Tensor) *tensor.Tensor { // dy b a^(b-1)
			return g.Mul(dy, g.Mul(g.Pow(a, g.Sub(b, g.Constant(1, a.DType()))), b))
		},
		func(g *Graph, a, b, y, dy *tensor.Tensor) *tensor.Tensor { // dy y log(a), 0 where a == 0
			zero := g.Constant(0, a.DType())
			return g.Mul(dy, g.Where(g.Compare(device.Eq, a, zero), zero, g.Mul(y, g.Log(a))))
		}},
}

// passGrad is the gradient dy itself (Add's, Sub's of a).
func passGrad(g *Graph, a, b, y, dy *tensor.Tensor) *tensor.Tensor { return dy }

// tieSplit returns Maximum's (wins Gt, ties Ge) or Minimum's (Lt, Le)
// gradient of a, or of b when forB: dy where the operand wins over the
// other, half of dy on a tie.
func tieSplit(wins, ties device.BinaryOp, forB bool) binaryGrad {
	return func(g *Graph, a, b, y, dy *tensor.Tensor) *tensor.Tensor {
		if forB {
			a, b = b, a
		}
		mask := g.Add(g.Compare(wins, a, b), g.Compare(ties, a, b))
		return g.Mul(dy, g.Mul(mask, g.Constant(0.5, a.DType())))
	}
}

// binaryOp is a recorded binary op (broadcasting or not).
type binaryOp device.BinaryOp

func (o binaryOp) name() string      { return broadcastNames[o] }
func (o binaryOp) reads(*node) slots { return binaryRules[o].reads }
func (o binaryOp) backward(g *Graph, n *node, dy *tensor.Tensor) {
	r, a, b := &binaryRules[o], n.in[0], n.in[1]
	if a.RequiresGrad() {
		g.give(a, g.sumTo(r.da(g, a, b, n.out, dy), a))
	}
	if b.RequiresGrad() {
		g.give(b, g.sumTo(r.db(g, a, b, n.out, dy), b))
	}
}

// whereOp is a recorded Where; saved[0] is the condition, of a's dtype.
type whereOp struct{}

func (whereOp) name() string      { return "Where" }
func (whereOp) reads(*node) slots { return saved0 }
func (whereOp) backward(g *Graph, n *node, dy *tensor.Tensor) {
	a, b, cond := n.in[0], n.in[1], n.saved[0]
	zero := g.Constant(0, dy.DType())
	if a.RequiresGrad() {
		g.give(a, g.sumTo(g.Where(cond, dy, zero), a))
	}
	if b.RequiresGrad() {
		g.give(b, g.sumTo(g.Where(cond, zero, dy), b))
	}
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
