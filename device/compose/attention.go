package compose

import (
	"math"

	"github.com/hilbert-ml/hilbert/device"
)

// attention holds what the composed forward and backward share for one
// call: the heads' matrices of batch b are T x D blocks of a [B, T, H, D]
// array with row pitch H*D, one head D elements after the previous, so a
// batched Gemm over heads reaches them with stride D.
type attention struct {
	d     device.Core
	s     device.AttentionShape
	scale float32
	mask  device.Buffer // [T, T]: 0 where u <= t, -Inf above the diagonal
}

func newAttention(d device.Core, op string, dt device.DType, s device.AttentionShape, scale float32) *attention {
	T := s.Seq
	m := make([]float64, T*T)
	for t := range T {
		for u := t + 1; u < T; u++ {
			m[t*T+u] = math.Inf(-1)
		}
	}
	mask := temp(d, op, dt, T*T)
	d.CopyFloat64FromHost(mask, m)
	return &attention{d: d, s: s, scale: scale, mask: mask}
}

// head returns batch b's block of a [B, T, H, D] buffer.
func (a *attention) head(x device.Buffer, b int) device.Buffer {
	n := a.s.Seq * a.s.Heads * a.s.HeadDim
	return x.Slice(b*n, n)
}

// gemm runs C_h = alpha op(A_h) op(B_h) over the heads, where each operand
// is either a [H, T, T] score block (square) or a head block of batch b.
func (a *attention) gemm(transA, transB bool, m, n, k int, alpha float32, A device.Buffer, aSquare bool,
	B device.Buffer, bSquare bool, C device.Buffer, cSquare bool) {
	T, HD, D := a.s.Seq, a.s.Heads*a.s.HeadDim, a.s.HeadDim
	pitch := func(square bool) (ld, stride int) {
		if square {
			return T, T * T
		}
		return HD, D
	}
	g := device.GemmArgs{TransA: transA, TransB: transB, M: m, N: n, K: k, Alpha: alpha, A: A, B: B, C: C, Batch: a.s.Heads}
	g.LDA, g.StrideA = pitch(aSquare)
	g.LDB, g.StrideB = pitch(bSquare)
	g.LDC, g.StrideC = pitch(cSquare)
	a.d.Gemm(g)
}

// probs computes p = softmax(scale q k^T + mask) of batch b into p
// ([H, T, T]). Unless saved, it also writes each row's log-sum-exp to lseB
// (batch b's [H, T] of lse); when saved it uses lseB: p = exp(s - lse).
func (a *attention) probs(p, q, k, lseB device.Buffer, b int, saved bool) {
	d, T, H, D := a.d, a.s.Seq, a.s.Heads, a.s.HeadDim
	a.gemm(false, true, T, T, D, a.scale, a.head(q, b), false, a.head(k, b), false, p, true)
	dims := device.DimsOf(H, T, T)
	pv := device.Contiguous(p, dims)
	d.BinaryStrided(device.Add, dims, p, pv, view(a.mask, 0, 0, T, 1))
	rowV := view(lseB, 0, T, 1, 0)
	if saved {
		d.BinaryStrided(device.Sub, dims, p, pv, rowV)
		d.Unary(device.Exp, p, p)
		return
	}
	mx := temp(d, "Attention", p.DType(), H*T)
	d.ReduceAxis(device.Max, mx, p, H*T, T, 1)
	d.BinaryStrided(device.Sub, dims, p, pv, view(mx, 0, T, 1, 0))
	d.Unary(device.Exp, p, p)
	d.ReduceAxis(device.Sum, lseB, p, H*T, T, 1)
	d.BinaryStrided(device.Div, dims, p, pv, rowV)
	d.Unary(device.Log, lseB, lseB)
	d.BinaryStrided(device.Add, device.DimsOf(H*T), lseB, flat(lseB), flat(mx))
	d.Free(mx)
}

// Attention is device.Attender's Attention on any backend.
func Attention(d device.Core, out, lse, q, k, v device.Buffer, s device.AttentionShape, scale float32) {
	if f, ok := d.(device.Attender); ok {
		f.Attention(out, lse, q, k, v, s, scale)
		return
	}
	const op = "Attention"
	T, H, D := s.Seq, s.Heads, s.HeadDim
	if s.Batch*T*H*D == 0 {
		return
	}
	a := newAttention(d, op, q.DType(), s, scale)
	p := temp(d, op, q.DType(), H*T*T)
	for b := range s.Batch {
		a.probs(p, q, k, lse.Slice(b*H*T, H*T), b, false)
		a.gemm(false, false, T, D, T, 1, p, true, a.head(v, b), false, a.head(out, b), false)
	}
	d.Free(p)
	d.Free(a.mask)
}

// AttentionBackward is device.Attender's AttentionBackward on any backend:
// with p recomputed from lse, dv = p^T dout, dp = dout v^T,
// ds = p * (dp - rowsum(dout * out)), dq = scale ds k, dk = scale ds^T q.
func AttentionBackward(d device.Core, dq, dk, dv, dout, q, k, v, out, lse device.Buffer, s device.AttentionShape, scale float32) {
	if f, ok := d.(device.Attender); ok {
		f.AttentionBackward(dq, dk, dv, dout, q, k, v, out, lse, s, scale)
		return
	}
	const op = "AttentionBackward"
	T, H, D := s.Seq, s.Heads, s.HeadDim
	if s.Batch*T*H*D == 0 {
		return
	}
	dt := q.DType()
	a := newAttention(d, op, dt, s, scale)
	p, dp := temp(d, op, dt, H*T*T), temp(d, op, dt, H*T*T)
	prod, rows := temp(d, op, dt, T*H*D), temp(d, op, dt, T*H)
	dims := device.DimsOf(H, T, T)
	for b := range s.Batch {
		a.probs(p, q, k, lse.Slice(b*H*T, H*T), b, true)
		a.gemm(true, false, T, D, T, 1, p, true, a.head(dout, b), false, a.head(dv, b), false)
		a.gemm(false, true, T, T, D, 1, a.head(dout, b), false, a.head(v, b), false, dp, true)
		d.BinaryStrided(device.Mul, device.DimsOf(T*H*D), prod, flat(a.head(dout, b)), flat(a.head(out, b)))
		d.ReduceAxis(device.Sum, rows, prod, T*H, D, 1) // rows[t, h]
		d.BinaryStrided(device.Sub, dims, dp, device.Contiguous(dp, dims), view(rows, 0, 1, H, 0))
		d.BinaryStrided(device.Mul, dims, dp, device.Contiguous(dp, dims), device.Contiguous(p, dims))
		a.gemm(false, false, T, D, T, scale, dp, true, a.head(k, b), false, a.head(dq, b), false)
		a.gemm(true, false, T, D, T, scale, dp, true, a.head(q, b), false, a.head(dk, b), false)
	}
	d.Free(p)
	d.Free(dp)
	d.Free(prod)
	d.Free(rows)
	d.Free(a.mask)
}
