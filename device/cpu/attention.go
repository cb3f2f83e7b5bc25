package cpu

import (
	"math"

	"github.com/hilbert-ml/hilbert/device"
)

// Attention on the CPU runs the (batch, head) pairs concurrently, one pair
// per worker at a time, each with single-threaded GEMMs straight from the
// [Batch, Seq, Heads, HeadDim] layout (row pitch Heads*HeadDim). Within a
// pair, queries go in blocks of attnBlock rows and a block only meets the
// keys the causal mask lets it see, so the products do about half the
// work of full Seq x Seq ones (5/8 of it at Seq 256). Memory beyond the
// inputs is two Seq x Seq scratch matrices per worker, recycled across calls.
//
// The products run on the native GEMM's micro-kernel, one worker per call
// (attnGemm), whatever GEMM Sgemm uses: OpenBLAS's OpenMP build returns
// wrong results now and then when two threads call it at once, and
// threading within a product does not pay on products this small.

// attnBlock is the query rows of one block.
const attnBlock = 64

// attnWorker is one worker's two Seq x Seq scratch matrices.
type attnWorker struct {
	p, dp []float32
}

// attnGemm is C = alpha op(A) op(B) + beta C (as Sgemm) on the native GEMM
// with one worker.
func attnGemm(tA, tB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	sgemmWith(gemmNative, 1, tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// attnWorkers recycles workers across calls, so that a warm step does not
// allocate.
var attnWorkers = newFreeList[attnWorker](2 * nativeMaxHelpers)

// forEachPair calls body(w, bh) for every pair bh in [0, pairs), the pairs
// split over Threads() workers, each with its own attnWorker w (scratch of
// Seq x Seq). A pair is computed by one worker from start to end, so
// results do not depend on the scheduling.
func forEachPair(pairs, seq int, body func(w *attnWorker, bh int)) {
	parallelFor(pairs, 1, func(lo, hi int) {
		w := attnWorkers.get()
		defer attnWorkers.put(w)
		w.p, w.dp = growFloats(w.p, seq*seq), growFloats(w.dp, seq*seq)
		for bh := lo; bh < hi; bh++ {
			body(w, bh)
		}
	})
}

// pairOffset returns the offset of head h of batch b in a [B,T,H,D] tensor.
func pairOffset(s device.AttentionShape, b, h int) int {
	return b*s.Seq*s.Heads*s.HeadDim + h*s.HeadDim
}

// blockProbs fills rows i0..i1-1, columns 0..i1-1 of p (pitch Seq) with
// the softmax probabilities of scale*q.k under the causal mask (zeros
// above the diagonal). With lseIn nil it stores each row's log-sum-exp in
// lseOut; otherwise it uses the given one.
func blockProbs(p, q, k []float32, s device.AttentionShape, i0, i1 int, scale float32, lseIn, lseOut []float32) {
	T, W := s.Seq, s.Heads*s.HeadDim
	attnGemm(false, true, i1-i0, i1, s.HeadDim, scale, q[i0*W:], W, k, W, 0, p[i0*T:], T)
	for t := i0; t < i1; t++ {
		row := p[t*T : t*T+i1]
		if lseIn != nil {
			expShiftSum(row[:t+1], row[:t+1], lseIn[t])
		} else {
			m := rowMax(row[:t+1])
			sum := expShiftSum(row[:t+1], row[:t+1], m)
			lseOut[t] = m + float32(math.Log(sum))
			scaleInPlace(row[:t+1], float32(1/sum))
		}
		clear(row[t+1:])
	}
}

// Attention computes causal scaled-dot-product attention (see device.Device).
func (d *Device) Attention(out, lse, q, k, v device.Buffer, s device.AttentionShape, scale float32) {
	qv, kv, vv, ov, lv := Float32s(q), Float32s(k), Float32s(v), Float32s(out), Float32s(lse)
	T, W, D := s.Seq, s.Heads*s.HeadDim, s.HeadDim
	forEachPair(s.Batch*s.Heads, T, func(w *attnWorker, bh int) {
		p := w.p
		off := pairOffset(s, bh/s.Heads, bh%s.Heads)
		lseRow := lv[bh*T : (bh+1)*T]
		for i0 := 0; i0 < T; i0 += attnBlock {
			i1 := min(i0+attnBlock, T)
			blockProbs(p, qv[off:], kv[off:], s, i0, i1, scale, nil, lseRow)
			attnGemm(false, false, i1-i0, D, i1, 1, p[i0*T:], T, vv[off:], W, 0, ov[off+i0*W:], W)
		}
	})
}

// AttentionBackward recomputes each block's probabilities from the saved
// lse and applies the softmax-attention chain rule block by block: dQ of
// the block's queries directly, dK and dV of the keys it sees accumulated.
func (d *Device) AttentionBackward(dq, dk, dv, dout, q, k, v, out, lse device.Buffer, s device.AttentionShape, scale float32) {
	qv, kv, vv, ov, lv := Float32s(q), Float32s(k), Float32s(v), Float32s(out), Float32s(lse)
	dqv, dkv, dvv, gv := Float32s(dq), Float32s(dk), Float32s(dv), Float32s(dout)
	T, W, D := s.Seq, s.Heads*s.HeadDim, s.HeadDim
	forEachPair(s.Batch*s.Heads, T, func(w *attnWorker, bh int) {
		p, dp := w.p, w.dp
		off := pairOffset(s, bh/s.Heads, bh%s.Heads)
		lseRow := lv[bh*T : (bh+1)*T]
		for i0 := 0; i0 < T; i0 += attnBlock {
			i1 := min(i0+attnBlock, T)
			n := i1 - i0
			// Each block adds into the dK and dV rows of the keys
			// 0..i1-1 it sees; keys i0..i1-1 are first seen by this
			// block, so their rows are cleared just before.
			blockProbs(p, qv[off:], kv[off:], s, i0, i1, scale, lseRow, nil)
			// dV[0:i1] += P^T dO
			clearRows(dvv[off+i0*W:], n, D, W)
			attnGemm(true, false, i1, D, n, 1, p[i0*T:], T, gv[off+i0*W:], W, 1, dvv[off:], W)
			// dP = dO V^T
			attnGemm(false, true, n, i1, D, 1, gv[off+i0*W:], W, vv[off:], W, 0, dp[i0*T:], T)
			// dS = P * (dP - rowsum(dO * O))
			for t := i0; t < i1; t++ {
				o, g := ov[off+t*W:off+t*W+D], gv[off+t*W:off+t*W+D]
				var di float32
				for j := range o {
					di += o[j] * g[j]
				}
				pr, dr := p[t*T:t*T+t+1], dp[t*T:t*T+i1]
				for u := range pr {
					dr[u] = pr[u] * (dr[u] - di)
				}
				clear(dr[t+1:])
			}
			// dQ = scale * dS K; dK[0:i1] += scale * dS^T Q
			attnGemm(false, false, n, D, i1, scale, dp[i0*T:], T, kv[off:], W, 0, dqv[off+i0*W:], W)
			clearRows(dkv[off+i0*W:], n, D, W)
			attnGemm(true, false, i1, D, n, scale, dp[i0*T:], T, qv[off+i0*W:], W, 1, dkv[off:], W)
		}
	})
}

// clearRows zeroes rows of cols elements, pitch apart.
func clearRows(x []float32, rows, cols, pitch int) {
	for r := range rows {
		clear(x[r*pitch : r*pitch+cols])
	}
}

// growFloats returns x resized to n, reallocated when too small.
func growFloats(x []float32, n int) []float32 {
	if cap(x) < n {
		return make([]float32, n)
	}
	return x[:n]
}
