package hf

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"github.com/hilbert-ml/hilbert/internal/atomicfile"
	"github.com/hilbert-ml/hilbert/models"
	"github.com/hilbert-ml/hilbert/safetensors"
	"github.com/hilbert-ml/hilbert/tensor"
)

// Save writes m as a Hugging Face model directory dir (created if need
// be): model.safetensors with the tensors in dtype (safetensors.F32, or
// BF16 or F16 rounded to nearest even, a value beyond F16's range being
// an error naming the tensor; "" is F32) under transformers' names
// (transformer.* for GPT-2 with Conv1D weights [in, out] and a fused
// c_attn; model.* for Llama; lm_head.weight only for an untied head), and
// then config.json (GPT2LMHeadModel, LlamaForCausalLM, or
// Qwen2ForCausalLM for q/k/v biases without an output bias). A directory
// with a config.json is therefore complete. Tensors are converted one at
// a time; a float64 model's values are rounded through float32.
func Save(dir string, m Model, dtype safetensors.DType) error {
	dtype = cmp.Or(dtype, safetensors.F32)
	if torchDType[dtype] == "" {
		return fmt.Errorf("hf: Save %s: dtype %s: want F32, BF16 or F16", dir, dtype)
	}
	var (
		pieces []piece
		prefix string
		cfg    map[string]any
		err    error
	)
	switch m := m.(type) {
	case *models.GPT2:
		pieces, prefix, cfg = gpt2Pieces(m, false), "transformer.", gpt2JSON(m)
	case *models.Llama:
		pieces, prefix = llamaPieces(m, false), "model."
		cfg, err = llamaJSON(m)
	default:
		err = fmt.Errorf("a %T model: want *models.GPT2 or *models.Llama", m)
	}
	if err != nil {
		return fmt.Errorf("hf: Save %s: %w", dir, err)
	}
	cfg["torch_dtype"] = torchDType[dtype]
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("hf: %w", err)
	}
	if err := saveTensors(dir, pieces, prefix, dtype); err != nil {
		return err
	}
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return fmt.Errorf("hf: Save %s: config: %w", dir, err)
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, "config.json"), append(b, '\n')); err != nil {
		return fmt.Errorf("hf: %w", err)
	}
	return nil
}

// torchDType is config.json's torch_dtype of each dtype Save writes.
var torchDType = map[safetensors.DType]string{safetensors.F32: "float32", safetensors.BF16: "bfloat16", safetensors.F16: "float16"}

// saveTensors writes dir/model.safetensors: one stored tensor per distinct
// source of pieces, in their order, named with prefix (but lm_head.weight)
// and encoded in dtype.
func saveTensors(dir string, pieces []piece, prefix string, dtype safetensors.DType) error {
	var order []string
	bySrc := map[string][]piece{}
	for _, p := range pieces {
		if _, seen := bySrc[p.src]; !seen {
			order = append(order, p.src)
		}
		bySrc[p.src] = append(bySrc[p.src], p)
	}
	stored := func(src string) string {
		if src == "lm_head.weight" {
			return src
		}
		return prefix + src
	}
	infos := make([]safetensors.Info, len(order))
	for i, src := range order {
		infos[i] = safetensors.Info{Name: stored(src), DType: dtype, Shape: bySrc[src][0].shape}
	}
	w, err := safetensors.Create(filepath.Join(dir, "model.safetensors"), infos, map[string]string{"format": "pt"})
	if err != nil {
		return fmt.Errorf("hf: %w", err)
	}
	for _, src := range order {
		data, err := encode(assemble(bySrc[src]), dtype)
		if err != nil {
			w.Abort()
			return fmt.Errorf("hf: Save %s: tensor %s %w", dir, stored(src), err)
		}
		if err := w.WriteTensor(stored(src), data); err != nil {
			w.Abort()
			return fmt.Errorf("hf: %w", err)
		}
	}
	if err := w.Commit(); err != nil {
		return fmt.Errorf("hf: %w", err)
	}
	return nil
}

// encode returns v's bytes in dtype (F32, BF16 or F16, rounded to nearest
// even), or an error for a value beyond F16's range.
func encode(v []float32, dtype safetensors.DType) ([]byte, error) {
	switch dtype {
	case safetensors.BF16:
		return safetensors.EncodeBFloat16(v), nil
	case safetensors.F16:
		for _, x := range v {
			if math.Abs(float64(x)) >= f16Overflow {
				return nil, fmt.Errorf("holds %g, beyond float16's largest finite value 65504: save it as F32 or BF16", x)
			}
		}
		return safetensors.EncodeFloat16(v), nil
	}
	return safetensors.EncodeFloat32(v), nil
}

// f16Overflow is the smallest magnitude that rounds to float16's
// infinity (65504 plus half its last step).
const f16Overflow = 65520

// assemble builds one stored tensor from the parameters mapped to it
// (the inverse of arrange), as float32.
func assemble(ps []piece) []float32 {
	out := make([]float32, tensor.Shape(ps[0].shape).Numel())
	for _, p := range ps {
		v := p.param.Float32s() // a float64 parameter's values rounded to float32
		switch {
		case !p.conv:
			copy(out, v)
		case len(p.shape) == 1:
			copy(out[p.col:], v)
		default:
			in, total, o := p.shape[0], p.shape[1], p.param.Dim(0)
			for r := range o {
				for i := range in {
					out[i*total+p.col+r] = v[r*in+i]
				}
			}
		}
	}
	return out
}

func gpt2JSON(m *models.GPT2) map[string]any {
	c := m.Config
	return map[string]any{
		"architectures": []string{GPT2Arch}, "model_type": "gpt2", "activation_function": "gelu_new",
		"n_layer": c.Layers, "n_embd": c.Dim, "n_head": c.Heads, "n_inner": nil, "vocab_size": c.Vocab,
		"n_positions": c.Context, "n_ctx": c.Context, "layer_norm_epsilon": cmp.Or(m.Norm.Eps, 1e-5),
		"attn_pdrop": c.Dropout, "embd_pdrop": c.Dropout, "resid_pdrop": c.Dropout,
		"initializer_range": c.InitStd, "scale_attn_weights": true, "scale_attn_by_inverse_layer_idx": false,
		"reorder_and_upcast_attn": false, "tie_word_embeddings": m.Head.Weight == m.Tok.Weight, "use_cache": true,
	}
}

func llamaJSON(m *models.Llama) (map[string]any, error) {
	c := m.Config
	hd := c.HeadDim
	if hd == 0 {
		hd = c.Dim / c.Heads
	}
	j := map[string]any{
		"num_hidden_layers": c.Layers, "hidden_size": c.Dim, "num_attention_heads": c.Heads,
		"num_key_value_heads": c.KVHeads, "head_dim": hd, "intermediate_size": c.MLPHidden,
		"vocab_size": c.Vocab, "max_position_embeddings": c.Context, "rope_theta": c.RoPETheta,
		"rms_norm_eps": c.NormEps, "tie_word_embeddings": m.Head.Weight == m.Embed.Weight,
		"hidden_act": "silu", "initializer_range": c.InitStd, "attention_dropout": 0.0, "use_cache": true,
		"rope_scaling": nil,
	}
	if s := c.RoPEScaling; s != nil {
		j["rope_scaling"] = map[string]any{"rope_type": "llama3", "factor": s.Factor, "low_freq_factor": s.LowFreqFactor,
			"high_freq_factor": s.HighFreqFactor, "original_max_position_embeddings": s.OriginalContext}
	}
	switch {
	case c.QKVBias && !c.OutBias:
		if c.RoPEScaling != nil {
			return nil, fmt.Errorf("q/k/v biases (Qwen2) with llama3 RoPE scaling: no Hugging Face architecture has both")
		}
		delete(j, "rope_scaling")
		j["architectures"], j["model_type"] = []string{Qwen2Arch}, "qwen2"
		j["use_sliding_window"], j["sliding_window"], j["max_window_layers"] = false, c.Context, c.Layers
	case !c.QKVBias && c.OutBias:
		return nil, fmt.Errorf("an output bias without q/k/v biases: no Hugging Face architecture has it")
	default:
		j["architectures"], j["model_type"] = []string{LlamaArch}, "llama"
		j["attention_bias"], j["mlp_bias"] = c.QKVBias, false
	}
	return j, nil
}
