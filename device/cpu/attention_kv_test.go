package cpu_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/hilbert-ml/hilbert/device"
)

// extractSeq returns head h of batch b of x laid out [B, seq, H, D].
func extractSeq(x []float64, s device.AttentionShape, seq, b, h int) pair {
	p := make(pair, seq)
	for t := range p {
		base := ((b*seq+t)*s.Heads + h) * s.HeadDim
		p[t] = x[base : base+s.HeadDim]
	}
	return p
}

// refMaskedAttentionPair is naive softmax attention of one (batch, head)
// in float64 where query t sees keys 0..visible(t)-1.
func refMaskedAttentionPair(q, k, v pair, scale float64, visible func(t int) int) (out [][]float64, lse []float64) {
	out, lse = make([][]float64, len(q)), make([]float64, len(q))
	for t := range q {
		c := visible(t)
		sc := make([]float64, c)
		m := math.Inf(-1)
		for u := range c {
			var d float64
			for j := range q[t] {
				d += q[t][j] * k[u][j]
			}
			sc[u] = scale * d
			m = math.Max(m, sc[u])
		}
		var z float64
		for _, x := range sc {
			z += math.Exp(x - m)
		}
		lse[t] = m + math.Log(z)
		out[t] = make([]float64, len(q[t]))
		for u := range c {
			p := math.Exp(sc[u] - lse[t])
			for j := range out[t] {
				out[t][j] += p * v[u][j]
			}
		}
	}
	return out, lse
}

// TestAttentionKV checks the CPU kernels with keys of another length than
// the queries (causal over a cached prefix, one new token, more than one
// query block; unmasked with more, fewer and one key) against the float64
// reference, written with the mask spelled out rather than through
// AttentionShape.Visible: causal query t sees keys u <= t + Tk - Tq.
// Gradients are central differences of the reference.
func TestAttentionKV(t *testing.T) {
	for si, s := range []device.AttentionShape{
		{Batch: 2, Seq: 3, KVSeq: 7, Heads: 2, HeadDim: 8},
		{Batch: 1, Seq: 1, KVSeq: 9, Heads: 3, HeadDim: 8},
		{Batch: 1, Seq: 66, KVSeq: 70, Heads: 1, HeadDim: 4},
		{Batch: 2, Seq: 4, KVSeq: 6, Heads: 2, HeadDim: 8, Unmasked: true},
		{Batch: 1, Seq: 5, KVSeq: 2, Heads: 2, HeadDim: 8, Unmasked: true},
		{Batch: 2, Seq: 3, KVSeq: 1, Heads: 1, HeadDim: 8, Unmasked: true},
		{Batch: 1, Seq: 6, Heads: 2, HeadDim: 8, Unmasked: true},
	} {
		Tq, Tk := s.Seq, s.KVSeq
		if Tk == 0 {
			Tk = Tq
		}
		visible := func(t int) int {
			if s.Unmasked {
				return Tk
			}
			return t + Tk - Tq + 1
		}
		name := fmt.Sprintf("%+v", s)
		scale := 1 / math.Sqrt(float64(s.HeadDim))
		nq, nk := s.Batch*Tq*s.Heads*s.HeadDim, s.Batch*Tk*s.Heads*s.HeadDim
		r := newRand(uint64(700 + si))
		q, k, v, dout := randSlice(r, nq, 2), randSlice(r, nk, 2), randSlice(r, nk, 1), randSlice(r, nq, 1)
		q64, k64, v64, g64 := f64(q), f64(k), f64(v), f64(dout)
		wantOut, wantLse := make([]float64, nq), make([]float64, s.Batch*s.Heads*Tq)
		wantDq, wantDk, wantDv := make([]float64, nq), make([]float64, nk), make([]float64, nk)
		for b := range s.Batch {
			for h := range s.Heads {
				pair := func() (pair, pair, pair) {
					return extractSeq(q64, s, Tq, b, h), extractSeq(k64, s, Tk, b, h), extractSeq(v64, s, Tk, b, h)
				}
				qp, kp, vp := pair()
				o, l := refMaskedAttentionPair(qp, kp, vp, scale, visible)
				copy(wantLse[(b*s.Heads+h)*Tq:], l)
				po := extractSeq(wantOut, s, Tq, b, h)
				for t := range po {
					copy(po[t], o[t])
				}
				g := extractSeq(g64, s, Tq, b, h)
				loss := func() float64 {
					qp, kp, vp := pair()
					o, _ := refMaskedAttentionPair(qp, kp, vp, scale, visible)
					var L float64
					for t := range o {
						for j := range o[t] {
							L += g[t][j] * o[t][j]
						}
					}
					return L
				}
				for _, in := range []struct {
					x, grad []float64
					seq     int
				}{{q64, wantDq, Tq}, {k64, wantDk, Tk}, {v64, wantDv, Tk}} {
					xp, gp := extractSeq(in.x, s, in.seq, b, h), extractSeq(in.grad, s, in.seq, b, h)
					for t := range xp {
						for j := range xp[t] {
							const hstep = 1e-5
							old := xp[t][j]
							xp[t][j] = old + hstep
							fp := loss()
							xp[t][j] = old - hstep
							fm := loss()
							xp[t][j] = old
							gp[t][j] = (fp - fm) / (2 * hstep)
						}
					}
				}
			}
		}
		out, lse := buf(randSlice(r, nq, 3)), buf(randSlice(r, len(wantLse), 3))
		Q, K, V := buf(q), buf(k), buf(v)
		dev.Attention(out, lse, Q, K, V, s, float32(scale))
		// As TestAttention's bound at mag 2: float32 scores, exponentials
		// and sums of D + Tk terms; a masking error is O(0.1).
		tol := 8e-7 * float64(s.HeadDim+Tk)
		checkClose(t, name+" out", host(out), wantOut, 0, tol)
		checkClose(t, name+" lse", host(lse), wantLse, 2*u32, tol)
		dq, dk, dv := buf(randSlice(r, nq, 3)), buf(randSlice(r, nk, 3)), buf(randSlice(r, nk, 3))
		dev.AttentionBackward(dq, dk, dv, buf(dout), Q, K, V, out, lse, s, float32(scale))
		checkClose(t, name+" dq", host(dq), wantDq, 0, 8*tol)
		checkClose(t, name+" dk", host(dk), wantDk, 0, 8*tol)
		checkClose(t, name+" dv", host(dv), wantDv, 0, 8*tol)
	}
}

// TestAttentionNoQueries: with keys and no queries the backward writes
// zero gradients for every key (the buffers start as garbage).
func TestAttentionNoQueries(t *testing.T) {
	for _, unmasked := range []bool{false, true} {
		s := device.AttentionShape{Batch: 2, Seq: 0, KVSeq: 5, Heads: 2, HeadDim: 8, Unmasked: unmasked}
		nk := 2 * 5 * 2 * 8
		r := newRand(9)
		dk, dv := buf(randSlice(r, nk, 3)), buf(randSlice(r, nk, 3))
		empty := zeros(t, 0)
		dev.AttentionBackward(empty, dk, dv, empty, empty, buf(randSlice(r, nk, 1)), buf(randSlice(r, nk, 1)), empty, empty, s, 0.5)
		checkEqual(t, fmt.Sprintf("unmasked %v: dk", unmasked), host(dk), make([]float32, nk))
		checkEqual(t, fmt.Sprintf("unmasked %v: dv", unmasked), host(dv), make([]float32, nk))
	}
}
