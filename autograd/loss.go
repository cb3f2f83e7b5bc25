package autograd

import (
	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/compose"
	"github.com/hilbert-ml/hilbert/tensor"
)

// CrossEntropy returns the mean over rows of the cross-entropy between
// softmax(logits) and int32 targets, straight from logits [N, V] via
// log-sum-exp (no one-hot, no stored softmax).
func (g *Graph) CrossEntropy(logits, targets *tensor.Tensor) *tensor.Tensor {
	const op = "CrossEntropy"
	if !g.ok(op, logits, targets) {
		return nil
	}
	if logits.Rank() != 2 || !isFloat(logits) {
		return g.failf("%s: logits %v %v: want float32 or float64 [rows, vocab]", op, logits.DType(), logits.Shape())
	}
	rows, vocab := logits.Dim(0), logits.Dim(1)
	if targets.Len() != rows || rows == 0 {
		return g.failf("%s: %d targets %v for logits %v", op, targets.Len(), targets.Shape(), logits.Shape())
	}
	if !g.checkIDs(op, "targets", targets, vocab) {
		return nil
	}
	dt := logits.DType()
	losses := g.allocOf(op, dt, rows)
	lse := g.allocOf(op, dt, rows)
	out := g.allocOf(op, dt)
	if losses == nil || lse == nil || out == nil {
		return nil
	}
	k := g.kernels(dt)
	compose.CrossEntropy(k, losses.Buffer(), lse.Buffer(), logits.Buffer(), targets.Buffer(), rows, vocab)
	compose.Reduce(k, device.Sum, 1, out.Buffer(), losses.Buffer(), 1, rows)
	g.scaleInto(out.Buffer(), out.Buffer(), reciprocal(dt, rows))
	return g.recorded(node{op: crossEntropyOp{}, out: out, in: [3]*tensor.Tensor{logits}, saved: [3]*tensor.Tensor{targets, lse, losses}})
}

// crossEntropyOp is a recorded CrossEntropy (saved: targets, log-sum-exp
// rows, per-row losses). Its backward is the fused softmax-minus-one-hot
// from the saved log-sum-exp, one pass over the logits without a stored
// softmax.
type crossEntropyOp struct{}

func (crossEntropyOp) name() string      { return "CrossEntropy" }
func (crossEntropyOp) reads(*node) slots { return in0 | saved0 }
func (crossEntropyOp) backward(g *Graph, n *node, gout *tensor.Tensor) {
	logits, targets, lse, dloss := n.in[0], n.saved[0], n.saved[1], n.saved[2]
	rows, vocab := logits.Dim(0), logits.Dim(1)
	// The per-row losses are no longer needed: reuse them for dloss/drow.
	k := g.kernels(logits.DType())
	if logits.DType() == device.Float32 {
		compose.FillFrom(k, dloss.Buffer(), gout.Buffer(), 1/float32(rows))
	} else { // dloss = gout / rows, the reciprocal exact in the dtype
		dims := device.DimsOf(rows)
		k.CopyStrided(dims, device.Contiguous(dloss.Buffer(), dims), device.View{Buf: gout.Buffer()})
		g.scaleInto(dloss.Buffer(), dloss.Buffer(), 1/float64(rows))
	}
	d := g.scratchLike(logits, logits.Shape()...)
	compose.CrossEntropyBackward(k, d.Buffer(), dloss.Buffer(), logits.Buffer(), lse.Buffer(), targets.Buffer(), rows, vocab)
	g.accumulate(logits, d)
}

// reciprocal returns 1/n as the mean's factor in dtype dt: 1/float32(n)
// for float32 (the paper's kernels' value, kept bit for bit), exactly 1/n
// rounded once for float64.
func reciprocal(dt device.DType, n int) float64 {
	if dt == device.Float32 {
		return float64(1 / float32(n))
	}
	return 1 / float64(n)
}

// linearCEBlockElems bounds the logits block of LinearCrossEntropy (256 MB
// of float32): large enough that the three products per block run near
// OpenBLAS's speed for a 128-wide model, small enough to stay bounded.
const linearCEBlockElems = 1 << 26

// LinearCrossEntropy returns the mean cross-entropy of the logits
// h W^T against int32 targets, for hidden states h [N, d] (or [..., d])
// and an LM head W [V, d] (both float32, or both float64 on a backend with
// float64 products), without ever holding more than a block of rows
// of the N x V logits: rows are processed in blocks of blockRows (0 picks
// equal blocks of at most 64M logits). When gradients are wanted, the
// forward pass computes them block by block (dh, and dW accumulated
// straight in its own layout, dlogits^T h) and Backward scales them by
// the upstream gradient.
func (g *Graph) LinearCrossEntropy(h, w, targets *tensor.Tensor, blockRows int) *tensor.Tensor {
	const op = "LinearCrossEntropy"
	if !g.checkLinearCE(op, h, w, targets) {
		return nil
	}
	// Float32 runs on the backend (its fused cross-entropy when it has
	// one); float64 on the core's compositions, with float64 products.
	dt := h.DType()
	k := g.kernels(dt)
	vocab, d := w.Dim(0), w.Dim(1)
	rows := h.Len() / max(d, 1)
	blockRows = linearCEBlockRows(blockRows, rows, vocab)
	grad := g.wantsGrad(h, w)

	losses := g.allocOf(op, dt, rows)
	lse := g.allocOf(op, dt, rows)
	out := g.allocOf(op, dt)
	if losses == nil || lse == nil || out == nil {
		return nil
	}
	var dh, dw *tensor.Tensor
	if grad {
		dh, dw = g.allocOf(op, dt, h.Shape()...), g.allocOf(op, dt, w.Shape()...)
		if dh == nil || dw == nil {
			return nil
		}
	}
	logits := g.scratchOf(dt, blockRows, vocab)
	defer logits.Release()

	hb, wb, tb := h.Buffer(), w.Buffer(), targets.Buffer()
	for r0 := 0; r0 < rows; r0 += blockRows {
		nr := min(blockRows, rows-r0)
		lb := logits.Buffer().Slice(0, nr*vocab)
		hblk := hb.Slice(r0*d, nr*d)
		// logits = h_blk W^T
		g.dev.Gemm(device.GemmArgs{TransB: true, M: nr, N: vocab, K: d, Alpha: 1,
			A: hblk, LDA: d, B: wb, LDB: d, C: lb, LDC: vocab})
		tblk := tb.Slice(r0, nr)
		if !grad {
			compose.CrossEntropy(k, losses.Buffer().Slice(r0, nr), lse.Buffer().Slice(r0, nr), lb, tblk, nr, vocab)
			continue
		}
		// Loss, and dlogits for a unit upstream gradient per row, in place.
		compose.CrossEntropyWithGrad(k, losses.Buffer().Slice(r0, nr), lse.Buffer().Slice(r0, nr), lb, tblk, nr, vocab, 1)
		// dh_blk = dlogits W
		g.dev.Gemm(device.GemmArgs{M: nr, N: d, K: vocab, Alpha: 1,
			A: lb, LDA: vocab, B: wb, LDB: d, C: dh.Buffer().Slice(r0*d, nr*d), LDC: d})
		beta := float32(1)
		if r0 == 0 {
			beta = 0
		}
		// dW (+)= dlogits^T h_blk: each element sums over the block's
		// rows in order, as h_blk^T dlogits (dW^T, transposed after) did,
		// without the transpose's pass over the head.
		g.dev.Gemm(device.GemmArgs{TransA: true, M: vocab, N: d, K: nr, Alpha: 1, Beta: beta,
			A: lb, LDA: vocab, B: hblk, LDB: d, C: dw.Buffer(), LDC: d})
	}
	compose.Reduce(k, device.Sum, 1, out.Buffer(), losses.Buffer(), 1, rows)
	g.scaleInto(out.Buffer(), out.Buffer(), reciprocal(dt, rows))
	return g.recorded(node{op: linearCrossEntropyOp{}, out: out, in: [3]*tensor.Tensor{h, w}, saved: [3]*tensor.Tensor{dh, dw}, ints: [4]int{rows}})
}

// checkLinearCE checks LinearCrossEntropy's operands: shapes, one float
// dtype, a target in [0, vocab) per row of h.
func (g *Graph) checkLinearCE(op string, h, w, targets *tensor.Tensor) bool {
	if !g.ok(op, h, w, targets) {
		return false
	}
	if w.Rank() != 2 || h.Rank() < 1 || h.Dim(-1) != w.Dim(1) {
		g.failf("%s: hidden %v and head %v: want [..., d] and [vocab, d]", op, h.Shape(), w.Shape())
		return false
	}
	if !isFloat(h) || w.DType() != h.DType() {
		g.failf("%s: hidden %v and head %v: want one float dtype (float32 or float64)", op, h.DType(), w.DType())
		return false
	}
	rows := h.Len() / max(w.Dim(1), 1)
	if targets.Len() != rows || rows == 0 {
		g.failf("%s: %d targets %v for %d rows of hidden %v", op, targets.Len(), targets.Shape(), rows, h.Shape())
		return false
	}
	return g.checkIDs(op, "targets", targets, w.Dim(0))
}

// linearCEBlockRows is the rows of logits one block holds: blockRows, or
// for 0 equal blocks, the fewest that keep a block within
// linearCEBlockElems logits; at most rows.
func linearCEBlockRows(blockRows, rows, vocab int) int {
	if blockRows <= 0 {
		most := max(1, linearCEBlockElems/max(vocab, 1))
		blocks := (rows + most - 1) / most
		blockRows = (rows + blocks - 1) / blocks
	}
	return min(blockRows, rows)
}

// linearCrossEntropyOp is a recorded LinearCrossEntropy: the forward
// computed the gradients for a unit upstream gradient (saved dh, dw;
// ints[0] the rows), so the backward only scales them, straight into a
// float32 parameter's gradient (one Axpby, no temporary of the head's
// size).
type linearCrossEntropyOp struct{}

func (linearCrossEntropyOp) name() string      { return "LinearCrossEntropy" }
func (linearCrossEntropyOp) reads(*node) slots { return 0 }
func (linearCrossEntropyOp) backward(g *Graph, n *node, gout *tensor.Tensor) {
	h, w, dh, dw := n.in[0], n.in[1], n.saved[0], n.saved[1]
	if h.DType() != device.Float32 {
		// The upstream gradient stays on the device in its dtype: each
		// gradient is d * gout (broadcast) scaled by the forward's 1/rows.
		k := g.kernels(h.DType())
		for _, p := range [2][2]*tensor.Tensor{{h, dh}, {w, dw}} {
			t, d := p[0], p[1]
			if !t.RequiresGrad() {
				continue
			}
			sd := g.scratchLike(t, t.Shape()...)
			dims := device.DimsOf(d.Len())
			k.BinaryStrided(device.Mul, dims, sd.Buffer(), device.Contiguous(d.Buffer(), dims), device.View{Buf: gout.Buffer()})
			g.scaleInto(sd.Buffer(), sd.Buffer(), 1/float64(n.ints[0]))
			g.accumulate(t, sd)
		}
		return
	}
	scale := gout.Item() / float32(n.ints[0])
	for _, p := range [2][2]*tensor.Tensor{{h, dh}, {w, dw}} {
		t, d := p[0], p[1]
		if !t.RequiresGrad() {
			continue
		}
		if t.IsLeaf() {
			if cur, overwrite := t.GradToOverwrite(); cur != nil {
				if overwrite { // the step's first gradient: scale d into it
					compose.Scale(g.dev, cur.Buffer(), d.Buffer(), scale)
				} else {
					compose.Axpby(g.dev, cur.Buffer(), d.Buffer(), scale, 1)
				}
				continue
			}
		}
		sd := g.scratchLike(t, t.Shape()...)
		compose.Scale(g.dev, sd.Buffer(), d.Buffer(), scale)
		g.accumulate(t, sd)
	}
}
