package models

import (
	"fmt"
	"math"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/nn"
)

// LlamaConfig describes a Llama: the layout of Hugging Face's
// LlamaForCausalLM, which MistralForCausalLM and Qwen2ForCausalLM share.
type LlamaConfig struct {
	// Layers is the number of blocks.
	Layers int
	// Dim is the model width (hidden_size).
	Dim int
	// Heads is the number of query heads; KVHeads (num_key_value_heads)
	// the number of key and value heads, which must divide Heads: each
	// KV head serves Heads/KVHeads query heads (grouped-query attention;
	// KVHeads == Heads is multi-head attention).
	Heads, KVHeads int
	// HeadDim is the width of one head (0: Dim/Heads); even.
	HeadDim int
	// MLPHidden is the SwiGLU hidden width (intermediate_size).
	MLPHidden int
	// Vocab is the vocabulary size.
	Vocab int
	// Context is the longest sequence (max_position_embeddings); the RoPE
	// tables are built for it.
	Context int
	// RoPETheta is the rotary base (rope_theta; Llama 2: 10000).
	RoPETheta float64
	// RoPEScaling, when set, rescales the rotary frequencies as Llama 3.1
	// and 3.2 do (rope_scaling with rope_type "llama3").
	RoPEScaling *Llama3RoPEScaling
	// NormEps is the RMSNorms' epsilon (rms_norm_eps).
	NormEps float64
	// QKVBias gives the q, k and v projections biases (Qwen2); OutBias
	// the output projection too (Llama's attention_bias sets both).
	QKVBias, OutBias bool
	// TieEmbeddings makes the LM head the token embedding
	// (tie_word_embeddings).
	TieEmbeddings bool
	// InitStd is the standard deviation of the weights' normal init
	// (Hugging Face's initializer_range, 0.02).
	InitStd float64
	// DType is the parameters' dtype: float32 (the zero value) or float64
	// (reference runs on the CPU).
	DType device.DType
}

// Llama3RoPEScaling is Llama 3's frequency rescaling of RoPE: wavelengths
// longer than OriginalContext/LowFreqFactor are divided by Factor, those
// shorter than OriginalContext/HighFreqFactor kept, and those between
// interpolated smoothly.
type Llama3RoPEScaling struct {
	Factor, LowFreqFactor, HighFreqFactor float64
	OriginalContext                       int
}

// llamaPresets are a tiny test shape and the shapes of public small
// models of the family (the vocabularies of their tokenizers).
var llamaPresets = map[string]LlamaConfig{
	"llama-tiny": {Layers: 2, Dim: 64, Heads: 4, KVHeads: 2, MLPHidden: 160, Vocab: 256, Context: 64,
		RoPETheta: 10000, NormEps: 1e-5, InitStd: 0.02},
	"smollm-135m": {Layers: 30, Dim: 576, Heads: 9, KVHeads: 3, MLPHidden: 1536, Vocab: 49152, Context: 2048,
		RoPETheta: 10000, NormEps: 1e-5, TieEmbeddings: true, InitStd: 0.02},
	"smollm-360m": {Layers: 32, Dim: 960, Heads: 15, KVHeads: 5, MLPHidden: 2560, Vocab: 49152, Context: 2048,
		RoPETheta: 10000, NormEps: 1e-5, TieEmbeddings: true, InitStd: 0.02},
	"llama-3.2-1b": {Layers: 16, Dim: 2048, Heads: 32, KVHeads: 8, MLPHidden: 8192, Vocab: 128256, Context: 131072,
		RoPETheta: 500000, RoPEScaling: &Llama3RoPEScaling{Factor: 32, LowFreqFactor: 1, HighFreqFactor: 4, OriginalContext: 8192},
		NormEps: 1e-5, TieEmbeddings: true, InitStd: 0.02},
	"qwen2-0.5b": {Layers: 24, Dim: 896, Heads: 14, KVHeads: 2, MLPHidden: 4864, Vocab: 151936, Context: 32768,
		RoPETheta: 1000000, NormEps: 1e-6, QKVBias: true, TieEmbeddings: true, InitStd: 0.02},
}

// LlamaPresetNames returns the Llama preset names, sorted.
func LlamaPresetNames() []string {
	return presetNames(llamaPresets)
}

// LlamaPreset returns the named configuration: "llama-tiny" (2 layers of
// width 64, 4 heads over 2 KV heads, for tests) or the shape of
// "smollm-135m", "smollm-360m", "llama-3.2-1b" or "qwen2-0.5b".
func LlamaPreset(name string) (LlamaConfig, error) {
	return preset(llamaPresets, "Llama ", name)
}

// headDim returns HeadDim or its default Dim/Heads.
func (c LlamaConfig) headDim() int {
	if c.HeadDim != 0 || c.Heads == 0 {
		return c.HeadDim
	}
	return c.Dim / c.Heads
}

// Validate reports a configuration that cannot be built.
func (c LlamaConfig) Validate() error {
	hd := c.headDim()
	switch {
	case c.Layers < 0 || c.Dim <= 0 || c.Heads <= 0 || c.KVHeads <= 0 || c.MLPHidden <= 0 || c.Vocab <= 0 || c.Context <= 0:
		return fmt.Errorf("models: Llama config %+v: sizes must be positive", c)
	case c.Heads%c.KVHeads != 0:
		return fmt.Errorf("models: Llama config: %d KV heads do not divide %d heads", c.KVHeads, c.Heads)
	case hd <= 0 || hd%2 != 0 || (c.HeadDim == 0 && c.Dim%c.Heads != 0):
		return fmt.Errorf("models: Llama config: head dim %d (dim %d, %d heads): want an even head dim", hd, c.Dim, c.Heads)
	case c.RoPETheta <= 0 || c.NormEps <= 0 || c.InitStd < 0:
		return fmt.Errorf("models: Llama config: rope theta %g, norm eps %g, init std %g", c.RoPETheta, c.NormEps, c.InitStd)
	case c.RoPEScaling != nil && (c.RoPEScaling.Factor <= 0 || c.RoPEScaling.LowFreqFactor <= 0 ||
		c.RoPEScaling.HighFreqFactor <= c.RoPEScaling.LowFreqFactor || c.RoPEScaling.OriginalContext <= 0):
		return fmt.Errorf("models: Llama config: rope scaling %+v: want positive factors, high > low", *c.RoPEScaling)
	}
	return nil
}

// NumParams returns the parameter count (a tied head counted once).
func (c LlamaConfig) NumParams() int {
	d, hd := c.Dim, c.headDim()
	q, kv := c.Heads*hd, c.KVHeads*hd
	block := d*q + 2*d*kv + q*d + 3*d*c.MLPHidden + 2*d
	if c.QKVBias {
		block += q + 2*kv
	}
	if c.OutBias {
		block += d
	}
	n := c.Layers*block + c.Vocab*d + d
	if !c.TieEmbeddings {
		n += c.Vocab * d
	}
	return n
}

// frequency returns the rotary frequency f, rescaled by Llama 3's rule
// when the configuration sets it (nn.NewRoPEScaled's scale).
func (c LlamaConfig) frequency(f float64) float64 {
	s := c.RoPEScaling
	if s == nil {
		return f
	}
	wavelen := 2 * math.Pi / f
	lowWave := float64(s.OriginalContext) / s.LowFreqFactor
	highWave := float64(s.OriginalContext) / s.HighFreqFactor
	switch {
	case wavelen > lowWave:
		return f / s.Factor
	case wavelen >= highWave:
		smooth := (float64(s.OriginalContext)/wavelen - s.LowFreqFactor) / (s.HighFreqFactor - s.LowFreqFactor)
		return (1-smooth)*f/s.Factor + smooth*f
	}
	return f
}

// Llama is the Llama family: a token embedding, Layers blocks, a final
// RMSNorm with a gain and an LM head (tied to the embedding when
// TieEmbeddings). Its parameter names are embed.weight,
// blocks.N.{attn_norm,mlp_norm}.gain, blocks.N.attn.{q,k,v,out}.weight
// (and .bias with QKVBias, OutBias), blocks.N.mlp.{gate,up,down}.weight,
// norm.gain and head.weight (absent when tied).
type Llama struct {
	Config LlamaConfig `nn:"-"`
	Embed  nn.Embedding
	Blocks []TransformerBlock
	Norm   nn.RMSNorm
	Head   nn.Linear

	causalLM
}

// NewLlama builds a Llama on dev with every weight drawn from
// N(0, InitStd^2) by a generator seeded with seed (Hugging Face's init),
// biases zero and gains one.
func NewLlama(dev device.Device, cfg LlamaConfig, seed uint64) (*Llama, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	ropeDType := device.Float32 // the tables of a model of another dtype: its Init refuses that dtype
	if cfg.DType == device.Float64 {
		ropeDType = device.Float64
	}
	rope, err := nn.NewRoPEScaled(dev, ropeDType, cfg.Context, cfg.headDim(), cfg.RoPETheta, cfg.frequency)
	if err != nil {
		return nil, err
	}
	init := nn.NewInit(dev, seed, cfg.InitStd)
	init.DType = cfg.DType
	d, hd := cfg.Dim, cfg.headDim()
	norm := func() nn.RMSNorm { return nn.RMSNorm{Gain: init.Ones(d), Eps: cfg.NormEps} }
	m := &Llama{Config: cfg}
	m.Embed = nn.NewEmbedding(init, cfg.Vocab, d)
	m.Blocks = make([]TransformerBlock, cfg.Layers)
	for i := range m.Blocks {
		b := &m.Blocks[i]
		b.AttnNorm = norm()
		b.Attn = nn.NewSelfAttention(init, d, nn.AttentionOptions{Heads: cfg.Heads, KVHeads: cfg.KVHeads, HeadDim: hd,
			QKVBias: cfg.QKVBias, OutBias: cfg.OutBias, Causal: true, RoPE: rope})
		b.MLPNorm = norm()
		b.MLP.Gate = nn.NewLinear(init, d, cfg.MLPHidden)
		b.MLP.Up = nn.NewLinear(init, d, cfg.MLPHidden)
		b.MLP.Down = nn.NewLinear(init, cfg.MLPHidden, d)
	}
	m.Norm = norm()
	if cfg.TieEmbeddings {
		m.Head = nn.Linear{Weight: m.Embed.Weight}
	} else {
		m.Head = nn.NewLinear(init, d, cfg.Vocab)
	}
	if err := init.Err(); err != nil {
		return nil, fmt.Errorf("models: %w", err)
	}
	m.causalLM = newCausalLM(m, "Llama", m.Embed.Weight,
		decoder{layers: cfg.Layers, dim: d, context: cfg.Context, head: &m.Head, trunk: blocksTrunk(&m.Embed, m.Blocks, &m.Norm)})
	return m, nil
}
