package autograd

import (
	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/compose"
	"github.com/hilbert-ml/hilbert/tensor"
)

// Add returns a + b, broadcasting NumPy-style when the shapes differ.
func (g *Graph) Add(a, b *tensor.Tensor) *tensor.Tensor { return g.binary("Add", device.Add, a, b) }

// Sub returns a - b, with broadcasting.
func (g *Graph) Sub(a, b *tensor.Tensor) *tensor.Tensor { return g.binary("Sub", device.Sub, a, b) }

// Mul returns a * b elementwise, with broadcasting.
func (g *Graph) Mul(a, b *tensor.Tensor) *tensor.Tensor { return g.binary("Mul", device.Mul, a, b) }

func (g *Graph) binary(op string, kind device.BinaryOp, a, b *tensor.Tensor) *tensor.Tensor {
	if !g.ok(op, a, b) {
		return nil
	}
	if !a.SameShape(b) || a.DType() != device.Float32 || b.DType() != device.Float32 {
		// Broadcasting, or float64: the core's strided op.
		return g.broadcast(kind, a, b)
	}
	out := g.alloc(op, a.Shape()...)
	if out == nil {
		return nil
	}
	compose.Binary(g.dev, kind, out.Buffer(), a.Buffer(), b.Buffer())
	if g.wantsGrad(a, b) {
		g.record(node{op: binaryOp(kind), out: out, in: [3]*tensor.Tensor{a, b}})
	}
	return out
}

// Scale returns alpha * x, with alpha rounded once to x's dtype: a
// float64 tensor takes it exactly, a float32 one as float32(alpha).
func (g *Graph) Scale(x *tensor.Tensor, alpha float64) *tensor.Tensor {
	const op = "Scale"
	if !g.ok(op, x) {
		return nil
	}
	if x.DType() != device.Float32 {
		return g.broadcast(device.Mul, x, g.Constant(alpha, x.DType()))
	}
	out := g.alloc(op, x.Shape()...)
	if out == nil {
		return nil
	}
	a := float32(alpha)
	compose.Scale(g.dev, out.Buffer(), x.Buffer(), a)
	if g.wantsGrad(x) {
		g.record(node{op: scaleOp{}, out: out, in: [3]*tensor.Tensor{x}, f64: float64(a)})
	}
	return out
}

// scaleInto computes dst = alpha * src (same length) in dst's dtype: the
// backend's float32 kernel with alpha rounded to float32, or for another
// float dtype the Core's product with alpha exact in that dtype.
func (g *Graph) scaleInto(dst, src device.Buffer, alpha float64) {
	if dst.DType() == device.Float32 {
		compose.Scale(g.dev, dst, src, float32(alpha))
		return
	}
	c := g.scratchOf(dst.DType())
	vals := [1]float64{alpha}
	g.dev.CopyFloat64FromHost(c.Buffer(), vals[:])
	dims := device.DimsOf(dst.Len())
	g.dev.BinaryStrided(device.Mul, dims, dst, device.Contiguous(src, dims), device.View{Buf: c.Buffer()})
	c.Release()
}

// scaleOp is a recorded float32 Scale by f64 (a float32 number).
type scaleOp struct{}

func (scaleOp) name() string      { return "Scale" }
func (scaleOp) reads(*node) slots { return 0 }
func (scaleOp) backward(g *Graph, n *node, dy *tensor.Tensor) {
	g.give(n.in[0], g.Scale(dy, n.f64))
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
	if g.wantsGrad(x) {
		g.record(node{op: sumOp{}, out: out, in: [3]*tensor.Tensor{x}, f64: scale})
	}
	return out
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
