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
// work of full Seq x Seq ones (5/8 of it at Seq 256). With keys of another
// length (s.Keys()), a block meets those its last query sees (all of them
// unmasked). Memory beyond the inputs is two Seq x Keys scratch matrices
// per worker, recycled across calls.
//
// The products run on the native GEMM's micro-kernel, one worker per call
// (attnGemm), whatever GEMM Sgemm uses: OpenBLAS's OpenMP build returns
// wrong results now and then when two threads call it at once, and
// threading within a product does not pay on products this small.

// attnBlock is the query rows of one block.
const attnBlock = 64

// attnWorker is one worker's two Seq x Keys scratch matrices.
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
// scratch elements). A pair is computed by one worker from start to end,
// so results do not depend on the scheduling.
func forEachPair(pairs, scratch int, body func(w *attnWorker, bh int)) {
	parallelFor(pairs, 1, func(lo, hi int) {
		w := attnWorkers.get()
		defer attnWorkers.put(w)
		w.p, w.dp = growFloats(w.p, scratch), growFloats(w.dp, scratch)
		for bh := lo; bh < hi; bh++ {
			body(w, bh)
		}
	})
}

// pairOffset returns the offset of head h of batch b in a [B,T,H,D]
// tensor of seq positions and heads heads.
func pairOffset(s device.AttentionShape, seq, heads, b, h int) int {
	return b*seq*heads*s.HeadDim + h*s.HeadDim
}

// keyOffset returns the offset of the key and value head that query head
// h of batch b reads (h / (Heads/KeyHeads) with grouped queries) in k or
// v.
func keyOffset(s device.AttentionShape, b, h int) int {
	kh := s.KeyHeads()
	return pairOffset(s, s.Keys(), kh, b, h/(s.Heads/kh))
}

// blockKeys is how many keys the queries i0..i1-1 see together: those of
// the last one (s.Visible grows with t).
func blockKeys(s device.AttentionShape, i1 int) int { return s.Visible(i1 - 1) }

// blockProbs fills rows i0..i1-1, columns 0..blockKeys-1 of p (pitch
// Keys) with the softmax probabilities of scale*q.k under the mask (zeros
// where a query does not see a key). With lseIn nil it stores each row's
// log-sum-exp in lseOut; otherwise it uses the given one.
func blockProbs(p, q, k []float32, s device.AttentionShape, i0, i1 int, scale float32, lseIn, lseOut []float32) {
	K, W, Wk, nk := s.Keys(), s.Heads*s.HeadDim, s.KeyHeads()*s.HeadDim, blockKeys(s, i1)
	attnGemm(false, true, i1-i0, nk, s.HeadDim, scale, q[i0*W:], W, k, Wk, 0, p[i0*K:], K)
	for t := i0; t < i1; t++ {
		row, c := p[t*K:t*K+nk], s.Visible(t)
		if lseIn != nil {
			expShiftSum(row[:c], row[:c], lseIn[t])
		} else {
			m := rowMax(row[:c])
			sum := expShiftSum(row[:c], row[:c], m)
			lseOut[t] = m + float32(math.Log(sum))
			scaleInPlace(row[:c], float32(1/sum))
		}
		clear(row[c:])
	}
}

// AttendsGrouped marks the kernels as taking grouped-query shapes
// (device.GroupedAttender): a query head reads its group's key and value
// head where it is.
func (d *Device) AttendsGrouped() {}

// Attention computes scaled-dot-product attention, causal or unmasked,
// over s.Keys() keys (see device.Attender).
func (d *Device) Attention(out, lse, q, k, v device.Buffer, s device.AttentionShape, scale float32) {
	qv, kv, vv, ov, lv := Float32s(q), Float32s(k), Float32s(v), Float32s(out), Float32s(lse)
	T, K, W, Wk, D := s.Seq, s.Keys(), s.Heads*s.HeadDim, s.KeyHeads()*s.HeadDim, s.HeadDim
	if T == 0 {
		return
	}
	forEachPair(s.Batch*s.Heads, T*K, func(w *attnWorker, bh int) {
		p := w.p
		b, h := bh/s.Heads, bh%s.Heads
		qo, ko := pairOffset(s, T, s.Heads, b, h), keyOffset(s, b, h)
		lseRow := lv[bh*T : (bh+1)*T]
		for i0 := 0; i0 < T; i0 += attnBlock {
			i1 := min(i0+attnBlock, T)
			blockProbs(p, qv[qo:], kv[ko:], s, i0, i1, scale, nil, lseRow)
			attnGemm(false, false, i1-i0, D, blockKeys(s, i1), 1, p[i0*K:], K, vv[ko:], Wk, 0, ov[qo+i0*W:], W)
		}
	})
}

// AttentionBackward recomputes each block's probabilities from the saved
// lse and applies the softmax-attention chain rule block by block: dQ of
// the block's queries directly, dK and dV of the keys it sees accumulated.
// A worker takes a key and value head of a batch with every query head
// that reads it, one after another (one with ungrouped queries), so that
// dK and dV gather the group's sums without another worker writing them.
func (d *Device) AttentionBackward(dq, dk, dv, dout, q, k, v, out, lse device.Buffer, s device.AttentionShape, scale float32) {
	a := attnBackward{s: s, scale: scale,
		q: Float32s(q), k: Float32s(k), v: Float32s(v), out: Float32s(out), lse: Float32s(lse),
		dq: Float32s(dq), dk: Float32s(dk), dv: Float32s(dv), dout: Float32s(dout)}
	kh := s.KeyHeads()
	group := s.Heads / kh
	forEachPair(s.Batch*kh, s.Seq*s.Keys(), func(w *attnWorker, bg int) {
		b, first := bg/kh, bg%kh*group
		for h := first; h < first+group; h++ {
			a.head(w, b, h, h == first)
		}
	})
}

// attnBackward is one AttentionBackward call: its shape, scale and
// buffers.
type attnBackward struct {
	s                 device.AttentionShape
	scale             float32
	q, k, v, out, lse []float32
	dq, dk, dv, dout  []float32
}

// head is AttentionBackward of query head h of batch b. dK and dV of its
// key head are overwritten when first is set, and added to otherwise.
func (a *attnBackward) head(w *attnWorker, b, h int, first bool) {
	s, scale := a.s, a.scale
	qv, kv, vv, ov, lv := a.q, a.k, a.v, a.out, a.lse
	dqv, dkv, dvv, gv := a.dq, a.dk, a.dv, a.dout
	T, K, W, Wk, D := s.Seq, s.Keys(), s.Heads*s.HeadDim, s.KeyHeads()*s.HeadDim, s.HeadDim
	p, dp := w.p, w.dp
	bh := b*s.Heads + h
	qo, ko := pairOffset(s, T, s.Heads, b, h), keyOffset(s, b, h)
	lseRow := lv[bh*T : (bh+1)*T]
	// Each block adds into the dK and dV rows of the keys it sees; the
	// first head clears the keys no query has seen yet just before.
	seen := K
	if first {
		seen = 0
	}
	for i0 := 0; i0 < T; i0 += attnBlock {
		i1 := min(i0+attnBlock, T)
		n, nk := i1-i0, blockKeys(s, i1)
		if nk > seen {
			clearRows(dvv[ko+seen*Wk:], nk-seen, D, Wk)
			clearRows(dkv[ko+seen*Wk:], nk-seen, D, Wk)
			seen = nk
		}
		blockProbs(p, qv[qo:], kv[ko:], s, i0, i1, scale, lseRow, nil)
		// dV[0:nk] += P^T dO
		attnGemm(true, false, nk, D, n, 1, p[i0*K:], K, gv[qo+i0*W:], W, 1, dvv[ko:], Wk)
		// dP = dO V^T
		attnGemm(false, true, n, nk, D, 1, gv[qo+i0*W:], W, vv[ko:], Wk, 0, dp[i0*K:], K)
		// dS = P * (dP - rowsum(dO * O))
		for t := i0; t < i1; t++ {
			o, g := ov[qo+t*W:qo+t*W+D], gv[qo+t*W:qo+t*W+D]
			var di float32
			for j := range o {
				di += o[j] * g[j]
			}
			c := s.Visible(t)
			pr, dr := p[t*K:t*K+c], dp[t*K:t*K+nk]
			for u := softmaxGradFast(dr[:c], pr, di); u < c; u++ {
				dr[u] = pr[u] * (dr[u] - di)
			}
			clear(dr[c:])
		}
		// dQ = scale * dS K; dK[0:nk] += scale * dS^T Q
		attnGemm(false, false, n, D, nk, scale, dp[i0*K:], K, kv[ko:], Wk, 0, dqv[qo+i0*W:], W)
		attnGemm(true, false, nk, D, n, scale, dp[i0*K:], K, qv[qo+i0*W:], W, 1, dkv[ko:], Wk)
	}
	if seen < K { // keys no query sees: all of them when there are no queries
		clearRows(dvv[ko+seen*Wk:], K-seen, D, Wk)
		clearRows(dkv[ko+seen*Wk:], K-seen, D, Wk)
	}
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
