package hf

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/safetensors"
)

// copyFixture copies testdata/name to a temporary directory.
func copyFixture(t *testing.T, name string) string {
	t.Helper()
	src, dst := filepath.Join("testdata", name), t.TempDir()
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// editConfig rewrites dir/config.json through edit.
func editConfig(t *testing.T, dir string, edit func(map[string]any)) {
	t.Helper()
	path := filepath.Join(dir, "config.json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	edit(c)
	if b, err = json.Marshal(c); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// editTensors rewrites dir/model.safetensors through edit, which may
// change a tensor or drop it (returning false), and adds extra.
func editTensors(t *testing.T, dir string, edit func(*safetensors.Tensor) bool, extra ...safetensors.Tensor) {
	t.Helper()
	path := filepath.Join(dir, "model.safetensors")
	f, err := safetensors.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	var ts []safetensors.Tensor
	for _, in := range f.Tensors() {
		x := safetensors.Tensor{Name: in.Name, DType: in.DType, Shape: in.Shape, Data: make([]byte, in.End-in.Begin)}
		if err := f.ReadBytes(in.Name, x.Data); err != nil {
			t.Fatal(err)
		}
		if edit(&x) {
			ts = append(ts, x)
		}
	}
	f.Close()
	if err := safetensors.Save(path, append(ts, extra...), nil); err != nil {
		t.Fatal(err)
	}
}

// TestLoadErrors: each way a directory can be wrong is an error naming
// the field, or the tensor, its file and both shapes, and never a panic.
func TestLoadErrors(t *testing.T) {
	cases := []struct {
		name    string
		fixture string
		edit    func(t *testing.T, dir string)
		want    []string
	}{
		{"architecture", "llama", func(t *testing.T, dir string) {
			editConfig(t, dir, func(c map[string]any) { c["architectures"] = []string{"MambaForCausalLM"} })
		}, []string{`architecture "MambaForCausalLM" is not supported`, "config.json"}},
		{"activation", "gpt2", func(t *testing.T, dir string) {
			editConfig(t, dir, func(c map[string]any) { c["activation_function"] = "relu" })
		}, []string{`field "activation_function" is "relu": not supported`}},
		{"unknown field", "llama", func(t *testing.T, dir string) {
			editConfig(t, dir, func(c map[string]any) { c["partial_rotary_factor"] = 0.5 })
		}, []string{`LlamaForCausalLM field "partial_rotary_factor" not supported`}},
		{"rope scaling type", "llama", func(t *testing.T, dir string) {
			editConfig(t, dir, func(c map[string]any) { c["rope_scaling"] = map[string]any{"rope_type": "yarn", "factor": 4} })
		}, []string{`field "rope_scaling": rope_type "yarn": only "llama3" is supported`}},
		{"sliding window", "qwen2", func(t *testing.T, dir string) {
			editConfig(t, dir, func(c map[string]any) { c["use_sliding_window"] = true })
		}, []string{`field "use_sliding_window": true: sliding-window attention is not supported`}},
		{"missing field", "gpt2", func(t *testing.T, dir string) {
			editConfig(t, dir, func(c map[string]any) { delete(c, "n_embd") })
		}, []string{`field "n_embd" is missing`}},
		{"missing tensor", "llama", func(t *testing.T, dir string) {
			editTensors(t, dir, func(x *safetensors.Tensor) bool { return x.Name != "model.layers.1.mlp.up_proj.weight" })
		}, []string{`tensor "layers.1.mlp.up_proj.weight" (with or without the "model." prefix; for blocks.1.mlp.up.weight [40 16]) is missing from`, "model.safetensors"}},
		{"extra tensor", "gpt2", func(t *testing.T, dir string) {
			editTensors(t, dir, func(*safetensors.Tensor) bool { return true },
				safetensors.Tensor{Name: "h.0.attn.rel_pos", DType: safetensors.F32, Shape: []int{1}, Data: make([]byte, 4)})
		}, []string{`tensors not in a GPT2LMHeadModel model: "h.0.attn.rel_pos" in`, "model.safetensors"}},
		{"misshapen tensor", "gpt2", func(t *testing.T, dir string) {
			editTensors(t, dir, func(x *safetensors.Tensor) bool {
				if x.Name == "h.1.mlp.c_fc.weight" { // stored as nn.Linear's [out, in]
					x.Shape = []int{64, 16}
				}
				return true
			})
		}, []string{`tensor "h.1.mlp.c_fc.weight" in`, "model.safetensors has shape [64 16], the model's blocks.1.fc.weight needs [16 64]"}},
		{"integer tensor", "llama", func(t *testing.T, dir string) {
			editTensors(t, dir, func(x *safetensors.Tensor) bool {
				if x.Name == "model.norm.weight" {
					x.DType = safetensors.I32
				}
				return true
			})
		}, []string{`tensor "model.norm.weight" in`, "has dtype I32"}},
		{"untied lm_head", "gpt2-bf16", func(t *testing.T, dir string) {
			editTensors(t, dir, func(x *safetensors.Tensor) bool {
				if x.Name == "lm_head.weight" {
					x.Data[0] ^= 1
				}
				return true
			})
		}, []string{`tensor "lm_head.weight" in`, `differs from the embedding "transformer.wte.weight"`}},
		{"duplicate names", "llama", func(t *testing.T, dir string) {
			editTensors(t, dir, func(*safetensors.Tensor) bool { return true },
				safetensors.Tensor{Name: "norm.weight", DType: safetensors.F32, Shape: []int{16}, Data: make([]byte, 64)})
		}, []string{`"model.norm.weight" in`, `and "norm.weight" in`, "are the same tensor"}},
		{"shard index", "llama-sharded", func(t *testing.T, dir string) {
			path := filepath.Join(dir, "model.safetensors.index.json")
			b, _ := os.ReadFile(path)
			b = []byte(strings.Replace(string(b), `"model.norm.weight": "model-00002-of-00002.safetensors"`, `"model.norm.weight": "model-00001-of-00002.safetensors"`, 1))
			os.WriteFile(path, b, 0o644)
		}, []string{`tensor "model.norm.weight" is not listed for this shard`}},
		{"no weights", "llama", func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, "model.safetensors"))
		}, []string{"holds neither model.safetensors nor model.safetensors.index.json"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := copyFixture(t, c.fixture)
			c.edit(t, dir)
			_, _, err := Load(cpu.New(), dir, Options{DType: device.Float32})
			if err == nil {
				t.Fatal("no error")
			}
			t.Log(err)
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\nwant it to contain %q", err, w)
				}
			}
		})
	}
}
