package hf

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/models"
)

// The architectures (config.json's "architectures"[0]) this package reads.
const (
	GPT2Arch    = "GPT2LMHeadModel"
	LlamaArch   = "LlamaForCausalLM"
	MistralArch = "MistralForCausalLM"
	Qwen2Arch   = "Qwen2ForCausalLM"
)

// Config is a model directory's config.json, read.
type Config struct {
	// Path is the config.json read.
	Path string
	// Architecture is "architectures"[0] (GPT2Arch, LlamaArch, ...).
	Architecture string
	// Family is the models/registry family that builds it: "gpt2" or
	// "llama".
	Family string
	// Model is the family's config: a models.GPT2Config or a
	// models.LlamaConfig, of the dtype ReadConfig was asked for.
	Model any
	// Tied reports an LM head tied to the token embedding.
	Tied bool
	// LayerNormEps is GPT-2's layer_norm_epsilon (0 for Llama).
	LayerNormEps float64
}

// informational are config.json fields that do not change the forward
// pass (token ids, dropouts, training and bookkeeping fields).
var informational = map[string]bool{
	"architectures": true, "model_type": true, "torch_dtype": true, "transformers_version": true,
	"_name_or_path": true, "bos_token_id": true, "eos_token_id": true, "pad_token_id": true,
	"initializer_range": true, "use_cache": true, "attn_pdrop": true, "embd_pdrop": true,
	"resid_pdrop": true, "attention_dropout": true, "summary_activation": true,
	"summary_first_dropout": true, "summary_proj_to_labels": true, "summary_type": true,
	"summary_use_proj": true, "task_specific_params": true, "n_ctx": true, "output_past": true,
	"pretraining_tp": true, "max_window_layers": true, "reorder_and_upcast_attn": true,
	"id2label": true, "label2id": true, "_attn_implementation_autoset": true, "tokenizer_class": true,
}

// fields is a config.json object read field by field: get marks a field
// used, and rest reports those neither used nor informational.
type fields struct {
	path string
	raw  map[string]json.RawMessage
	used map[string]bool
	err  error
}

// get decodes field name into v; absent or null leaves v as it is and
// returns false.
func (f *fields) get(name string, v any) bool {
	f.used[name] = true
	r, ok := f.raw[name]
	if !ok || string(r) == "null" || f.err != nil {
		return false
	}
	if err := json.Unmarshal(r, v); err != nil {
		f.err = fmt.Errorf("hf: %s: field %q: %w", f.path, name, err)
		return false
	}
	return true
}

// need is get for a field that must be present.
func (f *fields) need(name string, v any) {
	if !f.get(name, v) && f.err == nil {
		f.err = fmt.Errorf("hf: %s: field %q is missing", f.path, name)
	}
}

// want fails unless field name is absent, null or one of ok (compared as
// JSON values).
func (f *fields) want(name string, ok ...any) {
	var v any
	if !f.get(name, &v) {
		return
	}
	for _, o := range ok {
		if fmt.Sprint(v) == fmt.Sprint(o) {
			return
		}
	}
	f.err = fmt.Errorf("hf: %s: field %q is %s: not supported (supported: %v)", f.path, name, f.raw[name], ok)
}

// fail records an error about field name unless one is recorded.
func (f *fields) fail(name, format string, args ...any) {
	if f.err == nil {
		f.err = fmt.Errorf("hf: %s: field %q: %s", f.path, name, fmt.Sprintf(format, args...))
	}
}

// done returns the first error, or one naming the fields this package
// does not know.
func (f *fields) done(arch string) error {
	if f.err != nil {
		return f.err
	}
	var unknown []string
	for name := range f.raw {
		if !f.used[name] && !informational[name] {
			unknown = append(unknown, fmt.Sprintf("%q", name))
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return fmt.Errorf("hf: %s: %s field %s not supported", f.path, arch, strings.Join(unknown, ", "))
	}
	return nil
}

// ReadConfig reads dir/config.json: the architecture, and the family's
// config for parameters of dtype (device.Float32 or device.Float64). An
// architecture or a field that changes the model in a way this package
// does not implement is an error naming it.
func ReadConfig(dir string, dtype device.DType) (*Config, error) {
	path := filepath.Join(dir, "config.json")
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("hf: %w", err)
	}
	f := &fields{path: path, used: map[string]bool{}}
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&f.raw); err != nil {
		return nil, fmt.Errorf("hf: %s: %w", path, err)
	}
	var archs []string
	f.need("architectures", &archs)
	if f.err != nil {
		return nil, f.err
	}
	if len(archs) != 1 {
		return nil, fmt.Errorf("hf: %s: field \"architectures\" is %q: want one architecture", path, archs)
	}
	c := &Config{Path: path, Architecture: archs[0]}
	switch c.Architecture {
	case GPT2Arch:
		c.Family = "gpt2"
		c.Model = gpt2Config(f, c, dtype)
	case LlamaArch, MistralArch, Qwen2Arch:
		c.Family = "llama"
		c.Model = llamaConfig(f, c, dtype)
	default:
		return nil, fmt.Errorf("hf: %s: architecture %q is not supported (supported: %s, %s, %s, %s)",
			path, c.Architecture, GPT2Arch, LlamaArch, MistralArch, Qwen2Arch)
	}
	if err := f.done(c.Architecture); err != nil {
		return nil, err
	}
	return c, nil
}

func gpt2Config(f *fields, c *Config, dtype device.DType) models.GPT2Config {
	m := models.GPT2Config{InitStd: 0.02, DType: dtype}
	f.need("n_layer", &m.Layers)
	f.need("n_embd", &m.Dim)
	f.need("n_head", &m.Heads)
	f.need("vocab_size", &m.Vocab)
	f.need("n_positions", &m.Context)
	c.LayerNormEps = 1e-5
	f.get("layer_norm_epsilon", &c.LayerNormEps)
	var inner int
	if f.get("n_inner", &inner) && inner != 4*m.Dim {
		f.fail("n_inner", "%d: only 4*n_embd (%d) is supported", inner, 4*m.Dim)
	}
	f.want("activation_function", "gelu_new", "gelu_pytorch_tanh")
	f.want("scale_attn_weights", true)
	f.want("scale_attn_by_inverse_layer_idx", false)
	f.want("add_cross_attention", false)
	c.Tied = true
	f.get("tie_word_embeddings", &c.Tied)
	return m
}

func llamaConfig(f *fields, c *Config, dtype device.DType) models.LlamaConfig {
	m := models.LlamaConfig{RoPETheta: 10000, InitStd: 0.02, DType: dtype}
	f.need("num_hidden_layers", &m.Layers)
	f.need("hidden_size", &m.Dim)
	f.need("num_attention_heads", &m.Heads)
	m.KVHeads = m.Heads
	f.get("num_key_value_heads", &m.KVHeads)
	f.get("head_dim", &m.HeadDim)
	if m.HeadDim == m.Dim/max(m.Heads, 1) && m.Dim%max(m.Heads, 1) == 0 {
		m.HeadDim = 0 // the default, said explicitly
	}
	f.need("intermediate_size", &m.MLPHidden)
	f.need("vocab_size", &m.Vocab)
	f.need("max_position_embeddings", &m.Context)
	f.get("rope_theta", &m.RoPETheta)
	f.need("rms_norm_eps", &m.NormEps)
	f.get("tie_word_embeddings", &m.TieEmbeddings)
	c.Tied = m.TieEmbeddings
	f.want("hidden_act", "silu")
	f.want("mlp_bias", false)
	switch c.Architecture {
	case Qwen2Arch:
		m.QKVBias = true
		f.want("use_mrope", false)
		var sliding bool
		if f.get("use_sliding_window", &sliding) && sliding {
			f.fail("use_sliding_window", "true: sliding-window attention is not supported")
		}
		f.used["sliding_window"] = true
	case MistralArch:
		var window int
		if f.get("sliding_window", &window) && window < m.Context {
			f.fail("sliding_window", "%d < max_position_embeddings %d: sliding-window attention is not supported", window, m.Context)
		}
	default:
		var bias bool
		if f.get("attention_bias", &bias) && bias {
			m.QKVBias, m.OutBias = true, true
		}
	}
	var scaling map[string]any
	if f.get("rope_scaling", &scaling) {
		m.RoPEScaling = llama3Scaling(f, scaling)
	}
	return m
}

// llama3Scaling reads rope_scaling of rope_type "llama3"; any other type
// is an error naming it.
func llama3Scaling(f *fields, s map[string]any) *models.Llama3RoPEScaling {
	typ, _ := s["rope_type"].(string)
	if typ == "" {
		typ, _ = s["type"].(string)
	}
	if typ != "llama3" {
		f.fail("rope_scaling", "rope_type %q: only \"llama3\" is supported", typ)
		return nil
	}
	num := func(k string) float64 {
		v, ok := s[k].(float64)
		if !ok {
			f.fail("rope_scaling", "%q is %v: want a number", k, s[k])
		}
		return v
	}
	return &models.Llama3RoPEScaling{Factor: num("factor"), LowFreqFactor: num("low_freq_factor"),
		HighFreqFactor: num("high_freq_factor"), OriginalContext: int(num("original_max_position_embeddings"))}
}
