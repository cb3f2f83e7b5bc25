package nn

import (
	"cmp"
	"fmt"
	"math"

	"github.com/hilbert-ml/hilbert/autograd"
	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/tensor"
)

// AttentionOptions configures a SelfAttention.
type AttentionOptions struct {
	// Heads is the number of heads; the model width must be a multiple
	// of it unless HeadDim is set.
	Heads int
	// KVHeads is the number of key and value heads (0: Heads); it must
	// divide Heads, each serving Heads/KVHeads consecutive query heads
	// (grouped-query attention; a KV cache holds the KVHeads).
	KVHeads int
	// HeadDim is the width of one head (0: the model width / Heads); the
	// queries and the output projection's input are Heads*HeadDim wide.
	HeadDim int
	// Bias gives the four projections biases (GPT-2's); QKVBias gives
	// them to q, k and v alone (Qwen2's), OutBias to the output alone.
	Bias, QKVBias, OutBias bool
	// Causal lets position t attend to positions <= t only.
	Causal bool
	// QKNorm RMS-normalises each query and key head (no gain) before
	// RoPE.
	QKNorm bool
	// RoPE, when set, rotates queries and keys by position.
	RoPE *RoPE
	// OutScale scales the init std of the output projection (GPT-2:
	// 1/sqrt(2*layers)); zero means 1.
	OutScale float64
}

// SelfAttention is multi-head self-attention built from nn parts: Q, K, V
// and Out projections of dim x dim, heads of dim/Heads, optional QK-norm
// and RoPE, scores scaled by 1/sqrt(headDim); or grouped-query attention
// with KVHeads key and value heads, each repeated for Heads/KVHeads query
// heads after the KV cache (which holds them unrepeated). Causal attention, over a
// whole sequence or the new positions after a KV cache's prefix, runs the
// fused attention op (autograd.Attention, the backend's kernel or its
// composition); non-causal attention and additive and key-padding masks
// (ForwardMasked, PaddingMask) run a composition of matrix products and a
// softmax.
type SelfAttention struct {
	Q, K, V, Out Linear
	Heads        int
	// KVHeads is the number of key and value heads (0: Heads).
	KVHeads int
	HeadDim int
	Causal  bool
	// QKNorm, when set, normalises each query and key head.
	QKNorm *RMSNorm
	// RoPE is shared by every block of a model.
	RoPE *RoPE `nn:"-"`
}

// NewSelfAttention returns attention over dim features.
func NewSelfAttention(init *Init, dim int, opt AttentionOptions) SelfAttention {
	switch kv := cmp.Or(opt.KVHeads, opt.Heads); {
	case opt.Heads <= 0 || (opt.HeadDim == 0 && dim%opt.Heads != 0):
		init.fail(fmt.Errorf("nn: SelfAttention: dim %d is not a multiple of %d heads", dim, opt.Heads))
		opt.Heads, opt.KVHeads, opt.HeadDim = 1, 0, 0
	case kv <= 0 || opt.Heads%kv != 0 || opt.HeadDim < 0:
		init.fail(fmt.Errorf("nn: SelfAttention: %d KV heads for %d heads, head dim %d: want KV heads dividing heads", kv, opt.Heads, opt.HeadDim))
		opt.KVHeads, opt.HeadDim = 0, 0
	}
	hd, kv := cmp.Or(opt.HeadDim, dim/opt.Heads), cmp.Or(opt.KVHeads, opt.Heads)
	lin := func(in, out int, scale float64, bias bool) Linear {
		l := Linear{Weight: init.Scaled(scale, out, in)}
		if bias {
			l.Bias = init.Zeros(out)
		}
		return l
	}
	q, qkvBias := opt.Heads*hd, opt.Bias || opt.QKVBias
	a := SelfAttention{Q: lin(dim, q, 1, qkvBias), K: lin(dim, kv*hd, 1, qkvBias), V: lin(dim, kv*hd, 1, qkvBias),
		Out:   lin(q, dim, cmp.Or(opt.OutScale, 1), opt.Bias || opt.OutBias),
		Heads: opt.Heads, KVHeads: kv, HeadDim: hd, Causal: opt.Causal, RoPE: opt.RoPE}
	if opt.QKNorm {
		a.QKNorm = &RMSNorm{}
	}
	return a
}

// Forward maps x [B, T, dim] to [B, T, dim].
func (a *SelfAttention) Forward(g *autograd.Graph, x *tensor.Tensor) *tensor.Tensor {
	return a.ForwardCached(g, x, nil, 0)
}

// ForwardMasked is Forward with an additive mask on the scores: mask
// broadcasts against the scores [B, Heads, T, T] (query rows, key
// columns), so [T, T] is one mask for every sequence and [B, 1, 1, T]
// masks keys per sequence (PaddingMask); -Inf removes a key. With Causal
// set the causal mask applies as well. It runs the composed attention.
func (a *SelfAttention) ForwardMasked(g *autograd.Graph, x, mask *tensor.Tensor) *tensor.Tensor {
	b, t, ok := dims3(g, "SelfAttention", x, a.width())
	if !ok {
		return nil
	}
	if mask == nil || mask.Rank() < 2 || mask.Rank() > 4 || mask.DType() != x.DType() {
		g.Fail(fmt.Errorf("nn: SelfAttention: mask %v: want %v of rank 2 to 4 broadcasting to the scores [%d %d %d %d]", tensor.ShapeOf(mask), x.DType(), b, a.Heads, t, t))
		return nil
	}
	q, k, v := a.qkv(g, x, 0)
	o := composedAttention(g, q, a.repeatKV(g, k), a.repeatKV(g, v), 1/math.Sqrt(float64(a.HeadDim)), a.Causal, 0, mask)
	return a.Out.Forward(g, g.Reshape(o, b, t, a.Heads*a.HeadDim))
}

// PaddingMask returns the additive key-padding mask [B, 1, 1, T] of dtype
// (the model's: float32, also the zero value, or float64) for sequences of
// the given lengths padded to t: 0 on the first lengths[b] keys of
// sequence b, -Inf after.
func PaddingMask(dev device.Device, dtype device.DType, lengths []int, t int) (*tensor.Tensor, error) {
	m := make([]float64, len(lengths)*t)
	for b, n := range lengths {
		if n < 1 || n > t {
			return nil, fmt.Errorf("nn: PaddingMask: sequence %d has length %d, want 1..%d", b, n, t)
		}
		for j := n; j < t; j++ {
			m[b*t+j] = math.Inf(-1)
		}
	}
	switch dtype {
	case 0, device.Float32:
		f := make([]float32, len(m))
		for i, v := range m {
			f[i] = float32(v)
		}
		return tensor.FromFloat32(dev, f, len(lengths), 1, 1, t)
	case device.Float64:
		return tensor.FromFloat64(dev, m, len(lengths), 1, 1, t)
	}
	return nil, fmt.Errorf("nn: PaddingMask: dtype %v (want float32 or float64)", dtype)
}

// width returns the model width the attention maps: its queries' input
// features (Heads*HeadDim while Q has no weight matrix).
func (a *SelfAttention) width() int {
	if w := a.Q.Weight; w != nil && w.Rank() == 2 {
		return w.Dim(1)
	}
	return a.Heads * a.HeadDim
}

// qkv returns the query, key and value heads of x [B, T, dim] (positions
// pos on): [B, T, Heads, HeadDim] and twice [B, T, KVHeads, HeadDim].
func (a *SelfAttention) qkv(g *autograd.Graph, x *tensor.Tensor, pos int) (q, k, v *tensor.Tensor) {
	kv := cmp.Or(a.KVHeads, a.Heads)
	return a.heads(g, x, &a.Q, a.Heads, true, pos), a.heads(g, x, &a.K, kv, true, pos), a.heads(g, x, &a.V, kv, false, pos)
}

// repeatKV repeats each of the KVHeads heads of x [B, T, KVHeads, D]
// Heads/KVHeads times in place: [B, T, Heads, D] (Hugging Face's
// repeat_kv).
func (a *SelfAttention) repeatKV(g *autograd.Graph, x *tensor.Tensor) *tensor.Tensor {
	kv := cmp.Or(a.KVHeads, a.Heads)
	if kv == a.Heads || g.Err() != nil {
		return x
	}
	b, t := x.Dim(0), x.Dim(1)
	x = g.BroadcastTo(g.Reshape(x, b, t, kv, 1, a.HeadDim), b, t, kv, a.Heads/kv, a.HeadDim)
	return g.Reshape(x, b, t, a.Heads, a.HeadDim)
}

// heads projects x [B, T, dim] by l into n heads [B, T, n, HeadDim],
// QK-normalised and rotated (as positions pos on) when rotate is set.
func (a *SelfAttention) heads(g *autograd.Graph, x *tensor.Tensor, l *Linear, n int, rotate bool, pos int) *tensor.Tensor {
	y := g.Reshape(l.Forward(g, x), x.Dim(0), x.Dim(1), n, a.HeadDim)
	if rotate && a.QKNorm != nil {
		y = a.QKNorm.Forward(g, y)
	}
	if rotate && a.RoPE != nil {
		y = a.RoPE.At(g, y, pos)
	}
	return y
}

// ForwardCached is Forward for generation: x [B, T, dim] holds positions
// cache.Len(layer) onwards, whose keys and values are appended to layer
// layer of cache, and attention runs over every cached position. A nil
// cache is Forward.
func (a *SelfAttention) ForwardCached(g *autograd.Graph, x *tensor.Tensor, cache *KVCache, layer int) *tensor.Tensor {
	b, t, ok := dims3(g, "SelfAttention", x, a.width())
	if !ok {
		return nil
	}
	pos := 0
	if cache != nil {
		if err := cache.check(g, layer); err != nil {
			g.Fail(fmt.Errorf("nn: SelfAttention: %w", err))
			return nil
		}
		pos = cache.Len(layer)
	}
	q, k, v := a.qkv(g, x, pos)
	var o *tensor.Tensor
	if cache == nil || pos == 0 {
		// No cache, or an empty one (a prompt's first pass): the keys and
		// values are k and v, attended in one call over the batch.
		o = a.attend(g, q, k, v, pos)
		if cache != nil {
			cache.write(g, layer, k, v)
		}
	} else if cache.write(g, layer, k, v) {
		// Each row of the batch attends over its part of the cache where
		// it is, rather than over a copy of the whole cache joined into
		// one tensor (Append's result when B > 1).
		rows := make([]*tensor.Tensor, b)
		for r := range rows {
			kr, vr := cache.row(layer, r)
			rows[r] = a.attend(g, part(g, q, r), kr, vr, pos)
		}
		o = rows[0]
		if b > 1 {
			o = g.Concat(0, rows...)
		}
	}
	return a.Out.Forward(g, g.Reshape(o, b, t, a.Heads*a.HeadDim))
}

// attend returns the attention of q [B, T, Heads, HeadDim] (positions
// pos on) over k and v [B, Tk, KVHeads, HeadDim]. The fused attention
// takes grouped keys and values as they are.
func (a *SelfAttention) attend(g *autograd.Graph, q, k, v *tensor.Tensor, pos int) *tensor.Tensor {
	scale := 1 / math.Sqrt(float64(a.HeadDim))
	if a.Causal && g.Err() == nil { // keys pos+t long with a cache: prefix attention
		return g.Attention(q, k, v, scale)
	}
	return composedAttention(g, q, a.repeatKV(g, k), a.repeatKV(g, v), scale, a.Causal, pos, nil)
}

// part returns row r of x [B, ...] as a view [1, ...], failing g on
// error.
func part(g *autograd.Graph, x *tensor.Tensor, r int) *tensor.Tensor {
	if g.Err() != nil {
		return nil
	}
	shape := x.Shape()
	shape[0] = 1
	p, err := x.Part(r*shape.Numel(), shape...)
	if err != nil {
		g.Fail(fmt.Errorf("nn: %w", err))
	}
	return p
}

// composedAttention is softmax(q k^T * scale + mask) v for q [B, Tq, H, D]
// and k, v [B, Tk, H, D], with extra (nil: none) an additive mask
// broadcasting to the scores [B, H, Tq, Tk]; with causal set, query i (at
// position pos+i) sees keys 0..pos+i.
func composedAttention(g *autograd.Graph, q, k, v *tensor.Tensor, scale float64, causal bool, pos int, extra *tensor.Tensor) *tensor.Tensor {
	if g.Err() != nil {
		return nil
	}
	tq, tk := q.Dim(1), k.Dim(1)
	qh, kh, vh := g.Permute(q, 0, 2, 1, 3), g.Permute(k, 0, 2, 1, 3), g.Permute(v, 0, 2, 1, 3)
	s := g.Mul(g.MatMul(qh, kh, false, true), g.Constant(scale, q.DType()))
	if causal && pos+tq > 1 && tq > 1 {
		mask := g.BroadcastTo(g.Constant(0, q.DType()), tq, tk)
		if mask == nil {
			return nil
		}
		m := make([]float32, tq*tk)
		for i := range tq {
			for j := pos + i + 1; j < tk; j++ {
				m[i*tk+j] = float32(math.Inf(-1))
			}
		}
		g.Device().CopyFromHost(mask.Buffer(), m)
		s = g.Add(s, mask)
	}
	if extra != nil {
		s = g.Add(s, extra)
	}
	o := g.MatMul(g.Softmax(s, 3), vh, false, false)
	return g.Permute(o, 0, 2, 1, 3)
}
