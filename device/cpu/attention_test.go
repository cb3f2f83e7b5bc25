package cpu_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/hilbert-ml/hilbert/device"
)

// pair holds one (batch, head) slice of a [B,T,H,D] tensor as T rows of D.
type pair [][]float64

// extract returns head h of batch b of x.
func extract(x []float64, s device.AttentionShape, b, h int) pair {
	p := make(pair, s.Seq)
	for t := range p {
		base := ((b*s.Seq+t)*s.Heads + h) * s.HeadDim
		p[t] = x[base : base+s.HeadDim]
	}
	return p
}

// refAttentionPair is naive causal softmax attention for one (batch, head)
// in float64: out_t = sum_{u<=t} softmax_u(scale q_t.k_u) v_u. It returns
// the output rows and each row's log-sum-exp.
func refAttentionPair(q, k, v pair, scale float64) (out [][]float64, lse []float64) {
	T, D := len(q), len(q[0])
	out, lse = make([][]float64, T), make([]float64, T)
	for t := 0; t < T; t++ {
		sc := make([]float64, t+1)
		m := math.Inf(-1)
		for u := 0; u <= t; u++ {
			var d float64
			for j := 0; j < D; j++ {
				d += q[t][j] * k[u][j]
			}
			sc[u] = scale * d
			m = math.Max(m, sc[u])
		}
		var z float64
		for _, s := range sc {
			z += math.Exp(s - m)
		}
		lse[t] = m + math.Log(z)
		out[t] = make([]float64, D)
		for u := 0; u <= t; u++ {
			p := math.Exp(sc[u] - lse[t])
			for j := 0; j < D; j++ {
				out[t][j] += p * v[u][j]
			}
		}
	}
	return out, lse
}

var attentionShapes = []device.AttentionShape{
	{Batch: 1, Seq: 1, Heads: 1, HeadDim: 8},
	{Batch: 2, Seq: 1, Heads: 3, HeadDim: 8},
	{Batch: 2, Seq: 5, Heads: 3, HeadDim: 8},
	{Batch: 2, Seq: 17, Heads: 2, HeadDim: 16},
	{Batch: 1, Seq: 40, Heads: 3, HeadDim: 8}, // more rows than the parallel grain
}

func TestAttention(t *testing.T) {
	for si, s := range attentionShapes {
		for _, mag := range []float32{1, 6} { // 6: scores up to ~100, softmax nearly one-hot
			name := fmt.Sprintf("%+v/mag%g", s, mag)
			scale := 1 / math.Sqrt(float64(s.HeadDim))
			n := s.Batch * s.Seq * s.Heads * s.HeadDim
			r := newRand(uint64(si)*10 + uint64(mag))
			q, k, v := randSlice(r, n, mag), randSlice(r, n, mag), randSlice(r, n, 1)
			dout := randSlice(r, n, 1)
			out := buf(randSlice(r, n, 3))
			lse := buf(randSlice(r, s.Batch*s.Heads*s.Seq, 3))
			Q, K, V := buf(q), buf(k), buf(v)
			dev.Attention(out, lse, Q, K, V, s, float32(scale))

			q64, k64, v64 := f64(q), f64(k), f64(v)
			wantOut, wantLse := make([]float64, n), make([]float64, lse.Len())
			wantDq, wantDk, wantDv := make([]float64, n), make([]float64, n), make([]float64, n)
			for b := 0; b < s.Batch; b++ {
				for h := 0; h < s.Heads; h++ {
					o, l := refAttentionPair(extract(q64, s, b, h), extract(k64, s, b, h), extract(v64, s, b, h), scale)
					copy(wantLse[(b*s.Heads+h)*s.Seq:], l)
					po := extract(wantOut, s, b, h)
					for t := range po {
						copy(po[t], o[t])
					}
					// Gradients of L = sum dout*out by central differences
					// of the float64 reference, perturbing this pair only.
					g := extract(f64(dout), s, b, h)
					loss := func() float64 {
						o, _ := refAttentionPair(extract(q64, s, b, h), extract(k64, s, b, h), extract(v64, s, b, h), scale)
						var L float64
						for t := range o {
							for j := range o[t] {
								L += g[t][j] * o[t][j]
							}
						}
						return L
					}
					for _, in := range []struct{ x, grad []float64 }{{q64, wantDq}, {k64, wantDk}, {v64, wantDv}} {
						xp, gp := extract(in.x, s, b, h), extract(in.grad, s, b, h)
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
			// Scores are float32 dot products of D terms of magnitude up
			// to mag^2 (error ~ D u mag^2 scale), exponentials are rounded
			// to float32, and the output is a float32 sum of up to Seq
			// terms: an absolute 2e-7 * mag^2 * (D + Seq) bounds it with
			// room to spare (values are O(1)); any indexing or masking
			// error is O(0.1) or more.
			tol := 2e-7 * float64(mag*mag) * float64(s.HeadDim+s.Seq)
			checkClose(t, name+" out", host(out), wantOut, 0, tol)
			checkClose(t, name+" lse", host(lse), wantLse, 2*u32, tol)

			dq, dk, dv := buf(randSlice(r, n, 3)), buf(randSlice(r, n, 3)), buf(randSlice(r, n, 3))
			dev.AttentionBackward(dq, dk, dv, buf(dout), Q, K, V, out, lse, s, float32(scale))
			// The gradients chain two more float32 GEMMs over Seq and D
			// terms and scale by up to mag (dq, dk); the finite
			// differences add ~1e-9.
			gtol := 4 * tol * float64(mag)
			checkClose(t, name+" dq", host(dq), wantDq, 0, gtol)
			checkClose(t, name+" dk", host(dk), wantDk, 0, gtol)
			checkClose(t, name+" dv", host(dv), wantDv, 0, gtol)
			checkEqual(t, name+" q unchanged", host(Q), q)
		}
	}
}

// refAttentionBackwardPair is the closed-form float64 backward of one pair:
// P = softmax(scale Q K^T) under the mask, dV = P^T dO, dP = dO V^T,
// dS = P * (dP - rowsum(dO * O)), dQ = scale dS K, dK = scale dS^T Q. The
// finite differences of TestAttention check these formulas on small shapes.
func refAttentionBackwardPair(q, k, v, dout pair, scale float64) (dq, dk, dv [][]float64) {
	T, D := len(q), len(q[0])
	out, lse := refAttentionPair(q, k, v, scale)
	mat := func() [][]float64 {
		m := make([][]float64, T)
		for i := range m {
			m[i] = make([]float64, D)
		}
		return m
	}
	dq, dk, dv = mat(), mat(), mat()
	for t := range T {
		var delta float64
		for j := range D {
			delta += dout[t][j] * out[t][j]
		}
		for u := 0; u <= t; u++ {
			var sc, dp float64
			for j := range D {
				sc += q[t][j] * k[u][j]
				dp += dout[t][j] * v[u][j]
			}
			p := math.Exp(scale*sc - lse[t])
			ds := p * (dp - delta)
			for j := range D {
				dv[u][j] += p * dout[t][j]
				dq[t][j] += scale * ds * k[u][j]
				dk[u][j] += scale * ds * q[t][j]
			}
		}
	}
	return dq, dk, dv
}

// TestAttentionBlocks covers the query blocking of the CPU kernels (one
// block exactly, several with a ragged last one, a block of one query)
// and the (batch, head) pairs spread over workers, against the float64
// reference and its closed-form backward.
func TestAttentionBlocks(t *testing.T) {
	for _, s := range []device.AttentionShape{
		{Batch: 1, Seq: 64, Heads: 1, HeadDim: 32},
		{Batch: 2, Seq: 150, Heads: 2, HeadDim: 24},
		{Batch: 1, Seq: 129, Heads: 3, HeadDim: 64},
	} {
		name := fmt.Sprintf("%+v", s)
		scale := 1 / math.Sqrt(float64(s.HeadDim))
		n := s.Batch * s.Seq * s.Heads * s.HeadDim
		r := newRand(uint64(n))
		q, k, v, dout := randSlice(r, n, 1), randSlice(r, n, 1), randSlice(r, n, 1), randSlice(r, n, 1)
		q64, k64, v64, g64 := f64(q), f64(k), f64(v), f64(dout)
		want := map[string][]float64{"out": make([]float64, n), "dq": make([]float64, n), "dk": make([]float64, n), "dv": make([]float64, n)}
		wantLse := make([]float64, s.Batch*s.Heads*s.Seq)
		for b := range s.Batch {
			for h := range s.Heads {
				qp, kp, vp, gp := extract(q64, s, b, h), extract(k64, s, b, h), extract(v64, s, b, h), extract(g64, s, b, h)
				o, l := refAttentionPair(qp, kp, vp, scale)
				copy(wantLse[(b*s.Heads+h)*s.Seq:], l)
				dq, dk, dv := refAttentionBackwardPair(qp, kp, vp, gp, scale)
				for name, src := range map[string][][]float64{"out": o, "dq": dq, "dk": dk, "dv": dv} {
					dst := extract(want[name], s, b, h)
					for t := range dst {
						copy(dst[t], src[t])
					}
				}
			}
		}
		out, lse := zeros(t, n), zeros(t, len(wantLse))
		Q, K, V := buf(q), buf(k), buf(v)
		dev.Attention(out, lse, Q, K, V, s, float32(scale))
		tol := 2e-7 * float64(s.HeadDim+s.Seq)
		checkClose(t, name+" out", host(out), want["out"], 0, tol)
		checkClose(t, name+" lse", host(lse), wantLse, 2*u32, tol)
		dq, dk, dv := buf(randSlice(r, n, 3)), buf(randSlice(r, n, 3)), buf(randSlice(r, n, 3))
		dev.AttentionBackward(dq, dk, dv, buf(dout), Q, K, V, out, lse, s, float32(scale))
		checkClose(t, name+" dq", host(dq), want["dq"], 0, 4*tol)
		checkClose(t, name+" dk", host(dk), want["dk"], 0, 4*tol)
		checkClose(t, name+" dv", host(dv), want["dv"], 0, 4*tol)
	}
}

// TestAttentionSeq1 pins the degenerate case exactly: with one position,
// attention returns v and lse is the single scaled score.
func TestAttentionSeq1(t *testing.T) {
	s := device.AttentionShape{Batch: 2, Seq: 1, Heads: 3, HeadDim: 8}
	n := 2 * 3 * 8
	r := newRand(5)
	q, k, v := randSlice(r, n, 1), randSlice(r, n, 1), randSlice(r, n, 1)
	out, lse := zeros(t, n), zeros(t, 6)
	dev.Attention(out, lse, buf(q), buf(k), buf(v), s, 0.5)
	checkClose(t, "out", host(out), f64(v), 2*u32, 0)
	want := make([]float64, 6)
	for i := range want {
		for j := 0; j < 8; j++ {
			want[i] += 0.5 * float64(q[i*8+j]) * float64(k[i*8+j])
		}
	}
	checkClose(t, "lse", host(lse), want, 0, 16*u32)
}
