package autograd

import (
	"fmt"
	"math"
	"slices"

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

// Unary returns op(x) elementwise, differentiable for every op but Sign
// (whose gradient is zero).
func (g *Graph) Unary(op device.UnaryOp, x *tensor.Tensor) *tensor.Tensor {
	name := "Unary(" + op.String() + ")"
	if !g.ok(name, x) {
		return nil
	}
	if !isFloat(x) {
		return g.failf("%s: dtype %v (want float32 or float64)", name, x.DType())
	}
	if op < device.Neg || op > device.Expm1 {
		return g.failf("%s: unknown op", name)
	}
	out := g.allocOf(name, x.DType(), x.Shape()...)
	if out == nil {
		return nil
	}
	g.dev.Unary(op, out.Buffer(), x.Buffer())
	if g.wantsGrad(x) {
		g.record(node{op: opUnary, out: out, in: [3]*tensor.Tensor{x}, ints: [4]int{int(op)}})
	}
	return out
}

// Neg returns -x.
func (g *Graph) Neg(x *tensor.Tensor) *tensor.Tensor { return g.Unary(device.Neg, x) }

// Exp returns e^x.
func (g *Graph) Exp(x *tensor.Tensor) *tensor.Tensor { return g.Unary(device.Exp, x) }

// Log returns the natural logarithm of x.
func (g *Graph) Log(x *tensor.Tensor) *tensor.Tensor { return g.Unary(device.Log, x) }

// Sqrt returns the square root of x.
func (g *Graph) Sqrt(x *tensor.Tensor) *tensor.Tensor { return g.Unary(device.Sqrt, x) }

// Tanh returns tanh(x).
func (g *Graph) Tanh(x *tensor.Tensor) *tensor.Tensor { return g.Unary(device.Tanh, x) }

// Sigmoid returns 1/(1+e^-x).
func (g *Graph) Sigmoid(x *tensor.Tensor) *tensor.Tensor { return g.Unary(device.Sigmoid, x) }

// Relu returns max(x, 0).
func (g *Graph) Relu(x *tensor.Tensor) *tensor.Tensor { return g.Unary(device.Relu, x) }

// GELU returns the exact Gaussian error linear unit x * (1 + erf(x/sqrt 2)) / 2,
// composed from Erf.
func (g *Graph) GELU(x *tensor.Tensor) *tensor.Tensor {
	if !g.floatOK("GELU", x) {
		return nil
	}
	e := g.Unary(device.Erf, g.Mul(x, g.Constant(1/math.Sqrt2, x.DType())))
	return g.Mul(g.Mul(x, g.Constant(0.5, x.DType())), g.Add(e, g.Constant(1, x.DType())))
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
		g.record(node{op: opBroadcast, out: out, in: [3]*tensor.Tensor{a, b}, ints: [4]int{int(op)}})
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
		g.record(node{op: opWhere, out: out, in: [3]*tensor.Tensor{a, b}, saved: [3]*tensor.Tensor{cond}})
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
		kind := opSumAxis
		if op != device.Sum {
			kind = opMaxAxis
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

// Backward passes. Each composes the gradient from the primitives into
// scratch tensors, then sums it back to each input's shape.

// scratchLike returns a pooled tensor of t's dtype and the given shape,
// released by the caller.
func (g *Graph) scratchLike(t *tensor.Tensor, shape ...int) *tensor.Tensor {
	return g.scratchOf(t.DType(), shape...)
}

// bop returns a op b (broadcast) as a scratch tensor.
func (g *Graph) bop(op device.BinaryOp, a, b *tensor.Tensor) *tensor.Tensor {
	shape, ok := device.BroadcastShapes(a.Shape(), b.Shape())
	if !ok {
		panic(fmt.Sprintf("autograd: backward %v of %v and %v", op, a.Shape(), b.Shape()))
	}
	out := g.scratchLike(a, shape...)
	g.binaryInto(op, out, a, b)
	return out
}

// uop returns op(a) as a scratch tensor.
func (g *Graph) uop(op device.UnaryOp, a *tensor.Tensor) *tensor.Tensor {
	out := g.scratchLike(a, a.Shape()...)
	g.dev.Unary(op, out.Buffer(), a.Buffer())
	return out
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

// sumTo sums full (the shape of a broadcast result) over the broadcast
// axes back to shape, takes ownership of full, and returns a scratch
// tensor of shape.
func (g *Graph) sumTo(full *tensor.Tensor, shape tensor.Shape) *tensor.Tensor {
	cur := full
	fs := full.Shape()
	pad := len(fs) - len(shape)
	for i := range fs {
		want := 1
		if i >= pad {
			want = shape[i-pad]
		}
		if want != 1 || fs[i] == 1 {
			continue
		}
		outer, n, inner, _, reduced, _ := axisSplit(fs, i, true)
		next := g.scratchLike(cur, reduced...)
		g.dev.ReduceAxis(device.Sum, next.Buffer(), cur.Buffer(), outer, n, inner)
		cur.Release()
		cur, fs = next, reduced
	}
	if slices.Equal(cur.Shape(), shape) {
		return cur
	}
	moved, err := cur.MoveTo(shape...)
	if err != nil {
		panic(fmt.Sprintf("autograd: gradient %v to %v: %v", cur.Shape(), shape, err))
	}
	return moved
}

// unaryBackward accumulates the gradient of a unary op's input.
//
// funclen: one case per device.UnaryOp, a few lines each; issue 25's
// built-in ops as values, each carrying its own backward, replace the
// switch (splitting it now would only move it).
func (g *Graph) unaryBackward(n *node, gout *tensor.Tensor) {
	x, y := n.in[0], n.out
	var d *tensor.Tensor
	mulBy := func(f *tensor.Tensor) *tensor.Tensor {
		r := g.bop(device.Mul, gout, f)
		f.Release()
		return r
	}
	switch op := device.UnaryOp(n.ints[0]); op {
	case device.Neg:
		d = g.uop(device.Neg, gout)
	case device.Abs:
		d = mulBy(g.uop(device.Sign, x))
	case device.Exp:
		d = g.bop(device.Mul, gout, y)
	case device.Log:
		d = g.bop(device.Div, gout, x)
	case device.Sqrt: // dy / (2 y)
		two := g.bop(device.Add, y, y)
		d = g.bop(device.Div, gout, two)
		two.Release()
	case device.Rsqrt: // -dy y^3 / 2
		y3 := g.bop(device.Mul, y, y)
		g.binaryInto(device.Mul, y3, y3, y)
		c := g.konst(x, -0.5)
		g.binaryInto(device.Mul, y3, y3, c)
		c.Release()
		d = mulBy(y3)
	case device.Reciprocal: // -dy y^2
		y2 := g.uop(device.Square, y)
		g.dev.Unary(device.Neg, y2.Buffer(), y2.Buffer())
		d = mulBy(y2)
	case device.Tanh: // dy (1 - y^2)
		y2 := g.uop(device.Square, y)
		one := g.konst(x, 1)
		f := g.bop(device.Sub, one, y2)
		release(y2, one)
		d = mulBy(f)
	case device.Erf: // dy 2/sqrt(pi) exp(-x^2)
		f := g.uop(device.Square, x)
		g.dev.Unary(device.Neg, f.Buffer(), f.Buffer())
		g.dev.Unary(device.Exp, f.Buffer(), f.Buffer())
		c := g.konst(x, 2/math.Sqrt(math.Pi))
		g.binaryInto(device.Mul, f, f, c)
		c.Release()
		d = mulBy(f)
	case device.Sigmoid: // dy y (1 - y)
		one := g.konst(x, 1)
		f := g.bop(device.Sub, one, y)
		g.binaryInto(device.Mul, f, f, y)
		one.Release()
		d = mulBy(f)
	case device.Relu: // dy (x > 0)
		zero := g.konst(x, 0)
		f := g.bop(device.Gt, x, zero)
		zero.Release()
		d = mulBy(f)
	case device.Sin:
		d = mulBy(g.uop(device.Cos, x))
	case device.Cos:
		f := g.uop(device.Sin, x)
		g.dev.Unary(device.Neg, f.Buffer(), f.Buffer())
		d = mulBy(f)
	case device.Square: // 2 x dy
		f := g.bop(device.Add, x, x)
		d = mulBy(f)
	case device.Sign:
		d = g.scratchLike(x, x.Shape()...)
		g.dev.Fill(d.Buffer(), 0)
	case device.Log1p: // dy / (1 + x)
		one := g.konst(x, 1)
		f := g.bop(device.Add, x, one)
		one.Release()
		d = g.bop(device.Div, gout, f)
		f.Release()
	case device.Expm1: // dy (y + 1)
		one := g.konst(x, 1)
		f := g.bop(device.Add, y, one)
		one.Release()
		d = mulBy(f)
	default:
		panic(fmt.Sprintf("autograd: no backward for %v", op))
	}
	g.accumulate(x, d)
}

// broadcastBackward accumulates the gradients of a broadcasting binary
// op's inputs, reduced to their shapes.
//
// funclen: one case per device.BinaryOp, as unaryBackward; issue 25's ops
// as values replace the switch.
func (g *Graph) broadcastBackward(n *node, gout *tensor.Tensor) {
	a, b, out := n.in[0], n.in[1], n.out
	var da, db *tensor.Tensor // full-shape gradients, nil when not wanted
	wa, wb := a.RequiresGrad(), b.RequiresGrad()
	half := func(m1, m2 device.BinaryOp, x, y *tensor.Tensor) *tensor.Tensor {
		// (x m1 y + x m2 y) / 2 * gout: the tie-splitting mask.
		p, q := g.bop(m1, x, y), g.bop(m2, x, y)
		g.binaryInto(device.Add, p, p, q)
		c := g.konst(x, 0.5)
		g.binaryInto(device.Mul, p, p, c)
		release(q, c)
		r := g.bop(device.Mul, gout, p)
		p.Release()
		return r
	}
	switch op := device.BinaryOp(n.ints[0]); op {
	case device.Add, device.Sub:
		if wa {
			da = g.copyOf(gout)
		}
		if wb {
			db = g.copyOf(gout)
			if op == device.Sub {
				g.dev.Unary(device.Neg, db.Buffer(), db.Buffer())
			}
		}
	case device.Mul:
		if wa {
			da = g.bop(device.Mul, gout, b)
		}
		if wb {
			db = g.bop(device.Mul, gout, a)
		}
	case device.Div: // da = g / b, db = -g out / b
		if wa {
			da = g.bop(device.Div, gout, b)
		}
		if wb {
			db = g.bop(device.Mul, gout, out)
			g.dev.Unary(device.Neg, db.Buffer(), db.Buffer())
			t := g.bop(device.Div, db, b)
			db.Release()
			db = t
		}
	case device.Maximum:
		if wa {
			da = half(device.Gt, device.Ge, a, b)
		}
		if wb {
			db = half(device.Gt, device.Ge, b, a)
		}
	case device.Minimum:
		if wa {
			da = half(device.Lt, device.Le, a, b)
		}
		if wb {
			db = half(device.Lt, device.Le, b, a)
		}
	case device.Pow: // da = g b a^(b-1); db = g out log(a), 0 where a == 0
		if wa {
			one := g.konst(a, 1)
			bm1 := g.bop(device.Sub, b, one)
			p := g.bop(device.Pow, a, bm1)
			g.binaryInto(device.Mul, p, p, b)
			da = g.bop(device.Mul, gout, p)
			release(one, bm1, p)
		}
		if wb {
			l := g.uop(device.Log, a)
			f := g.bop(device.Mul, out, l)
			zero := g.konst(a, 0)
			isZero := g.bop(device.Eq, a, zero)
			safe := g.scratchLike(f, f.Shape()...)
			g.whereInto(safe, isZero, zero, f)
			db = g.bop(device.Mul, gout, safe)
			release(l, f, zero, isZero, safe)
		}
	default:
		panic(fmt.Sprintf("autograd: no backward for %v", op))
	}
	if da != nil {
		g.accumulate(a, g.sumTo(da, a.Shape()))
	}
	if db != nil {
		g.accumulate(b, g.sumTo(db, b.Shape()))
	}
}

// copyOf returns a scratch copy of t.
func (g *Graph) copyOf(t *tensor.Tensor) *tensor.Tensor {
	c := g.scratchLike(t, t.Shape()...)
	g.dev.Copy(c.Buffer(), t.Buffer())
	return c
}

func (g *Graph) whereBackward(n *node, gout *tensor.Tensor) {
	a, b, cond := n.in[0], n.in[1], n.saved[0]
	zero := g.konst(gout, 0)
	defer zero.Release()
	if a.RequiresGrad() {
		d := g.scratchLike(gout, gout.Shape()...)
		g.whereInto(d, cond, gout, zero)
		g.accumulate(a, g.sumTo(d, a.Shape()))
	}
	if b.RequiresGrad() {
		d := g.scratchLike(gout, gout.Shape()...)
		g.whereInto(d, cond, zero, gout)
		g.accumulate(b, g.sumTo(d, b.Shape()))
	}
}

// spread broadcasts a reduced [outer, 1, inner] tensor back to the
// [outer, n, inner] shape of x as a scratch tensor.
func (g *Graph) spread(r *tensor.Tensor, x *tensor.Tensor, outer, n, inner int) *tensor.Tensor {
	d := g.scratchLike(x, x.Shape()...)
	dims := device.DimsOf(outer, n, inner)
	src := device.View{Buf: r.Buffer(), Layout: device.Layout{Strides: [device.MaxDims]int{inner, 0, 1}}}
	g.dev.CopyStrided(dims, device.Contiguous(d.Buffer(), dims), src)
	return d
}

func (g *Graph) sumAxisBackward(n *node, gout *tensor.Tensor) {
	x := n.in[0]
	d := g.spread(gout, x, n.ints[0], n.ints[1], n.ints[2])
	if n.f64 != 1 {
		c := g.konst(x, n.f64)
		g.binaryInto(device.Mul, d, d, c)
		c.Release()
	}
	g.accumulate(x, d)
}

// maxAxisBackward sends the gradient to the elements equal to the
// reduction's result, split evenly among ties.
func (g *Graph) maxAxisBackward(n *node, gout *tensor.Tensor) {
	x := n.in[0]
	outer, m, inner := n.ints[0], n.ints[1], n.ints[2]
	best := g.spread(n.out, x, outer, m, inner)
	mask := g.bop(device.Eq, x, best)
	best.Release()
	count := g.scratchLike(x, outer, 1, inner)
	g.dev.ReduceAxis(device.Sum, count.Buffer(), mask.Buffer(), outer, m, inner)
	gs, _ := gout.Reshape(outer, 1, inner)
	share := g.bop(device.Div, gs, count)
	d := g.spread(share, x, outer, m, inner)
	g.binaryInto(device.Mul, d, d, mask)
	release(mask, count, share)
	g.accumulate(x, d)
}
