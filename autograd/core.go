package autograd

import (
	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/compose"
	"github.com/hilbert-ml/hilbert/tensor"
)

// The differentiable ops over the device's core primitives (unary.go,
// binary.go, reduce.go, movement.go, indexing.go) take float32 tensors,
// and float64 ones on a backend that has them (the CPU), which is what
// GradCheck uses. Their backward passes are written in the same Graph ops.
// This file holds what they share: Constant, Scale and the scratch
// tensors of the buffer-level backward passes.

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

// Backward passes at buffer level (the fused ops, MatMul) take pooled
// scratch tensors and hand them to accumulate.

// scratchLike returns a pooled tensor of t's dtype and the given shape,
// released by the caller.
func (g *Graph) scratchLike(t *tensor.Tensor, shape ...int) *tensor.Tensor {
	return g.scratchOf(t.DType(), shape...)
}

// konst returns a scalar scratch tensor of dtype dt holding v.
func (g *Graph) konst(dt device.DType, v float64) *tensor.Tensor {
	c := g.scratchOf(dt)
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

// zerosLike returns zeros of t's dtype and shape.
func (g *Graph) zerosLike(t *tensor.Tensor) *tensor.Tensor {
	return g.BroadcastTo(g.Constant(0, t.DType()), t.Shape()...)
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
	out := g.allocOf(op, device.Float32, x.Shape()...)
	if out == nil {
		return nil
	}
	a := float32(alpha)
	compose.Scale(g.dev, out.Buffer(), x.Buffer(), a)
	return g.recorded(node{op: scaleOp{}, out: out, in: [3]*tensor.Tensor{x}, f64: float64(a)})
}

// scaleInto computes dst = alpha * src (same length) in dst's dtype: the
// backend's float32 kernel with alpha rounded to float32, or for another
// float dtype the Core's product with alpha exact in that dtype.
func (g *Graph) scaleInto(dst, src device.Buffer, alpha float64) {
	if dst.DType() == device.Float32 {
		compose.Scale(g.dev, dst, src, float32(alpha))
		return
	}
	c := g.konst(dst.DType(), alpha)
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
