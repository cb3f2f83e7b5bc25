package compose

import (
	"math"

	"github.com/hilbert-ml/hilbert/device"
)

// attention holds what the composed forward and backward share for one
// call: the heads' matrices of batch b are T x D (queries) or K x D (keys)
// blocks of a [B, T or K, H, D] array with row pitch H*D, one head D
// elements after the previous, so a batched Gemm over heads reaches them
// with stride D. The scores of batch b are [H, T, K].
type attention struct {
	d     device.Core
	s     device.AttentionShape
	scale float32
	mask  device.Buffer // [T, K]: 0 where query t sees key u, -Inf elsewhere; nil when unmasked
}

func newAttention(d device.Core, op string, dt device.DType, s device.AttentionShape, scale float32) *attention {
	a := &attention{d: d, s: s, scale: scale}
	if s.Unmasked {
		return a
	}
	T, K := s.Seq, s.Keys()
	m := make([]float64, T*K)
	for t := range T {
		for u := s.Visible(t); u < K; u++ {
			m[t*K+u] = math.Inf(-1)
		}
	}
	a.mask = temp(d, op, dt, T*K)
	d.CopyFloat64FromHost(a.mask, m)
	return a
}

// free releases the mask.
func (a *attention) free() {
	if a.mask != nil {
		a.d.Free(a.mask)
	}
}

// head returns batch b's block of a [B, T, H, D] buffer (keys: [B, K, H, D]).
func (a *attention) head(x device.Buffer, b int, keys bool) device.Buffer {
	n := a.s.Seq * a.s.Heads * a.s.HeadDim
	if keys {
		n = a.s.Keys() * a.s.Heads * a.s.HeadDim
	}
	return x.Slice(b*n, n)
}

// operand kinds of gemm: a [H, T, K] score block, or a head block.
const (
	scores = iota
	heads
)

// gemm runs C_h = alpha op(A_h) op(B_h) over the heads, where each operand
// is a [H, T, K] score block or a head block of batch b (kinds above).
func (a *attention) gemm(transA, transB bool, m, n, k int, alpha float32, A device.Buffer, aKind int,
	B device.Buffer, bKind int, C device.Buffer, cKind int) {
	T, K, HD, D := a.s.Seq, a.s.Keys(), a.s.Heads*a.s.HeadDim, a.s.HeadDim
	pitch := func(kind int) (ld, stride int) {
		if kind == scores {
			return K, T * K
		}
		return HD, D
	}
	g := device.GemmArgs{TransA: transA, TransB: transB, M: m, N: n, K: k, Alpha: alpha, A: A, B: B, C: C, Batch: a.s.Heads}
	g.LDA, g.StrideA = pitch(aKind)
	g.LDB, g.StrideB = pitch(bKind)
	g.LDC, g.StrideC = pitch(cKind)
	a.d.Gemm(g)
}

// probs computes p = softmax(scale q k^T + mask) of batch b into p
// ([H, T, K]). Unless saved, it also writes each row's log-sum-exp to lseB
// (batch b's [H, T] of lse); when saved it uses lseB: p = exp(s - lse).
func (a *attention) probs(p, q, k, lseB device.Buffer, b int, saved bool) {
	d, T, K, H, D := a.d, a.s.Seq, a.s.Keys(), a.s.Heads, a.s.HeadDim
	a.gemm(false, true, T, K, D, a.scale, a.head(q, b, false), heads, a.head(k, b, true), heads, p, scores)
	dims := device.DimsOf(H, T, K)
	pv := device.Contiguous(p, dims)
	if a.mask != nil {
		d.BinaryStrided(device.Add, dims, p, pv, view(a.mask, 0, 0, K, 1))
	}
	rowV := view(lseB, 0, T, 1, 0)
	if saved {
		d.BinaryStrided(device.Sub, dims, p, pv, rowV)
		d.Unary(device.Exp, p, p)
		return
	}
	mx := temp(d, "Attention", p.DType(), H*T)
	d.ReduceAxis(device.Max, mx, p, H*T, K, 1)
	d.BinaryStrided(device.Sub, dims, p, pv, view(mx, 0, T, 1, 0))
	d.Unary(device.Exp, p, p)
	d.ReduceAxis(device.Sum, lseB, p, H*T, K, 1)
	d.BinaryStrided(device.Div, dims, p, pv, rowV)
	d.Unary(device.Log, lseB, lseB)
	d.BinaryStrided(device.Add, device.DimsOf(H*T), lseB, flat(lseB), flat(mx))
	d.Free(mx)
}

// Attention is device.Attender's Attention on any backend.
func Attention(d device.Core, out, lse, q, k, v device.Buffer, s device.AttentionShape, scale float32) {
	if f, ok := d.(device.GroupedAttender); ok && s.Grouped() {
		f.Attention(out, lse, q, k, v, s, scale)
		return
	}
	if s.Grouped() {
		const op = "Attention"
		kf, vf := repeatHeads(d, op, k, s), repeatHeads(d, op, v, s)
		Attention(d, out, lse, q, kf, vf, ungrouped(s), scale)
		free(d, kf, vf)
		return
	}
	if f, ok := d.(device.Attender); ok {
		f.Attention(out, lse, q, k, v, s, scale)
		return
	}
	const op = "Attention"
	T, K, H, D := s.Seq, s.Keys(), s.Heads, s.HeadDim
	if s.Batch*T*K*H*D == 0 {
		return
	}
	a := newAttention(d, op, q.DType(), s, scale)
	p := temp(d, op, q.DType(), H*T*K)
	for b := range s.Batch {
		a.probs(p, q, k, lse.Slice(b*H*T, H*T), b, false)
		a.gemm(false, false, T, D, K, 1, p, scores, a.head(v, b, true), heads, a.head(out, b, false), heads)
	}
	d.Free(p)
	a.free()
}

// AttentionBackward is device.Attender's AttentionBackward on any backend:
// with p recomputed from lse, dv = p^T dout, dp = dout v^T,
// ds = p * (dp - rowsum(dout * out)), dq = scale ds k, dk = scale ds^T q.
func AttentionBackward(d device.Core, dq, dk, dv, dout, q, k, v, out, lse device.Buffer, s device.AttentionShape, scale float32) {
	if f, ok := d.(device.GroupedAttender); ok && s.Grouped() {
		f.AttentionBackward(dq, dk, dv, dout, q, k, v, out, lse, s, scale)
		return
	}
	if s.Grouped() {
		const op = "AttentionBackward"
		kf, vf := repeatHeads(d, op, k, s), repeatHeads(d, op, v, s)
		n := s.Batch * s.Keys() * s.Heads * s.HeadDim
		dkf, dvf := temp(d, op, k.DType(), n), temp(d, op, v.DType(), n)
		AttentionBackward(d, dq, dkf, dvf, dout, q, kf, vf, out, lse, ungrouped(s), scale)
		sumHeads(d, dk, dkf, s)
		sumHeads(d, dv, dvf, s)
		free(d, kf, vf, dkf, dvf)
		return
	}
	if f, ok := d.(device.Attender); ok {
		f.AttentionBackward(dq, dk, dv, dout, q, k, v, out, lse, s, scale)
		return
	}
	const op = "AttentionBackward"
	T, K, H, D := s.Seq, s.Keys(), s.Heads, s.HeadDim
	if s.Batch*T*K*H*D == 0 {
		if s.Batch*K*H*D != 0 { // no queries: no gradient reaches the keys
			d.Fill(dk, 0)
			d.Fill(dv, 0)
		}
		return
	}
	dt := q.DType()
	a := newAttention(d, op, dt, s, scale)
	p, dp := temp(d, op, dt, H*T*K), temp(d, op, dt, H*T*K)
	prod, rows := temp(d, op, dt, T*H*D), temp(d, op, dt, T*H)
	dims := device.DimsOf(H, T, K)
	for b := range s.Batch {
		a.probs(p, q, k, lse.Slice(b*H*T, H*T), b, true)
		a.gemm(true, false, K, D, T, 1, p, scores, a.head(dout, b, false), heads, a.head(dv, b, true), heads)
		a.gemm(false, true, T, K, D, 1, a.head(dout, b, false), heads, a.head(v, b, true), heads, dp, scores)
		d.BinaryStrided(device.Mul, device.DimsOf(T*H*D), prod, flat(a.head(dout, b, false)), flat(a.head(out, b, false)))
		d.ReduceAxis(device.Sum, rows, prod, T*H, D, 1) // rows[t, h]
		d.BinaryStrided(device.Sub, dims, dp, device.Contiguous(dp, dims), view(rows, 0, 1, H, 0))
		d.BinaryStrided(device.Mul, dims, dp, device.Contiguous(dp, dims), device.Contiguous(p, dims))
		a.gemm(false, false, T, D, K, scale, dp, scores, a.head(k, b, true), heads, a.head(dq, b, false), heads)
		a.gemm(true, false, K, D, T, scale, dp, scores, a.head(q, b, false), heads, a.head(dk, b, true), heads)
	}
	free(d, p, dp, prod, rows)
	a.free()
}

// ungrouped is s with every query head its own key and value head.
func ungrouped(s device.AttentionShape) device.AttentionShape {
	s.KVHeads = 0
	return s
}

// repeatHeads returns x, keys or values [B, K, KeyHeads, D] of a grouped
// shape s, with each head repeated for the s.Heads/KeyHeads query heads
// it serves: [B, K, Heads, D] in a temporary.
func repeatHeads(d device.Core, op string, x device.Buffer, s device.AttentionShape) device.Buffer {
	kh, D := s.KeyHeads(), s.HeadDim
	full := temp(d, op, x.DType(), s.Batch*s.Keys()*s.Heads*D)
	dims := device.DimsOf(s.Batch*s.Keys(), kh, s.Heads/kh, D)
	d.CopyStrided(dims, device.Contiguous(full, dims), view(x, 0, kh*D, D, 0, 1))
	return full
}

// sumHeads writes dst [B, K, KeyHeads, D] = the sum of full [B, K, Heads,
// D] over the query heads of each group: repeatHeads' gradient.
func sumHeads(d device.Core, dst, full device.Buffer, s device.AttentionShape) {
	kh := s.KeyHeads()
	d.ReduceAxis(device.Sum, dst, full, s.Batch*s.Keys()*kh, s.Heads/kh, s.HeadDim)
}
