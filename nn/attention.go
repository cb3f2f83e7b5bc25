package nn

import (
	"fmt"
	"math"

	"github.com/hilbert-ml/hilbert/autograd"
	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/tensor"
)

// RoPE holds half-split rotary position tables for up to MaxSeq positions
// (built once per model). It has no parameters.
type RoPE struct {
	cos, sin        *tensor.Tensor
	maxSeq, headDim int
}

// NewRoPE builds the tables for positions 0..maxSeq-1 and head dimension
// headDim with angle(t, j) = t * base^(-2j/headDim).
func NewRoPE(dev device.Device, maxSeq, headDim int, base float64) (*RoPE, error) {
	if headDim <= 0 || headDim%2 != 0 || maxSeq <= 0 {
		return nil, fmt.Errorf("nn: RoPE: head dim %d (want even, > 0), max seq %d", headDim, maxSeq)
	}
	cos, sin, err := autograd.RoPETables(dev, maxSeq, headDim, base)
	if err != nil {
		return nil, fmt.Errorf("nn: RoPE tables: %w", err)
	}
	return &RoPE{cos: cos, sin: sin, maxSeq: maxSeq, headDim: headDim}, nil
}

// MaxSeq returns the number of positions the tables cover.
func (r *RoPE) MaxSeq() int { return r.maxSeq }

// Forward rotates x [B, T, H, D] by position (T <= MaxSeq).
func (r *RoPE) Forward(g *autograd.Graph, x *tensor.Tensor) *tensor.Tensor {
	return g.RoPE(x, r.cos, r.sin)
}

// Attention is causal multi-head self-attention without biases: q, k, v
// and out projections of dim x dim; q and k are split into heads of
// HeadDim, each head RMS-normalised (QKNorm, no gain) and then rotated by
// RoPE; v is not normalised; scores are scaled by 1/sqrt(HeadDim).
type Attention struct {
	Q, K, V, Out Linear
	// QKNorm normalises each query and key head before RoPE.
	QKNorm  RMSNorm
	Heads   int
	HeadDim int
	// RoPE is shared by every block of a model.
	RoPE *RoPE `nn:"-"`
}

// NewAttention returns attention over dim features in heads of headDim
// (dim must be a multiple of headDim), rotating with rope.
func NewAttention(init *Init, dim, headDim int, rope *RoPE) Attention {
	if headDim <= 0 || dim%headDim != 0 {
		init.fail(fmt.Errorf("nn: Attention: dim %d is not a multiple of head dim %d", dim, headDim))
	}
	return Attention{
		Q: NewLinear(init, dim, dim), K: NewLinear(init, dim, dim),
		V: NewLinear(init, dim, dim), Out: NewLinear(init, dim, dim),
		Heads: dim / max(headDim, 1), HeadDim: headDim, RoPE: rope,
	}
}

// Forward maps x [B, T, dim] to [B, T, dim].
func (a *Attention) Forward(g *autograd.Graph, x *tensor.Tensor) *tensor.Tensor {
	dim := a.Heads * a.HeadDim
	b, t, ok := dims3(g, "Attention", x, dim)
	if !ok {
		return nil
	}
	heads := func(l *Linear, norm bool) *tensor.Tensor {
		y := g.Reshape(l.Forward(g, x), b, t, a.Heads, a.HeadDim)
		if norm {
			y = a.RoPE.Forward(g, a.QKNorm.Forward(g, y))
		}
		return y
	}
	q, k, v := heads(&a.Q, true), heads(&a.K, true), heads(&a.V, false)
	o := g.Attention(q, k, v, float32(1/math.Sqrt(float64(a.HeadDim))))
	return a.Out.Forward(g, g.Reshape(o, b, t, dim))
}

// MLP is the SwiGLU feed-forward block Down(SiLU(Gate x) * Up x), with
// Gate and Up of dim -> hidden and Down of hidden -> dim, no biases.
type MLP struct {
	Gate, Up, Down Linear
}

// NewMLP returns a SwiGLU MLP with the given hidden width (the paper uses
// 4*dim).
func NewMLP(init *Init, dim, hidden int) MLP {
	return MLP{Gate: NewLinear(init, dim, hidden), Up: NewLinear(init, dim, hidden), Down: NewLinear(init, hidden, dim)}
}

// Forward maps x [..., dim] to [..., dim].
func (m *MLP) Forward(g *autograd.Graph, x *tensor.Tensor) *tensor.Tensor {
	return m.Down.Forward(g, g.SwiGLU(m.Gate.Forward(g, x), m.Up.Forward(g, x)))
}

// Block is the pre-norm transformer block:
// x = x + Attn(N(x)); x = x + MLP(N(x)), N an RMSNorm without gain.
type Block struct {
	Attn Attention
	MLP  MLP
	Norm RMSNorm
}

// NewBlock returns a block of width dim with heads of headDim and an MLP
// of hidden width mlpHidden.
func NewBlock(init *Init, dim, headDim, mlpHidden int, rope *RoPE) Block {
	return Block{Attn: NewAttention(init, dim, headDim, rope), MLP: NewMLP(init, dim, mlpHidden)}
}

// Forward maps x [B, T, dim] to [B, T, dim].
func (bl *Block) Forward(g *autograd.Graph, x *tensor.Tensor) *tensor.Tensor {
	x = g.Add(x, bl.Attn.Forward(g, bl.Norm.Forward(g, x)))
	return g.Add(x, bl.MLP.Forward(g, bl.Norm.Forward(g, x)))
}

// ForwardCached is Forward for generation with a KV cache (see
// SelfAttention.ForwardCached); a nil cache is Forward.
func (a *Attention) ForwardCached(g *autograd.Graph, x *tensor.Tensor, cache *KVCache, layer int) *tensor.Tensor {
	if cache == nil {
		return a.Forward(g, x)
	}
	sa := SelfAttention{Q: a.Q, K: a.K, V: a.V, Out: a.Out, Heads: a.Heads, HeadDim: a.HeadDim,
		Causal: true, QKNorm: &a.QKNorm, RoPE: a.RoPE}
	return sa.ForwardCached(g, x, cache, layer)
}

// ForwardCached is Forward for generation with a KV cache, the block
// being layer layer of the cache; a nil cache is Forward.
func (bl *Block) ForwardCached(g *autograd.Graph, x *tensor.Tensor, cache *KVCache, layer int) *tensor.Tensor {
	if cache == nil {
		return bl.Forward(g, x)
	}
	x = g.Add(x, bl.Attn.ForwardCached(g, bl.Norm.Forward(g, x), cache, layer))
	return g.Add(x, bl.MLP.Forward(g, bl.Norm.Forward(g, x)))
}
