package autograd

import (
	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/tensor"
)

// The binary ops: Add, Sub, Mul (the backend's elementwise kernel for
// float32 operands of one shape), Div, Maximum, Minimum and Pow with NumPy
// broadcasting, the comparisons, and Where. A broadcast operand's
// gradient is summed back to its shape.

// Add returns a + b, broadcasting NumPy-style when the shapes differ.
func (g *Graph) Add(a, b *tensor.Tensor) *tensor.Tensor { return g.binary(device.Add, a, b) }

// Sub returns a - b, with broadcasting.
func (g *Graph) Sub(a, b *tensor.Tensor) *tensor.Tensor { return g.binary(device.Sub, a, b) }

// Mul returns a * b elementwise, with broadcasting.
func (g *Graph) Mul(a, b *tensor.Tensor) *tensor.Tensor { return g.binary(device.Mul, a, b) }

// binary is Add, Sub and Mul: float32 operands of one shape take the
// backend's elementwise kernel, others the broadcasting op.
func (g *Graph) binary(op device.BinaryOp, a, b *tensor.Tensor) *tensor.Tensor {
	if !g.ok(binaryNames[op], a, b) {
		return nil
	}
	if !a.SameShape(b) || a.DType() != device.Float32 || b.DType() != device.Float32 {
		return g.broadcast(op, a, b)
	}
	out := g.allocOf(binaryNames[op], device.Float32, a.Shape()...)
	if out == nil {
		return nil
	}
	dims := device.DimsOf(out.Len())
	g.dev.BinaryStrided(op, dims, out.Buffer(), device.Contiguous(a.Buffer(), dims), device.Contiguous(b.Buffer(), dims))
	return g.recorded(node{op: binaryOp(op), out: out, in: [3]*tensor.Tensor{a, b}})
}

// binaryNames names the binary ops in errors.
var binaryNames = [...]string{device.Add: "Add", device.Sub: "Sub", device.Mul: "Mul", device.Div: "Div",
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
	name := binaryNames[op]
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
	dims := device.DimsOf(out.Shape()...)
	cv, _ := device.Broadcast(cond.Buffer(), cond.Shape(), dims)
	av, _ := device.Broadcast(a.Buffer(), a.Shape(), dims)
	bv, _ := device.Broadcast(b.Buffer(), b.Shape(), dims)
	g.dev.Where(dims, out.Buffer(), cv, av, bv)
	if isFloat(a) && g.wantsGrad(a, b) {
		g.record(node{op: whereOp{}, out: out, in: [3]*tensor.Tensor{a, b}, saved: [3]*tensor.Tensor{cond}})
	}
	return out
}

// sumTo sums d, the gradient of a broadcast result, over the axes that
// broadcasting added or stretched, back to x's shape. Adjacent such axes
// are summed as one (a bias's gradient over [B, T, d] is one sum of B T
// rows, not a sum over B and then over T).
func (g *Graph) sumTo(d, x *tensor.Tensor) *tensor.Tensor {
	if d == nil || d.SameShape(x) {
		return d
	}
	shape, ds := x.Shape(), d.Shape()
	pad := len(ds) - len(shape)
	var merged []int
	var summed []bool
	for i, n := range ds {
		sum := n != 1 && (i < pad || shape[i-pad] == 1)
		if k := len(merged) - 1; k >= 0 && sum && summed[k] {
			merged[k] *= n
			continue
		}
		merged, summed = append(merged, n), append(summed, sum)
	}
	if len(merged) < len(ds) {
		d = g.Reshape(d, merged...)
	}
	for i, sum := range summed {
		if sum {
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

func (o binaryOp) name() string      { return binaryNames[o] }
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
