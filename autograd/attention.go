package autograd

import (
	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/compose"
	"github.com/hilbert-ml/hilbert/tensor"
)

// CrossAttention returns unmasked scaled-dot-product attention of
// q [B, Tq, H, D] over k and v [B, Tk, Hkv, D] (Hkv dividing H, as in
// Attention), Tk >= 1 of any length: every query sees every key, as in an encoder-decoder's cross-attention or a
// bidirectional encoder; the result has q's layout. scale multiplies the
// scores. It runs the backend's fused kernel where it has one for the
// shape (the CPU's; CUDA's self-attention kernels are causal, so CUDA
// runs the composition), the composition from the Core otherwise.
func (g *Graph) CrossAttention(q, k, v *tensor.Tensor, scale float64) *tensor.Tensor {
	return g.attention("CrossAttention", q, k, v, scale, true)
}

// attention is Attention (causal) and CrossAttention (unmasked).
func (g *Graph) attention(op string, q, k, v *tensor.Tensor, scale float64, unmasked bool) *tensor.Tensor {
	if !g.ok(op, q, k, v) {
		return nil
	}
	if q.Rank() != 4 || k.Rank() != 4 || !k.SameShape(v) || k.Dim(0) != q.Dim(0) || k.Dim(2) != q.Dim(2) && (k.Dim(2) == 0 || q.Dim(2)%k.Dim(2) != 0) || k.Dim(3) != q.Dim(3) {
		return g.failf("%s: q %v, k %v, v %v: want q [batch, seq, heads, headDim] and k, v [batch, keys, kvHeads, headDim] with q's batch and headDim, kvHeads dividing heads", op, q.Shape(), k.Shape(), v.Shape())
	}
	// Float32 takes the backend's kernel (or the composition); float64
	// the composition from the core, whose products run in float64.
	if !isFloat(q) || k.DType() != q.DType() || v.DType() != q.DType() {
		return g.failf("%s: q %v, k %v, v %v: want one float dtype (float32 or float64)", op, q.DType(), k.DType(), v.DType())
	}
	s32 := float32(scale)
	if q.DType() != device.Float32 && float64(s32) != scale {
		// The kernels take a float32 scale: apply this one to q exactly.
		return g.attention(op, g.Mul(q, g.Constant(scale, q.DType())), k, v, 1, unmasked)
	}
	s := g.attentionShape(q)
	s.KVSeq, s.Unmasked = k.Dim(1), unmasked
	if k.Dim(2) != s.Heads {
		s.KVHeads = k.Dim(2)
	}
	switch {
	case s.Seq > 0 && s.KVSeq == 0:
		return g.failf("%s: q %v over k and v %v: no keys for %d queries", op, q.Shape(), k.Shape(), s.Seq)
	case !unmasked && s.KVSeq < s.Seq:
		return g.failf("%s: q %v over k and v %v: causal attention wants at least as many keys as queries (the queries are the last positions of the keys' sequence); CrossAttention is unmasked", op, q.Shape(), k.Shape())
	}
	if err := s.Check(); err != nil {
		return g.failf("%s: %v", op, err)
	}
	out := g.allocOf(op, q.DType(), q.Shape()...)
	lse := g.allocOf(op, q.DType(), s.Batch, s.Heads, s.Seq)
	if out == nil || lse == nil {
		return nil
	}
	compose.Attention(g.kernels(q.DType()), out.Buffer(), lse.Buffer(), q.Buffer(), k.Buffer(), v.Buffer(), s, s32)
	return g.recorded(node{op: attentionOp{}, out: out, in: [3]*tensor.Tensor{q, k, v}, saved: [3]*tensor.Tensor{lse}, f64: float64(s32), shape: s})
}

// attentionOp is a recorded Attention or CrossAttention (f64 the float32
// scale, saved[0] the log-sum-exp rows). Its backward is the fused
// capability's (flash attention's recomputation on the CPU and CUDA):
// in Graph ops it would hold the T x T probabilities.
type attentionOp struct{}

func (attentionOp) name() string      { return "Attention" }
func (attentionOp) reads(*node) slots { return in0 | in1 | in2 | output }
func (attentionOp) backward(g *Graph, n *node, gout *tensor.Tensor) {
	q, k, v := n.in[0], n.in[1], n.in[2]
	dq, dk, dv := g.scratchLike(q, q.Shape()...), g.scratchLike(k, k.Shape()...), g.scratchLike(v, v.Shape()...)
	compose.AttentionBackward(g.kernels(q.DType()), dq.Buffer(), dk.Buffer(), dv.Buffer(), gout.Buffer(),
		q.Buffer(), k.Buffer(), v.Buffer(), n.out.Buffer(), n.saved[0].Buffer(), n.shape, float32(n.f64))
	g.accumulate(q, dq)
	g.accumulate(k, dk)
	g.accumulate(v, dv)
}
