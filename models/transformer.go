// Package models holds complete models built from package nn: the
// paper's decoder-only transformer (Transformer), with the paper's presets
// (190m, 380m, 640m), small presets for CPU work, and free configuration;
// the GPT-2 family (GPT2, with GPT-2's four shapes and a tiny test
// preset); and the Llama family (Llama: Hugging Face's Llama, Mistral and
// Qwen2 layout, with the shapes of a few public small models). All give
// logits (ForwardCached) and sample text with Generate, which runs a KV
// cache so each new token costs one position.
//
// This package builds on nn, autograd, tensor and device. It must not
// import optim, data or the trainer: they import it.
package models

import (
	"fmt"

	"github.com/hilbert-ml/hilbert/autograd"
	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/nn"
	"github.com/hilbert-ml/hilbert/tensor"
)

// Config describes a Transformer.
type Config struct {
	// Layers is the number of blocks.
	Layers int
	// Dim is the model width d.
	Dim int
	// HeadDim is the width of one attention head (the paper: 64);
	// Dim must be a multiple of it.
	HeadDim int
	// MLPHidden is the SwiGLU hidden width (the paper: 4*Dim).
	MLPHidden int
	// Vocab is the vocabulary size V.
	Vocab int
	// Context is the longest sequence (RoPE tables are built for it).
	Context int
	// RoPEBase is the rotary base (the paper: 10000).
	RoPEBase float64
	// InitStd is the standard deviation of every weight's normal init
	// (the paper: 0.02).
	InitStd float64
	// DType is the parameters' and activations' dtype: float32 (the zero
	// value, the paper's) or float64 (reference runs on the CPU: the same
	// initial numbers unrounded, RoPE tables and every scalar in float64).
	DType device.DType `json:",omitempty"`
}

// PaperVocab is the GPT-2 vocabulary size the paper uses.
const PaperVocab = 50257

// paper returns the paper's configuration of width d (32 layers, heads of
// 64, MLP 4d, vocab 50257, context 2048).
func paper(layers, d, context int) Config {
	return Config{Layers: layers, Dim: d, HeadDim: 64, MLPHidden: 4 * d, Vocab: PaperVocab,
		Context: context, RoPEBase: 10000, InitStd: 0.02}
}

// presets are the named configurations: the paper's three scales and two
// small ones for CPU work (same architecture and vocabulary, context 256).
var presets = map[string]Config{
	"190m":    paper(32, 512, 2048),
	"380m":    paper(32, 768, 2048),
	"640m":    paper(32, 1024, 2048),
	"cpu-128": paper(4, 128, 256),
	"cpu-256": paper(8, 256, 256),
}

// Preset returns the named configuration: "190m", "380m", "640m" (the
// paper's), "cpu-128" (d 128, 4 layers) or "cpu-256" (d 256, 8 layers).
func Preset(name string) (Config, error) {
	return preset(presets, "", name)
}

// PresetNames returns the preset names, sorted.
func PresetNames() []string {
	return presetNames(presets)
}

// Validate reports a configuration that cannot be built.
func (c Config) Validate() error {
	switch {
	case c.Layers < 0 || c.Dim <= 0 || c.Vocab <= 0 || c.Context <= 0 || c.MLPHidden <= 0:
		return fmt.Errorf("models: config %+v: sizes must be positive", c)
	case c.HeadDim <= 0 || c.HeadDim%2 != 0 || c.Dim%c.HeadDim != 0:
		return fmt.Errorf("models: config: head dim %d must be even and divide dim %d", c.HeadDim, c.Dim)
	case c.RoPEBase <= 0 || c.InitStd < 0:
		return fmt.Errorf("models: config: RoPE base %g, init std %g", c.RoPEBase, c.InitStd)
	}
	return checkDType(c.DType)
}

// checkDType refuses a model dtype other than float32 (or zero) and
// float64.
func checkDType(dt device.DType) error {
	if dt != 0 && dt != device.Float32 && dt != device.Float64 {
		return fmt.Errorf("models: config: DType %v (want float32 or float64)", dt)
	}
	return nil
}

// NumParams returns the parameter count of the configuration:
// Layers*(4 Dim^2 + 3 Dim MLPHidden) + 2 Vocab Dim (16 d^2 per block for
// the paper's 4d MLP).
func (c Config) NumParams() int {
	return c.Layers*(4*c.Dim*c.Dim+3*c.Dim*c.MLPHidden) + 2*c.Vocab*c.Dim
}

// TransformerBlock is the pre-norm block of the paper's Transformer and
// of Llama, AttnNorm and MLPNorm RMSNorms:
//
//	x = x + Attn(AttnNorm(x))
//	x = x + Down(SiLU(Gate(h)) * Up(h)),  h = MLPNorm(x)
//
// The paper's: both norms are N, an RMSNorm without gain (eps 1e-6), so
// without parameters. Attn is causal self-attention without biases: q, k,
// v and out of Dim x Dim, q and k split into heads of HeadDim, each head
// RMS-normalised (QK-norm, the same N) and then rotated by half-split
// RoPE; v is not normalised; scores scaled by 1/sqrt(HeadDim). The MLP is
// SwiGLU without biases: Gate and Up of Dim -> MLPHidden, Down of
// MLPHidden -> Dim.
//
// Llama's: both norms have a gain. Attn is causal grouped-query
// self-attention: Q of Dim -> Heads*HeadDim, K and V of
// Dim -> KVHeads*HeadDim, queries and keys rotated by RoPE, each KV head
// shared by Heads/KVHeads consecutive query heads (Hugging Face's
// repeat_kv), scores scaled by 1/sqrt(HeadDim), Out of
// Heads*HeadDim -> Dim. The KV cache holds the KVHeads keys and values,
// not the repeated ones.
type TransformerBlock struct {
	AttnNorm nn.RMSNorm `nn:"attn_norm"`
	Attn     nn.SelfAttention
	MLPNorm  nn.RMSNorm `nn:"mlp_norm"`
	MLP      struct{ Gate, Up, Down nn.Linear }
}

// Forward maps the residual stream x [B, T, Dim] through the block. cache
// is nil in training; in generation it is the model's KV cache, in which
// the block is layer layer.
func (b *TransformerBlock) Forward(g *autograd.Graph, x *tensor.Tensor, cache *nn.KVCache, layer int) *tensor.Tensor {
	x = g.Add(x, b.Attn.ForwardCached(g, b.AttnNorm.Forward(g, x), cache, layer))
	h := b.MLPNorm.Forward(g, x)
	return g.Add(x, b.MLP.Down.Forward(g, g.SwiGLU(b.MLP.Gate.Forward(g, h), b.MLP.Up.Forward(g, h))))
}

// Transformer is the paper's decoder-only transformer: untied embedding,
// Layers pre-norm blocks, a final RMSNorm without gain and an untied,
// bias-free LM head. Its parameter names are embed.weight,
// blocks.N.attn.{q,k,v,out}.weight, blocks.N.mlp.{gate,up,down}.weight and
// head.weight, matching the PyTorch reference's state dict.
type Transformer struct {
	Config Config `nn:"-"`
	Embed  nn.Embedding
	Blocks []TransformerBlock
	Norm   nn.RMSNorm
	Head   nn.Linear

	decoder
}

// New builds a Transformer on dev with every weight drawn from
// N(0, InitStd^2) by a generator seeded with seed, in the order of the
// parameter names: the embedding, then each block's q, k, v, out, gate,
// up and down, then the head.
func New(dev device.Device, cfg Config, seed uint64) (*Transformer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	rope, err := nn.NewRoPE(dev, cfg.DType, cfg.Context, cfg.HeadDim, cfg.RoPEBase) // shared by every block
	if err != nil {
		return nil, err
	}
	init := nn.NewInit(dev, seed, cfg.InitStd)
	init.DType = cfg.DType
	d := cfg.Dim
	m := &Transformer{Config: cfg}
	m.Embed = nn.NewEmbedding(init, cfg.Vocab, d)
	m.Blocks = make([]TransformerBlock, cfg.Layers)
	for i := range m.Blocks {
		b := &m.Blocks[i]
		b.Attn = nn.NewSelfAttention(init, d, nn.AttentionOptions{Heads: d / cfg.HeadDim, Causal: true, QKNorm: true, RoPE: rope})
		b.MLP.Gate = nn.NewLinear(init, d, cfg.MLPHidden)
		b.MLP.Up = nn.NewLinear(init, d, cfg.MLPHidden)
		b.MLP.Down = nn.NewLinear(init, cfg.MLPHidden, d)
	}
	m.Head = nn.NewLinear(init, d, cfg.Vocab)
	if err := init.Err(); err != nil {
		return nil, fmt.Errorf("models: %w", err)
	}
	m.decoder = decoder{where: "Transformer", layers: cfg.Layers, dim: d, context: cfg.Context,
		head: &m.Head, trunk: blocksTrunk(&m.Embed, m.Blocks, &m.Norm), params: nn.Parameters(m)}
	return m, nil
}

// ForwardOptions selects optional outputs of Forward.
type ForwardOptions struct {
	// Hidden asks for the final-norm hidden states [B*T, Dim]. They stay
	// valid until the graph's Backward or Reset unless KeepHidden is set.
	Hidden bool
	// KeepHidden (with Hidden) keeps the hidden states past Backward and
	// Reset; the caller must Release them.
	KeepHidden bool
	// BlockRows bounds the rows of logits the fused head and loss hold at
	// once (0: the autograd default of about 16M logits).
	BlockRows int
}

// Forward runs the model on inputs [B, T] (int32 token ids, T <= Context)
// and returns the mean next-token cross-entropy against targets [B, T]
// (int32) and, when opts.Hidden is set, the final-norm hidden states
// [B*T, Dim]. The head and the loss are fused (autograd's
// LinearCrossEntropy), so the B*T x Vocab logits never exist whole.
// Errors are recorded in g (check g.Err); on error both results are nil.
func (m *Transformer) Forward(g *autograd.Graph, inputs, targets *tensor.Tensor, opts ForwardOptions) (loss, hidden *tensor.Tensor) {
	if g.Err() != nil {
		return nil, nil
	}
	if inputs == nil || targets == nil || inputs.Rank() != 2 || !inputs.SameShape(targets) {
		g.Fail(fmt.Errorf("models: Transformer.Forward: inputs %v and targets %v: want two equal [batch, seq] shapes", tensor.ShapeOf(inputs), tensor.ShapeOf(targets)))
		return nil, nil
	}
	h := m.hidden(g, inputs, nil)
	if h == nil {
		return nil, nil
	}
	loss = g.LinearCrossEntropy(h, m.Head.Weight, targets, opts.BlockRows)
	if g.Err() != nil {
		return nil, nil
	}
	if opts.Hidden {
		rows := inputs.Len()
		var err error
		if opts.KeepHidden {
			g.Keep(h)
			hidden, err = h.MoveTo(rows, m.Config.Dim)
		} else {
			hidden, err = h.Reshape(rows, m.Config.Dim)
		}
		if err != nil {
			g.Fail(fmt.Errorf("models: hidden states: %w", err))
			return nil, nil
		}
	}
	return loss, hidden
}

// Loss is Forward's loss with the default options: the mean next-token
// cross-entropy of inputs [B, T] against targets [B, T].
func (m *Transformer) Loss(g *autograd.Graph, inputs, targets *tensor.Tensor) *tensor.Tensor {
	loss, _ := m.Forward(g, inputs, targets, ForwardOptions{})
	return loss
}

// LossHidden is Loss that also returns the final-norm hidden states
// [B*T, Dim] the head reads (Forward with Hidden).
func (m *Transformer) LossHidden(g *autograd.Graph, inputs, targets *tensor.Tensor) (loss, hidden *tensor.Tensor) {
	return m.Forward(g, inputs, targets, ForwardOptions{Hidden: true})
}

// blocksTrunk is the decoder.trunk of Transformer and Llama: the token
// embedding, the blocks (the slice as built) and the final RMSNorm.
func blocksTrunk(embed *nn.Embedding, blocks []TransformerBlock, norm *nn.RMSNorm) func(*autograd.Graph, *tensor.Tensor, int, *nn.KVCache) *tensor.Tensor {
	return func(g *autograd.Graph, inputs *tensor.Tensor, _ int, cache *nn.KVCache) *tensor.Tensor {
		x := embed.Forward(g, inputs)
		for i := range blocks {
			x = blocks[i].Forward(g, x, cache, i)
		}
		return norm.Forward(g, x)
	}
}
