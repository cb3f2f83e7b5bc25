package autograd

import (
	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/compose"
	"github.com/hilbert-ml/hilbert/tensor"
)

var binaryKinds = map[device.BinaryOp]opKind{device.Add: opAdd, device.Sub: opSub, device.Mul: opMul}

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
		g.record(node{op: binaryKinds[kind], out: out, in: [3]*tensor.Tensor{a, b}})
	}
	return out
}

func (g *Graph) binaryBackward(n *node, gout *tensor.Tensor) {
	a, b := n.in[0], n.in[1]
	grad := func(t, other *tensor.Tensor, sign float32) {
		if !t.RequiresGrad() {
			return
		}
		d := g.scratch(t.Shape()...)
		if n.op == opMul {
			compose.Binary(g.dev, device.Mul, d.Buffer(), gout.Buffer(), other.Buffer())
		} else {
			compose.Scale(g.dev, d.Buffer(), gout.Buffer(), sign)
		}
		g.accumulate(t, d)
	}
	sign := float32(1)
	if n.op == opSub {
		sign = -1
	}
	grad(a, b, 1)
	grad(b, a, sign)
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
		g.record(node{op: opScale, out: out, in: [3]*tensor.Tensor{x}, f: a})
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

func (g *Graph) scaleBackward(n *node, gout *tensor.Tensor) {
	d := g.scratch(n.in[0].Shape()...)
	compose.Scale(g.dev, d.Buffer(), gout.Buffer(), n.f)
	g.accumulate(n.in[0], d)
}

// Sum returns the sum of all elements of x as a scalar (shape []).
func (g *Graph) Sum(x *tensor.Tensor) *tensor.Tensor { return g.sum("Sum", x, 1) }

// Mean returns the mean of all elements of x as a scalar (shape []).
func (g *Graph) Mean(x *tensor.Tensor) *tensor.Tensor {
	if x == nil {
		return g.sum("Mean", x, 1)
	}
	return g.sum("Mean", x, 1/float32(max(x.Len(), 1)))
}

func (g *Graph) sum(op string, x *tensor.Tensor, scale float32) *tensor.Tensor {
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
		if scale != 1 {
			compose.Scale(g.dev, out.Buffer(), out.Buffer(), scale)
		}
	} else {
		g.dev.ReduceAxis(device.Sum, out.Buffer(), x.Buffer(), 1, x.Len(), 1)
		if scale != 1 {
			g.binaryInto(device.Mul, out, out, g.Constant(1/float64(x.Len()), x.DType()))
		}
	}
	if g.wantsGrad(x) {
		g.record(node{op: opSum, out: out, in: [3]*tensor.Tensor{x}, f: scale})
	}
	return out
}

func (g *Graph) sumBackward(n *node, gout *tensor.Tensor) {
	x := n.in[0]
	if x.DType() != device.Float32 {
		d := g.spread(gout, x, 1, x.Len(), 1)
		if n.f != 1 {
			c := g.konst(x, 1/float64(x.Len()))
			g.binaryInto(device.Mul, d, d, c)
			c.Release()
		}
		g.accumulate(x, d)
		return
	}
	d := g.scratch(x.Shape()...)
	compose.FillFrom(g.dev, d.Buffer(), gout.Buffer(), n.f)
	g.accumulate(x, d)
}
