package models

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

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
	c, ok := gpt2Presets[name]
	if !ok {
		return GPT2Config{}, fmt.Errorf("models: unknown GPT-2 preset %q (have %s)", name, strings.Join(slices.Sorted(maps.Keys(gpt2Presets)), ", "))
	}
	return c, nil
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

	params []*tensor.Tensor
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
	m.params = nn.Parameters(m)
	return m, nil
}

// Parameters returns the model's parameters, named, in a stable order
// (the tied head once, as tok.weight).
func (m *GPT2) Parameters() []*tensor.Tensor { return m.params }

// Forward runs the model on inputs [B, T] (int32 token ids, T <= Context)
// and returns the logits [B, T, Vocab] and, when targets [B, T] is not
// nil, the mean next-token cross-entropy. Errors are recorded in g (check
// g.Err); on error both results are nil.
func (m *GPT2) Forward(g *autograd.Graph, inputs, targets *tensor.Tensor) (logits, loss *tensor.Tensor) {
	logits = m.ForwardCached(g, inputs, nil)
	if logits == nil || targets == nil {
		return logits, nil
	}
	return logits, crossEntropy(g, "GPT2", logits, inputs, targets)
}

// Loss returns the mean next-token cross-entropy of inputs [B, T]
// against targets [B, T] with the head and the loss fused
// (autograd.LinearCrossEntropy), so the B*T x Vocab logits never exist
// whole: Forward's loss, for training at full vocabulary.
func (m *GPT2) Loss(g *autograd.Graph, inputs, targets *tensor.Tensor) *tensor.Tensor {
	loss, _ := m.LossHidden(g, inputs, targets)
	return loss
}

// LossHidden is Loss that also returns the final-norm hidden states
// [B*T, Dim] the head reads (the trainer's Hilbert-RMS panel is taken from
// them).
func (m *GPT2) LossHidden(g *autograd.Graph, inputs, targets *tensor.Tensor) (loss, hidden *tensor.Tensor) {
	return headLoss(g, "GPT2", m.hidden(g, inputs, nil), inputs, targets, &m.Head, m.Config.Dim)
}

// ForwardCached runs inputs [B, T] as the positions after those already
// in cache (nil: none) and returns their logits [B, T, Vocab], appending
// their keys and values to the cache. A cache needs a graph with
// recording off.
func (m *GPT2) ForwardCached(g *autograd.Graph, inputs *tensor.Tensor, cache *nn.KVCache) *tensor.Tensor {
	h := m.hidden(g, inputs, cache)
	if h == nil {
		return nil
	}
	return m.Head.Forward(g, h)
}

// hidden returns the final-norm hidden states [B, T, Dim] of inputs.
func (m *GPT2) hidden(g *autograd.Graph, inputs *tensor.Tensor, cache *nn.KVCache) *tensor.Tensor {
	if g.Err() != nil {
		return nil
	}
	pos, ok := startPosition(g, "GPT2.Forward", inputs, cache, m.Config.Layers, m.Config.Context)
	if !ok {
		return nil
	}
	x := g.Add(m.Tok.Forward(g, inputs), g.Slice(m.Pos.Weight, 0, pos, pos+inputs.Dim(1)))
	x = m.Drop.Forward(g, x)
	for i := range m.Blocks {
		bl := &m.Blocks[i]
		x = g.Add(x, bl.Drop.Forward(g, bl.Attn.ForwardCached(g, bl.LN1.Forward(g, x), cache, i)))
		h := bl.Proj.Forward(g, nn.GELUTanh.Forward(g, bl.FC.Forward(g, bl.LN2.Forward(g, x))))
		x = g.Add(x, bl.Drop.Forward(g, h))
	}
	h := m.Norm.Forward(g, x)
	if g.Err() != nil {
		return nil
	}
	return h
}

// Layers returns the number of attention layers (the KV cache's size).
func (m *GPT2) Layers() int { return m.Config.Layers }

// ContextLen returns the longest sequence the model takes.
func (m *GPT2) ContextLen() int { return m.Config.Context }

// UntieHead gives the model a head of its own: a copy of the token
// embedding (the tied head's weight now), named head.weight among the
// Parameters, so an optimizer can update the two apart (RowNorm on the
// head). Called at initialisation it changes no output; a head already
// untied is an error.
func (m *GPT2) UntieHead() error {
	if err := untieHead("GPT2", &m.Head, m.Tok.Weight); err != nil {
		return err
	}
	m.params = nn.Parameters(m)
	return nil
}

// Save writes the model's parameters to a safetensors checkpoint at path
// (atomically), with metadata.
func (m *GPT2) Save(path string, metadata map[string]string) error {
	return nn.SaveTensors(path, m.params, metadata)
}

// Load reads the model's parameters from a safetensors checkpoint,
// checking every tensor's presence, dtype and shape before changing any,
// and returns the file's metadata.
func (m *GPT2) Load(path string) (map[string]string, error) {
	return nn.LoadTensors(path, m.params)
}
