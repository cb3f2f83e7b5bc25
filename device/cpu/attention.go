package cpu

import (
	"math"
	"sync"

	"github.com/hilbert-ml/hilbert/device"
)

// Attention on the CPU works one (batch, head) pair at a time: the scores of
// a pair are a Seq x Seq matrix made by one GEMM straight from the
// [Batch, Seq, Heads, HeadDim] layout (row pitch Heads*HeadDim), softmaxed
// in place under the causal mask with rows in parallel, and multiplied by V
// with a second GEMM. Memory beyond the inputs is two Seq x Seq scratch
// matrices, reused across calls.

var attnScratch struct {
	sync.Mutex
	p, dp []float32
}

// scratch returns two Seq x Seq scratch matrices; the caller holds the lock.
func attentionScratch(seq int) (p, dp []float32) {
	n := seq * seq
	if cap(attnScratch.p) < n {
		attnScratch.p = make([]float32, n)
		attnScratch.dp = make([]float32, n)
	}
	return attnScratch.p[:n], attnScratch.dp[:n]
}

// pairOffset returns the offset of head h of batch b in a [B,T,H,D] tensor.
func pairOffset(s device.AttentionShape, b, h int) int {
	return b*s.Seq*s.Heads*s.HeadDim + h*s.HeadDim
}

// causalProbs fills p (Seq x Seq) with softmax probabilities of scale*q.k
// under the causal mask. With lse nil it computes and stores the
// log-sum-exp of each row in lseOut; otherwise it uses the given lse.
func causalProbs(p, q, k []float32, s device.AttentionShape, scale float32, lseIn, lseOut []float32) {
	T, W := s.Seq, s.Heads*s.HeadDim
	Sgemm(false, true, T, T, s.HeadDim, scale, q, W, k, W, 0, p, T)
	parallelFor(T, 16, func(lo, hi int) {
		for t := lo; t < hi; t++ {
			row := p[t*T : (t+1)*T]
			var l float32
			if lseIn != nil {
				l = lseIn[t]
				expShiftSum(row[:t+1], row[:t+1], l)
			} else {
				m := rowMax(row[:t+1])
				sum := expShiftSum(row[:t+1], row[:t+1], m)
				l = m + float32(math.Log(sum))
				lseOut[t] = l
				scaleInPlace(row[:t+1], float32(1/sum))
			}
			clear(row[t+1:])
		}
	})
}

// Attention computes causal scaled-dot-product attention (see device.Device).
func (d *Device) Attention(out, lse, q, k, v device.Buffer, s device.AttentionShape, scale float32) {
	qv, kv, vv, ov, lv := Float32s(q), Float32s(k), Float32s(v), Float32s(out), Float32s(lse)
	T, W := s.Seq, s.Heads*s.HeadDim
	attnScratch.Lock()
	defer attnScratch.Unlock()
	p, _ := attentionScratch(T)
	for b := 0; b < s.Batch; b++ {
		for h := 0; h < s.Heads; h++ {
			off := pairOffset(s, b, h)
			lseRow := lv[(b*s.Heads+h)*T : (b*s.Heads+h+1)*T]
			causalProbs(p, qv[off:], kv[off:], s, scale, nil, lseRow)
			Sgemm(false, false, T, s.HeadDim, T, 1, p, T, vv[off:], W, 0, ov[off:], W)
		}
	}
}

// AttentionBackward recomputes the probabilities of each pair from the
// saved lse and applies the softmax-attention chain rule with four GEMMs.
func (d *Device) AttentionBackward(dq, dk, dv, dout, q, k, v, out, lse device.Buffer, s device.AttentionShape, scale float32) {
	qv, kv, vv, ov, lv := Float32s(q), Float32s(k), Float32s(v), Float32s(out), Float32s(lse)
	dqv, dkv, dvv, gv := Float32s(dq), Float32s(dk), Float32s(dv), Float32s(dout)
	T, W, D := s.Seq, s.Heads*s.HeadDim, s.HeadDim
	attnScratch.Lock()
	defer attnScratch.Unlock()
	p, dp := attentionScratch(T)
	for b := 0; b < s.Batch; b++ {
		for h := 0; h < s.Heads; h++ {
			off := pairOffset(s, b, h)
			lseRow := lv[(b*s.Heads+h)*T : (b*s.Heads+h+1)*T]
			causalProbs(p, qv[off:], kv[off:], s, scale, lseRow, nil)
			// dV = P^T dO
			Sgemm(true, false, T, D, T, 1, p, T, gv[off:], W, 0, dvv[off:], W)
			// dP = dO V^T
			Sgemm(false, true, T, T, D, 1, gv[off:], W, vv[off:], W, 0, dp, T)
			// dS = P * (dP - rowsum(dO * O))
			parallelFor(T, 16, func(lo, hi int) {
				for t := lo; t < hi; t++ {
					o, g := ov[off+t*W:off+t*W+D], gv[off+t*W:off+t*W+D]
					var di float32
					for j := range o {
						di += o[j] * g[j]
					}
					pr, dr := p[t*T:t*T+t+1], dp[t*T:(t+1)*T]
					for u := range pr {
						dr[u] = pr[u] * (dr[u] - di)
					}
					clear(dr[t+1:])
				}
			})
			// dQ = scale * dS K; dK = scale * dS^T Q
			Sgemm(false, false, T, D, T, scale, dp, T, kv[off:], W, 0, dqv[off:], W)
			Sgemm(true, false, T, D, T, scale, dp, T, qv[off:], W, 0, dkv[off:], W)
		}
	}
}
