// Package hf reads and writes Hugging Face model directories: config.json
// plus model.safetensors, or shards listed by model.safetensors.index.json,
// with tensors stored as F32, F16 or BF16 (converted on load to the
// model's dtype, float32 or float64) and names with or without the
// "transformer." / "model." prefix. It reads GPT2LMHeadModel into
// models.GPT2 (Conv1D [in, out] weights transposed, the fused c_attn split
// into q, k and v, the attn.bias mask buffers dropped, lm_head absent or
// tied), and LlamaForCausalLM, MistralForCausalLM and Qwen2ForCausalLM
// into models.Llama; Save writes either model back in that layout.
//
// Loading checks everything before it changes a parameter: an
// architecture or config field it does not implement, and a missing,
// extra or misshapen tensor, are errors naming the field or the tensor,
// its file and both shapes. Tensors are read one at a time through reused
// buffers, so loading holds the largest tensor's bytes and values beside
// the model, never a second copy of the weights.
//
// This package builds on models, nn, safetensors, tensor and device. It
// must not import train, data or cmd: a run layer imports it.
package hf

import (
	"bytes"
	"cmp"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/models"
	"github.com/hilbert-ml/hilbert/nn"
	"github.com/hilbert-ml/hilbert/safetensors"
	"github.com/hilbert-ml/hilbert/tensor"
)

// Model is a model this package reads and writes: *models.GPT2 or
// *models.Llama.
type Model interface {
	models.LM
	// Parameters returns the model's parameters, named.
	Parameters() []*tensor.Tensor
}

// Options configures Load.
type Options struct {
	// DType is the parameters' dtype: float32 (the zero value) or
	// float64.
	DType device.DType
	// UntieHead gives a tied model a head of its own (a copy of the
	// embedding as loaded), so that an optimizer can update the two
	// apart.
	UntieHead bool
}

// Load reads the model directory dir onto dev: its config (ReadConfig), a
// model built from it, and its weights (LoadWeights).
func Load(dev device.Device, dir string, opt Options) (Model, *Config, error) {
	cfg, err := ReadConfig(dir, cmp.Or(opt.DType, device.Float32))
	if err != nil {
		return nil, nil, err
	}
	var m interface {
		Model
		UntieHead() error
	}
	switch c := cfg.Model.(type) {
	case models.GPT2Config:
		m, err = models.NewGPT2(dev, c, 0) // tied
	case models.LlamaConfig:
		m, err = models.NewLlama(dev, c, 0) // tied when cfg.Tied
	}
	if err == nil && (opt.UntieHead || !cfg.Tied) && len(nn.Tied(m)) > 0 {
		err = m.UntieHead()
	}
	if err != nil {
		return nil, nil, fmt.Errorf("hf: %s: %w", dir, err)
	}
	if err := LoadWeights(dir, m); err != nil {
		return nil, nil, err
	}
	return m, cfg, nil
}

// piece is one model parameter and the stored tensor it comes from.
type piece struct {
	param *tensor.Tensor
	src   string // canonical stored name
	shape []int  // the stored tensor's shape
	// conv marks a GPT-2 Conv1D weight [in, total]: the parameter
	// [out, in] is its columns col..col+out, transposed.
	conv bool
	col  int
}

// LoadWeights reads the weights of dir into m, a model built from the
// directory's config (the sizes must agree; GPT-2's layer_norm_epsilon is
// set on m's LayerNorms). Every parameter must be stored, as a float
// tensor of the right shape, and every stored tensor used (GPT-2's
// attn.bias and attn.masked_bias buffers and Llama's rotary inv_freq
// excepted); a tied model's stored lm_head must equal its embedding. All
// of this is checked before a parameter changes.
func LoadWeights(dir string, m Model) error {
	ps := m.Parameters()
	if len(ps) == 0 {
		return fmt.Errorf("hf: loading %s: a model without parameters", dir)
	}
	dt := ps[0].DType()
	cfg, err := ReadConfig(dir, dt)
	if err != nil {
		return err
	}
	pieces, embed, modelTied, err := plan(m, cfg)
	if err != nil {
		return err
	}
	src, err := openSource(dir)
	if err != nil {
		return err
	}
	defer src.close()
	if !cfg.Tied && modelTied {
		return fmt.Errorf("hf: %s: config.json says tie_word_embeddings false, the model's head is tied", dir)
	}
	used := map[string]bool{}
	for _, p := range pieces {
		e, ok := src.byName[p.src]
		if !ok {
			return fmt.Errorf("hf: tensor %q (with or without the %q prefix; for %s %v) is missing from %s", p.src, prefixOf(cfg.Family), p.param.Name, p.shape, src.describe())
		}
		if !e.info.DType.IsFloat() {
			return fmt.Errorf("hf: tensor %q in %s has dtype %s: want F32, F16, BF16 or F64", e.name, e.file.Path(), e.info.DType)
		}
		if !slices.Equal(e.info.Shape, p.shape) {
			return fmt.Errorf("hf: tensor %q in %s has shape %v, the model's %s needs %v", e.name, e.file.Path(), e.info.Shape, p.param.Name, p.shape)
		}
		used[p.src] = true
	}
	var extra []string
	for name, e := range src.byName {
		if !used[name] && !ignored(cfg.Family, name) && !(name == "lm_head.weight" && cfg.Tied) {
			extra = append(extra, fmt.Sprintf("%q in %s", e.name, e.file.Path()))
		}
	}
	if len(extra) > 0 {
		sort.Strings(extra)
		return fmt.Errorf("hf: %s: tensors not in a %s model: %s", dir, cfg.Architecture, strings.Join(extra, ", "))
	}
	var l loader
	if e, ok := src.byName["lm_head.weight"]; ok && cfg.Tied && !used["lm_head.weight"] {
		if err := l.sameTensor(e, src.byName[embed]); err != nil {
			return err
		}
	}
	for _, p := range pieces {
		if err := l.load(p, src.byName[p.src], dt); err != nil {
			return err
		}
	}
	if g, ok := m.(*models.GPT2); ok {
		eps := cfg.LayerNormEps
		for i := range g.Blocks {
			g.Blocks[i].LN1.Eps, g.Blocks[i].LN2.Eps = eps, eps
		}
		g.Norm.Eps = eps
	}
	return nil
}

// plan maps m's parameters to stored tensors after checking that m has
// the sizes of cfg, and returns the stored embedding's name and whether
// m's head is tied to it.
func plan(m Model, cfg *Config) (pieces []piece, embed string, tied bool, err error) {
	switch m := m.(type) {
	case *models.GPT2:
		want, ok := cfg.Model.(models.GPT2Config)
		have := m.Config
		have.InitStd, have.Dropout, have.DType = want.InitStd, want.Dropout, want.DType
		if !ok || have != want {
			return nil, "", false, fmt.Errorf("hf: %s describes %s %+v; the model is GPT-2 %+v", cfg.Path, cfg.Architecture, cfg.Model, m.Config)
		}
		return gpt2Pieces(m, cfg.Tied), "wte.weight", m.Head.Weight == m.Tok.Weight, nil
	case *models.Llama:
		want, ok := cfg.Model.(models.LlamaConfig)
		have := m.Config
		have.InitStd, have.DType, have.TieEmbeddings = want.InitStd, want.DType, want.TieEmbeddings
		if !ok || !reflect.DeepEqual(have, want) {
			return nil, "", false, fmt.Errorf("hf: %s describes %s %+v; the model is Llama %+v", cfg.Path, cfg.Architecture, cfg.Model, m.Config)
		}
		return llamaPieces(m, cfg.Tied), "embed_tokens.weight", m.Head.Weight == m.Embed.Weight, nil
	}
	return nil, "", false, fmt.Errorf("hf: a %T model: want *models.GPT2 or *models.Llama", m)
}

// gpt2Pieces maps GPT2's parameters to GPT2LMHeadModel's tensors; an
// untied model loads a tied checkpoint's embedding into its head.
func gpt2Pieces(m *models.GPT2, storedTied bool) []piece {
	d := m.Config.Dim
	conv := func(t *tensor.Tensor, src string, total, col int) piece {
		return piece{param: t, src: src, shape: []int{t.Dim(1), total}, conv: true, col: col}
	}
	bias := func(t *tensor.Tensor, src string, total, col int) piece {
		return piece{param: t, src: src, shape: []int{total}, conv: true, col: col}
	}
	ps := []piece{id(m.Tok.Weight, "wte.weight"), id(m.Pos.Weight, "wpe.weight")}
	for i := range m.Blocks {
		b, p := &m.Blocks[i], "h."+strconv.Itoa(i)+"."
		ps = append(ps,
			id(b.LN1.Weight, p+"ln_1.weight"), id(b.LN1.Bias, p+"ln_1.bias"),
			conv(b.Attn.Q.Weight, p+"attn.c_attn.weight", 3*d, 0), bias(b.Attn.Q.Bias, p+"attn.c_attn.bias", 3*d, 0),
			conv(b.Attn.K.Weight, p+"attn.c_attn.weight", 3*d, d), bias(b.Attn.K.Bias, p+"attn.c_attn.bias", 3*d, d),
			conv(b.Attn.V.Weight, p+"attn.c_attn.weight", 3*d, 2*d), bias(b.Attn.V.Bias, p+"attn.c_attn.bias", 3*d, 2*d),
			conv(b.Attn.Out.Weight, p+"attn.c_proj.weight", d, 0), id(b.Attn.Out.Bias, p+"attn.c_proj.bias"),
			id(b.LN2.Weight, p+"ln_2.weight"), id(b.LN2.Bias, p+"ln_2.bias"),
			conv(b.FC.Weight, p+"mlp.c_fc.weight", 4*d, 0), id(b.FC.Bias, p+"mlp.c_fc.bias"),
			conv(b.Proj.Weight, p+"mlp.c_proj.weight", d, 0), id(b.Proj.Bias, p+"mlp.c_proj.bias"),
		)
	}
	ps = append(ps, id(m.Norm.Weight, "ln_f.weight"), id(m.Norm.Bias, "ln_f.bias"))
	return withHead(ps, m.Head.Weight, m.Tok.Weight, "wte.weight", storedTied)
}

// llamaPieces maps Llama's parameters to LlamaForCausalLM's tensors; an
// untied model loads a tied checkpoint's embedding into its head.
func llamaPieces(m *models.Llama, storedTied bool) []piece {
	ps := []piece{id(m.Embed.Weight, "embed_tokens.weight")}
	for i := range m.Blocks {
		b, p := &m.Blocks[i], "layers."+strconv.Itoa(i)+"."
		ps = append(ps, id(b.AttnNorm.Gain, p+"input_layernorm.weight"))
		for j, l := range []*nn.Linear{&b.Attn.Q, &b.Attn.K, &b.Attn.V, &b.Attn.Out} {
			name := p + "self_attn." + [...]string{"q_proj", "k_proj", "v_proj", "o_proj"}[j]
			ps = append(ps, id(l.Weight, name+".weight"))
			if l.Bias != nil {
				ps = append(ps, id(l.Bias, name+".bias"))
			}
		}
		ps = append(ps, id(b.MLPNorm.Gain, p+"post_attention_layernorm.weight"),
			id(b.MLP.Gate.Weight, p+"mlp.gate_proj.weight"), id(b.MLP.Up.Weight, p+"mlp.up_proj.weight"),
			id(b.MLP.Down.Weight, p+"mlp.down_proj.weight"))
	}
	ps = append(ps, id(m.Norm.Gain, "norm.weight"))
	return withHead(ps, m.Head.Weight, m.Embed.Weight, "embed_tokens.weight", storedTied)
}

// id is the piece of parameter t stored whole as src.
func id(t *tensor.Tensor, src string) piece { return piece{param: t, src: src, shape: t.Shape()} }

// withHead appends the head's piece to ps: none for a head tied to the
// embedding e, the stored embedding embed for an untied head of a tied
// checkpoint (storedTied), lm_head.weight otherwise.
func withHead(ps []piece, head, e *tensor.Tensor, embed string, storedTied bool) []piece {
	switch {
	case head == e:
		return ps
	case storedTied:
		return append(ps, id(head, embed))
	}
	return append(ps, id(head, "lm_head.weight"))
}

// prefixOf is the family's base-model prefix.
func prefixOf(family string) string {
	if family == "gpt2" {
		return "transformer."
	}
	return "model."
}

// ignored reports stored tensors that are buffers, not weights.
func ignored(family, name string) bool {
	switch family {
	case "gpt2":
		return strings.HasSuffix(name, ".attn.bias") || strings.HasSuffix(name, ".attn.masked_bias")
	case "llama":
		return strings.HasSuffix(name, ".rotary_emb.inv_freq")
	}
	return false
}

// sameTensor requires a stored lm_head to equal the embedding a tied
// model uses for it, comparing stored bytes in the loader's buffers.
func (l *loader) sameTensor(head, embed entry) error {
	if head.info.DType != embed.info.DType || !slices.Equal(head.info.Shape, embed.info.Shape) {
		return fmt.Errorf("hf: tensor %q in %s is %s %v, the embedding %q it is tied to %s %v",
			head.name, head.file.Path(), head.info.DType, head.info.Shape, embed.name, embed.info.DType, embed.info.Shape)
	}
	n := int(head.info.End - head.info.Begin)
	l.raw = grow(l.raw, n) // reused by the loads that follow
	a, b := l.raw, make([]byte, n)
	if err := head.file.ReadBytes(head.name, a); err != nil {
		return fmt.Errorf("hf: %w", err)
	}
	if err := embed.file.ReadBytes(embed.name, b); err != nil {
		return fmt.Errorf("hf: %w", err)
	}
	if !bytes.Equal(a, b) {
		return fmt.Errorf("hf: tensor %q in %s differs from the embedding %q: the model's head is tied to it (load an untied model for a separate head)",
			head.name, head.file.Path(), embed.name)
	}
	return nil
}

// loader reads stored tensors into parameters through scratch buffers
// it reuses, so that loading holds the largest tensor's bytes and values
// beside the model, not garbage of every tensor's.
type loader struct {
	raw []byte
	f32 [2][]float32
	f64 [2][]float64
}

// grow returns b resliced to n, reallocated only when too small.
func grow[T any](b []T, n int) []T {
	if cap(b) < n {
		return make([]T, n)
	}
	return b[:n]
}

// load reads the stored tensor into the parameter in its dtype dt.
func (l *loader) load(p piece, e entry, dt device.DType) error {
	l.raw = grow(l.raw, int(e.info.End-e.info.Begin))
	if err := e.file.ReadBytes(e.name, l.raw); err != nil {
		return fmt.Errorf("hf: %w", err)
	}
	var err error
	if dt == device.Float64 {
		err = decodeInto(&l.f64, l.raw, p, e, safetensors.DecodeAsFloat64, p.param.SetFloat64)
	} else {
		err = decodeInto(&l.f32, l.raw, p, e, safetensors.DecodeAsFloat32, p.param.SetFloat32)
	}
	if err != nil {
		return fmt.Errorf("hf: %s: tensor %q: %w", e.file.Path(), e.name, err)
	}
	return nil
}

// decodeInto decodes the stored bytes raw of e with decode into bufs[0],
// arranges them into bufs[1] and sets the parameter with set.
func decodeInto[T float32 | float64](bufs *[2][]T, raw []byte, p piece, e entry,
	decode func(safetensors.DType, []T, []byte) error, set func([]T) error) error {
	bufs[0] = grow(bufs[0], e.info.Numel())
	if err := decode(e.info.DType, bufs[0], raw); err != nil {
		return err
	}
	bufs[1] = grow(bufs[1], p.param.Len())
	return set(arrange(bufs[0], bufs[1], p))
}

// arrange returns the parameter's values from the stored ones v: v itself
// for most, a Conv1D weight's columns transposed into w, a fused bias's
// slice.
func arrange[T float32 | float64](v, w []T, p piece) []T {
	if !p.conv {
		return v
	}
	if len(p.shape) == 1 { // a bias: elements col..col+out
		return v[p.col : p.col+p.param.Dim(0)]
	}
	in, total, out := p.shape[0], p.shape[1], p.param.Dim(0)
	for i := range in {
		row := v[i*total+p.col : i*total+p.col+out]
		for o, x := range row {
			w[o*in+i] = x
		}
	}
	return w
}
