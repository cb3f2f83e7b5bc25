package autograd

import (
	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/compose"
	"github.com/hilbert-ml/hilbert/tensor"
)

// matDims holds the sizes of one (possibly batched) product.
type matDims struct {
	m, n, k, batch int
	// rows/cols of the stored A and B matrices
	aRows, aCols, bRows, bCols int
}

// MatMul returns op(a) x op(b), where op transposes the last two axes when
// the matching flag is set. a and b are both float32 or both float64 (on
// a backend with float64 products, the CPU); under autocast, float32
// products take low-precision operands.
//
// Shapes: a [..., m, k] with b [k, n] (the leading axes of a are folded
// into m; transA must be false), or a [batch..., m, k] with b
// [batch..., k, n] (same leading axes: a batched product). A Linear layer
// with weight W [out, in] is MatMul(x, W, false, true).
func (g *Graph) MatMul(a, b *tensor.Tensor, transA, transB bool) *tensor.Tensor {
	const op = "MatMul"
	if !g.ok(op, a, b) {
		return nil
	}
	if !isFloat(a) || a.DType() != b.DType() {
		return g.failf("%s: dtypes %v and %v (want both float32 or both float64)", op, a.DType(), b.DType())
	}
	if a.Rank() < 2 || b.Rank() < 2 {
		return g.failf("%s: shapes %v and %v: both operands need rank >= 2", op, a.Shape(), b.Shape())
	}
	d, outShape, ok := matMulDims(a, b, transA, transB)
	if !ok {
		return g.failf("%s: shapes %v%s and %v%s do not multiply", op, a.Shape(), tflag(transA), b.Shape(), tflag(transB))
	}
	out := g.allocOf(op, a.DType(), outShape...)
	if out == nil {
		return nil
	}
	n := node{op: matMulOp{}, out: out, in: [3]*tensor.Tensor{a, b}, flags: [2]bool{transA, transB}}
	abuf, bbuf := a.Buffer(), b.Buffer()
	// Autocast lowers float32 products only; float64 ones stay float64.
	if g.autocast != 0 && a.DType() == device.Float32 {
		a16, b16 := g.castCopy(op, a, g.autocast), g.castCopy(op, b, g.autocast)
		if a16 == nil || b16 == nil {
			return nil
		}
		abuf, bbuf = a16.Buffer(), b16.Buffer()
		n.lowp, n.saved = true, [3]*tensor.Tensor{a16, b16}
	}
	g.gemm(d, transA, transB, 1, abuf, bbuf, 0, out.Buffer())
	return g.recorded(n)
}

func tflag(t bool) string {
	if t {
		return "^T"
	}
	return ""
}

// matMulDims works out the product's sizes and output shape.
func matMulDims(a, b *tensor.Tensor, transA, transB bool) (matDims, []int, bool) {
	as, bs := a.Shape(), b.Shape()
	var d matDims
	d.bRows, d.bCols = bs[len(bs)-2], bs[len(bs)-1]
	var lead []int
	if b.Rank() == 2 {
		if transA && a.Rank() > 2 {
			return d, nil, false
		}
		d.batch = 1
		d.aCols = as[len(as)-1]
		d.aRows = a.Len() / max(d.aCols, 1)
		if d.aCols == 0 {
			d.aRows = tensor.Shape(as[:len(as)-1]).Numel()
		}
		lead = as[:len(as)-1]
	} else {
		if a.Rank() != b.Rank() {
			return d, nil, false
		}
		for i := 0; i < len(as)-2; i++ {
			if as[i] != bs[i] {
				return d, nil, false
			}
		}
		d.batch = tensor.Shape(as[:len(as)-2]).Numel()
		d.aRows, d.aCols = as[len(as)-2], as[len(as)-1]
		lead = as[:len(as)-1]
	}
	d.m, d.k = d.aRows, d.aCols
	if transA {
		d.m, d.k = d.aCols, d.aRows
	}
	kb, n := d.bRows, d.bCols
	if transB {
		kb, n = d.bCols, d.bRows
	}
	if kb != d.k {
		return d, nil, false
	}
	d.n = n
	out := append([]int(nil), lead...)
	if transA {
		out[len(out)-1] = d.m
	}
	out = append(out, n)
	return d, out, true
}

// gemm runs C = alpha*op(A)op(B) + beta*C for the dims d.
func (g *Graph) gemm(d matDims, transA, transB bool, alpha float32, a, b device.Buffer, beta float32, c device.Buffer) {
	sb := d.bRows * d.bCols
	if d.batch == 1 {
		sb = 0
	}
	g.dev.Gemm(device.GemmArgs{
		TransA: transA, TransB: transB, M: d.m, N: d.n, K: d.k, Alpha: alpha, Beta: beta,
		A: a, LDA: d.aCols, StrideA: d.aRows * d.aCols,
		B: b, LDB: d.bCols, StrideB: sb,
		C: c, LDC: d.n, StrideC: d.m * d.n,
		Batch: d.batch,
	})
}

// matMulOp is a recorded MatMul; flags are the transposes. Its backward is
// two GEMMs straight on the buffers: in Graph ops each would need the
// transposed product's shapes worked out again and, under autocast, the
// saved low-precision operands, and the product is where a step's time
// goes.
type matMulOp struct{}

func (matMulOp) name() string { return "MatMul" }

// reads is both operands, or none under autocast (the products read the
// saved low-precision copies).
func (matMulOp) reads(n *node) slots {
	if n.lowp {
		return 0
	}
	return in0 | in1
}

func (matMulOp) backward(g *Graph, n *node, gout *tensor.Tensor) {
	a, b := n.in[0], n.in[1]
	transA, transB := n.flags[0], n.flags[1]
	d, _, _ := matMulDims(a, b, transA, transB)
	abuf, bbuf, gbuf := a.Buffer(), b.Buffer(), gout.Buffer()
	if n.lowp {
		// Under autocast the backward products also take low-precision
		// operands: the saved casts and a cast of the incoming gradient.
		g16 := g.scratchOf(n.saved[0].DType(), gout.Shape()...)
		defer g16.Release()
		g.dev.Cast(g16.Buffer(), gbuf)
		abuf, bbuf, gbuf = n.saved[0].Buffer(), n.saved[1].Buffer(), g16.Buffer()
	}
	// dC has dims m x n; A is stored aRows x aCols; B bRows x bCols.
	if a.RequiresGrad() {
		da := g.scratchLike(a, a.Shape()...)
		// dA (stored layout) = dC op(B)^T, or its transpose when transA.
		var dd matDims
		if !transA {
			dd = matDims{m: d.m, n: d.k, k: d.n, batch: d.batch, aRows: d.m, aCols: d.n, bRows: d.bRows, bCols: d.bCols}
			g.gemmStrided(dd, false, !transB, gbuf, bbuf, da.Buffer(), d.batch > 1)
		} else {
			dd = matDims{m: d.k, n: d.m, k: d.n, batch: d.batch, aRows: d.bRows, aCols: d.bCols, bRows: d.m, bCols: d.n}
			g.gemmStrided(dd, transB, true, bbuf, gbuf, da.Buffer(), d.batch > 1)
		}
		g.accumulate(a, da)
	}
	if b.RequiresGrad() {
		db := g.scratchLike(b, b.Shape()...)
		if !transB {
			// dB = op(A)^T dC : k x n
			dd := matDims{m: d.k, n: d.n, k: d.m, batch: d.batch, aRows: d.aRows, aCols: d.aCols, bRows: d.m, bCols: d.n}
			g.gemmStrided(dd, !transA, false, abuf, gbuf, db.Buffer(), d.batch > 1)
		} else {
			// dB = dC^T op(A) : n x k
			dd := matDims{m: d.n, n: d.k, k: d.m, batch: d.batch, aRows: d.m, aCols: d.n, bRows: d.aRows, bCols: d.aCols}
			g.gemmStrided(dd, true, transA, gbuf, abuf, db.Buffer(), d.batch > 1)
		}
		g.accumulate(b, db)
	}
}

// gemmStrided runs a (possibly batched) product where both operands and
// the output are batched when batched is set.
func (g *Graph) gemmStrided(d matDims, transA, transB bool, a, b, c device.Buffer, batched bool) {
	sa, sb := d.aRows*d.aCols, d.bRows*d.bCols
	if !batched {
		sa, sb = 0, 0
	}
	g.dev.Gemm(device.GemmArgs{
		TransA: transA, TransB: transB, M: d.m, N: d.n, K: d.k, Alpha: 1, Beta: 0,
		A: a, LDA: d.aCols, StrideA: sa,
		B: b, LDB: d.bCols, StrideB: sb,
		C: c, LDC: d.n, StrideC: d.m * d.n,
		Batch: d.batch,
	})
}

// Reshape returns a view of x with a new shape (one dimension may be -1).
func (g *Graph) Reshape(x *tensor.Tensor, shape ...int) *tensor.Tensor {
	const op = "Reshape"
	if !g.ok(op, x) {
		return nil
	}
	out, err := x.Reshape(shape...)
	if err != nil {
		return g.failf("%s: %v", op, err)
	}
	return g.recorded(node{op: reshapeOp{}, out: out, in: [3]*tensor.Tensor{x}})
}

// reshapeOp is a recorded Reshape. Its backward hands gout's buffer on,
// reshaped, without a copy (MoveTo): the one rule that moves rather than
// computes.
type reshapeOp struct{}

func (reshapeOp) name() string      { return "Reshape" }
func (reshapeOp) reads(*node) slots { return 0 }
func (reshapeOp) backward(g *Graph, n *node, gout *tensor.Tensor) {
	moved, err := gout.MoveTo(n.in[0].Shape()...)
	if err != nil {
		panic(err)
	}
	g.accumulate(n.in[0], moved)
}

// Transpose swaps the two axes before the last of a rank-4 tensor
// ([B, T, H, D] -> [B, H, T, D], splitting heads), the two axes of a
// matrix, or the last two axes of a rank-3 tensor. It copies.
func (g *Graph) Transpose(x *tensor.Tensor) *tensor.Tensor {
	const op = "Transpose"
	if !g.ok(op, x) {
		return nil
	}
	b, r, c, in, out, ok := transposeDims(x.Shape())
	if !ok {
		return g.failf("%s: shape %v: want rank 2, 3 or 4", op, x.Shape())
	}
	y := g.allocOf(op, x.DType(), out...)
	if y == nil {
		return nil
	}
	g.transposeInto(y, x, b, r, c, in)
	return g.recorded(node{op: transposeOp{}, out: y, in: [3]*tensor.Tensor{x}})
}

// transposeDims maps a shape onto the Transpose kernel's
// [batch, rows, cols, inner] and returns the output shape.
func transposeDims(s tensor.Shape) (batch, rows, cols, inner int, out []int, ok bool) {
	switch len(s) {
	case 2:
		return 1, s[0], s[1], 1, []int{s[1], s[0]}, true
	case 3:
		return s[0], s[1], s[2], 1, []int{s[0], s[2], s[1]}, true
	case 4:
		return s[0], s[1], s[2], s[3], []int{s[0], s[2], s[1], s[3]}, true
	}
	return 0, 0, 0, 0, nil, false
}

// transposeOp is a recorded Transpose, its own inverse.
type transposeOp struct{}

func (transposeOp) name() string      { return "Transpose" }
func (transposeOp) reads(*node) slots { return 0 }
func (transposeOp) backward(g *Graph, n *node, dy *tensor.Tensor) {
	g.give(n.in[0], g.Transpose(dy))
}

// transposeInto swaps the middle axes of src viewed as [b, r, c, in]:
// the float32 Transpose kernel, or the core's strided copy for other
// dtypes.
func (g *Graph) transposeInto(dst, src *tensor.Tensor, b, r, c, in int) {
	if src.DType() == device.Float32 {
		compose.Transpose(g.dev, dst.Buffer(), src.Buffer(), b, r, c, in)
		return
	}
	dims := device.DimsOf(b, c, r, in)
	sv := device.View{Buf: src.Buffer(), Layout: device.Layout{Strides: [device.MaxDims]int{r * c * in, in, c * in, 1}}}
	g.dev.CopyStrided(dims, device.Contiguous(dst.Buffer(), dims), sv)
}
