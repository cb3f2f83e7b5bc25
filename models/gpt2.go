package models

import (
	"fmt"
	"math"

	"github.com/hilbert-ml/hilbert/autograd"
	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/nn"
	"github.com/hilbert-ml/hilbert/tensor"
)

// GPT2Config describes a GPT2.
type GPT2Config struct {
	// Layers is the number of blocks.
	Layers int
	// Dim is the model width; Heads must divide it.
	Dim   int
	Heads int
	// Vocab is the vocabulary size.
	Vocab int
	// Context is the number of learned positions (the longest sequence).
	Context int
	// Dropout is the drop probability of the embedding, attention output
	// and MLP output dropouts (0: none).
	Dropout float64
	// InitStd is the standard deviation of the weights' normal init
	// (GPT-2: 0.02); the residual projections use InitStd/sqrt(2*Layers).
	InitStd float64
	// DType is the parameters' dtype: float32 (the zero value) or float64
	// (reference runs on the CPU).
	DType device.DType
}

// gpt2Presets are GPT-2's four published shapes (vocab 50257, context
// 1024) and a tiny one for tests.
var gpt2Presets = map[string]GPT2Config{
	"gpt2":        {Layers: 12, Dim: 768, Heads: 12, Vocab: PaperVocab, Context: 1024, InitStd: 0.02},
	"gpt2-medium": {Layers: 24, Dim: 1024, Heads: 16, Vocab: PaperVocab, Context: 1024, InitStd: 0.02},
	"gpt2-large":  {Layers: 36, Dim: 1280, Heads: 20, Vocab: PaperVocab, Context: 1024, InitStd: 0.02},
	"gpt2-xl":     {Layers: 48, Dim: 1600, Heads: 25, Vocab: PaperVocab, Context: 1024, InitStd: 0.02},
	"gpt2-tiny":   {Layers: 2, Dim: 48, Heads: 3, Vocab: 64, Context: 16, InitStd: 0.02},
}

// GPT2Preset returns the named configuration: "gpt2" (124M parameters),
// "gpt2-medium" (350M), "gpt2-large" (774M), "gpt2-xl" (1558M) or
// "gpt2-tiny" (2 layers of width 48 in 3 heads of 16, for tests).
func GPT2Preset(name string) (GPT2Config, error) {
	return preset(gpt2Presets, "GPT-2 ", name)
}

// Validate reports a configuration that cannot be built.
func (c GPT2Config) Validate() error {
	switch {
	case c.Layers < 0 || c.Dim <= 0 || c.Heads <= 0 || c.Vocab <= 0 || c.Context <= 0:
		return fmt.Errorf("models: GPT-2 config %+v: sizes must be positive", c)
	case c.Dim%c.Heads != 0:
		return fmt.Errorf("models: GPT-2 config: %d heads do not divide dim %d", c.Heads, c.Dim)
	case c.Dropout < 0 || c.Dropout >= 1 || c.InitStd < 0:
		return fmt.Errorf("models: GPT-2 config: dropout %g (want [0, 1)), init std %g", c.Dropout, c.InitStd)
	}
	return nil
}

// NumParams returns the parameter count (the head is tied, so counted
// once): Layers*(12 Dim^2 + 13 Dim) + (Vocab + Context + 2) Dim.
func (c GPT2Config) NumParams() int {
	d := c.Dim
	return c.Layers*(12*d*d+13*d) + (c.Vocab+c.Context+2)*d
}

// GPT2Block is GPT-2's pre-LayerNorm block:
// x = x + Drop(Attn(LN1 x)); x = x + Drop(Proj(GELUTanh(FC(LN2 x)))).
type GPT2Block struct {
	LN1  nn.LayerNorm
	Attn nn.SelfAttention
	LN2  nn.LayerNorm
	FC   nn.Linear
	Proj nn.Linear
	Drop nn.Dropout
}

// GPT2 is the GPT-2 family: token and learned position embeddings, Layers
// blocks, a final LayerNorm and an LM head tied to the token embedding.
// Its parameter names are tok.weight, pos.weight,
// blocks.N.{ln1,ln2}.{weight,bias}, blocks.N.attn.{q,k,v,out}.{weight,bias},
// blocks.N.{fc,proj}.{weight,bias} and norm.{weight,bias}; head.weight is
// tok.weight (nn.Tied).
type GPT2 struct {
	Config GPT2Config `nn:"-"`
	Tok    nn.Embedding
	Pos    nn.Embedding
	Drop   nn.Dropout
	Blocks []GPT2Block
	Norm   nn.LayerNorm
	Head   nn.Linear

	causalLM
}

// NewGPT2 builds a GPT2 on dev with GPT-2's init from a generator seeded
// with seed: weights N(0, InitStd^2), the attention output and MLP
// projections N(0, InitStd^2/(2 Layers)), biases zero, LayerNorms one and
// zero. Dropouts start in training mode (nn.SetTraining switches them).
func NewGPT2(dev device.Device, cfg GPT2Config, seed uint64) (*GPT2, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	init := nn.NewInit(dev, seed, cfg.InitStd)
	init.DType = cfg.DType
	resid := 1 / math.Sqrt(2*float64(max(cfg.Layers, 1)))
	d := cfg.Dim
	drop := func(i uint64) nn.Dropout {
		return nn.Dropout{P: cfg.Dropout, Seed: seed ^ (0x9e3779b97f4a7c15 * (i + 1))}
	}
	m := &GPT2{Config: cfg, Drop: drop(0)}
	m.Tok = nn.NewEmbedding(init, cfg.Vocab, d)
	m.Pos = nn.NewEmbedding(init, cfg.Context, d)
	m.Blocks = make([]GPT2Block, cfg.Layers)
	for i := range m.Blocks {
		b := &m.Blocks[i]
		b.LN1 = nn.NewLayerNorm(init, d, true)
		b.Attn = nn.NewSelfAttention(init, d, nn.AttentionOptions{Heads: cfg.Heads, Bias: true, Causal: true, OutScale: resid})
		b.LN2 = nn.NewLayerNorm(init, d, true)
		b.FC = nn.NewLinearBias(init, d, 4*d)
		b.Proj = nn.Linear{Weight: init.Scaled(resid, d, 4*d), Bias: init.Zeros(d)}
		b.Drop = drop(uint64(i + 1))
	}
	m.Norm = nn.NewLayerNorm(init, d, true)
	m.Head = nn.Linear{Weight: m.Tok.Weight}
	if err := init.Err(); err != nil {
		return nil, fmt.Errorf("models: %w", err)
	}
	m.causalLM = newCausalLM(m, "GPT2", m.Tok.Weight,
		decoder{layers: cfg.Layers, dim: d, context: cfg.Context, head: &m.Head, trunk: m.trunk})
	return m, nil
}

// trunk returns the final-norm hidden states [B, T, Dim] of inputs
// (decoder.trunk).
func (m *GPT2) trunk(g *autograd.Graph, inputs *tensor.Tensor, pos int, cache *nn.KVCache) *tensor.Tensor {
	x := g.Add(m.Tok.Forward(g, inputs), g.Slice(m.Pos.Weight, 0, pos, pos+inputs.Dim(1)))
	x = m.Drop.Forward(g, x)
	for i := range m.Blocks {
		bl := &m.Blocks[i]
		x = g.Add(x, bl.Drop.Forward(g, bl.Attn.ForwardCached(g, bl.LN1.Forward(g, x), cache, i)))
		h := bl.Proj.Forward(g, bl.FC.ForwardAct(g, bl.LN2.Forward(g, x), nn.GELUTanh))
		x = g.Add(x, bl.Drop.Forward(g, h))
	}
	return m.Norm.Forward(g, x)
}
