package nn

import (
	"cmp"
	"fmt"
	"math"
	"slices"

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
	if cache != nil {
		k, v = cache.Append(g, layer, k, v)
	}
	k, v = a.repeatKV(g, k), a.repeatKV(g, v)
	scale := 1 / math.Sqrt(float64(a.HeadDim))
	var o *tensor.Tensor
	if a.Causal && g.Err() == nil { // keys pos+t long with a cache: prefix attention
		o = g.Attention(q, k, v, scale)
	} else {
		o = composedAttention(g, q, k, v, scale, a.Causal, pos, nil)
	}
	return a.Out.Forward(g, g.Reshape(o, b, t, a.Heads*a.HeadDim))
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

// KVCache holds the keys and values of every attention layer of a model
// for the positions generated so far, so that each new token costs one
// position of projections and MLP rather than the whole prefix. It is
// used with graphs whose recording is off. Its tensors outlive graph
// Resets; Release frees them.
//
// Any attention can use it, not only SelfAttention: given the new
// positions x of layer l, an attention reads pos := cache.Len(l) (where x
// starts), projects its keys and values k, v [B, T, H, D] (rotated for
// positions pos onwards, if it rotates), and attends with the keys and
// values cache.Append(g, l, k, v) returns, query i at position pos+i (so
// a causal mask lets it see keys 0..pos+i). models.Generate then runs the
// model one new token at a time (see the user-attention example in
// models).
type KVCache struct {
	k, v []*tensor.Tensor // per layer, [B, T, H, D], or nil
}

// NewKVCache returns an empty cache for layers attention layers.
func NewKVCache(layers int) *KVCache {
	return &KVCache{k: make([]*tensor.Tensor, layers), v: make([]*tensor.Tensor, layers)}
}

// Layers returns the number of attention layers the cache holds.
func (c *KVCache) Layers() int { return len(c.k) }

// Len returns the number of cached positions of layer (0 for a layer out
// of range).
func (c *KVCache) Len(layer int) int {
	if layer < 0 || layer >= len(c.k) || c.k[layer] == nil {
		return 0
	}
	return c.k[layer].Dim(1)
}

// check reports why layer's cache cannot be used in g.
func (c *KVCache) check(g *autograd.Graph, layer int) error {
	if layer < 0 || layer >= len(c.k) {
		return fmt.Errorf("layer %d of a KV cache of %d layers", layer, len(c.k))
	}
	if !g.NoGrad() {
		return fmt.Errorf("a KV cache needs a graph with recording off (SetNoGrad(true))")
	}
	return nil
}

// Append joins k, v [B, T, H, D] (the keys and values of the positions
// Len(layer) onwards) to layer's cache and returns all cached keys and
// values, [B, Len(layer), H, D] after the call: graph tensors, valid until
// the graph's Reset (the cache keeps its own references). A layer out of
// range, a graph that records, or keys and values whose shapes do not
// join fail the graph (g.Err names the problem) and return nils.
func (c *KVCache) Append(g *autograd.Graph, layer int, k, v *tensor.Tensor) (*tensor.Tensor, *tensor.Tensor) {
	if g.Err() != nil {
		return nil, nil
	}
	if err := c.check(g, layer); err != nil {
		g.Fail(fmt.Errorf("nn: KVCache.Append: %w", err))
		return nil, nil
	}
	if k == nil || v == nil || k.Rank() != 4 || !slices.Equal(k.Shape(), v.Shape()) {
		g.Fail(fmt.Errorf("nn: KVCache.Append: keys %v and values %v, want equal shapes [B, T, H, D]", tensor.ShapeOf(k), tensor.ShapeOf(v)))
		return nil, nil
	}
	join := func(old, x *tensor.Tensor) *tensor.Tensor {
		if old == nil {
			return g.Slice(x, 1, 0, x.Dim(1)) // a graph-owned copy
		}
		return g.Concat(1, old, x)
	}
	ka, va := join(c.k[layer], k), join(c.v[layer], v)
	if ka == nil || va == nil {
		return nil, nil
	}
	// The cache takes the joined tensors out of the graph's ownership, so
	// they survive its Reset; the previous ones are no longer used, and
	// go back to the device rather than the pool: their length, one
	// position short of the new ones', is not asked for again.
	g.Keep(ka)
	g.Keep(va)
	if c.k[layer] != nil {
		c.k[layer].Free()
		c.v[layer].Free()
	}
	c.k[layer], c.v[layer] = ka, va
	return ka, va
}

// Release frees the cached tensors (to the device, not the pool); the
// cache is empty afterwards.
func (c *KVCache) Release() {
	for i := range c.k {
		if c.k[i] != nil {
			c.k[i].Free()
			c.v[i].Free()
			c.k[i], c.v[i] = nil, nil
		}
	}
}
