package hf

import (
	"bytes"
	"encoding/json"
	"flag"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/models"
	"github.com/hilbert-ml/hilbert/safetensors"
)

var update = flag.Bool("update", false, "rewrite testdata/export-* from hf.Save and scripts/hf/read_export.py")

// sameParams fails unless a and b have the same parameters, bit for bit.
func sameParams(t *testing.T, a, b Model) {
	t.Helper()
	pa, pb := a.Parameters(), b.Parameters()
	if len(pa) != len(pb) {
		t.Fatalf("%d parameters, then %d", len(pa), len(pb))
	}
	for i := range pa {
		if pa[i].Name != pb[i].Name || !slices.Equal(pa[i].Shape(), pb[i].Shape()) {
			t.Fatalf("parameter %s %v, then %s %v", pa[i].Name, pa[i].Shape(), pb[i].Name, pb[i].Shape())
		}
		x, y := pa[i].Float64s(), pb[i].Float64s()
		for j := range x {
			if math.Float64bits(x[j]) != math.Float64bits(y[j]) {
				t.Fatalf("%s[%d]: %v, then %v", pa[i].Name, j, x[j], y[j])
			}
		}
	}
}

// TestSaveRoundTrip: Save then Load gives bit-identical parameters (F32,
// for GPT-2 tied and untied, Llama untied, Qwen2 and a tied Llama with
// RoPE scaling), the same config, and saving again gives the same bytes.
func TestSaveRoundTrip(t *testing.T) {
	dev := cpu.New()
	for _, c := range []struct {
		fixture string
		untie   bool
	}{{"gpt2", false}, {"gpt2", true}, {"llama", false}, {"qwen2", false}, {"llama3-scaled", false}} {
		t.Run(c.fixture, func(t *testing.T) {
			m, cfg, err := Load(dev, filepath.Join("testdata", c.fixture), Options{UntieHead: c.untie})
			if err != nil {
				t.Fatal(err)
			}
			dir, again := t.TempDir(), t.TempDir()
			if err := Save(dir, m, safetensors.F32); err != nil {
				t.Fatal(err)
			}
			back, cfg2, err := Load(dev, dir, Options{})
			if err != nil {
				t.Fatal(err)
			}
			sameParams(t, m, back)
			if cfg2.Architecture != cfg.Architecture || cfg2.Tied != (cfg.Tied && !c.untie) || cfg2.LayerNormEps != cfg.LayerNormEps {
				t.Errorf("config %+v, then %+v", cfg, cfg2)
			}
			if err := Save(again, back, safetensors.F32); err != nil {
				t.Fatal(err)
			}
			for _, f := range []string{"config.json", "model.safetensors"} {
				a, _ := os.ReadFile(filepath.Join(dir, f))
				b, _ := os.ReadFile(filepath.Join(again, f))
				if !bytes.Equal(a, b) {
					t.Errorf("%s differs between two saves", f)
				}
			}
		})
	}
}

// TestSaveHalfLayout: a BF16 checkpoint loaded and saved as BF16, and
// an F16 one (Qwen2's) saved as F16, store every tensor with the bytes of
// the original (GPT-2's c_attn fused and its Conv1D weights transposed
// back exactly), under the original names; a value beyond F16's range is
// an error naming the tensor, and nothing is written.
func TestSaveHalfLayout(t *testing.T) {
	for _, c := range []struct {
		fixture string
		dtype   safetensors.DType
	}{{"gpt2-bf16", safetensors.BF16}, {"llama-bf16", safetensors.BF16}, {"qwen2", safetensors.F16}} {
		fixture := c.fixture
		t.Run(fixture, func(t *testing.T) {
			src := filepath.Join("testdata", fixture)
			m, _, err := Load(cpu.New(), src, Options{})
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			if err := Save(dir, m, c.dtype); err != nil {
				t.Fatal(err)
			}
			orig, err := safetensors.Open(filepath.Join(src, "model.safetensors"))
			if err != nil {
				t.Fatal(err)
			}
			defer orig.Close()
			out, err := safetensors.Open(filepath.Join(dir, "model.safetensors"))
			if err != nil {
				t.Fatal(err)
			}
			defer out.Close()
			if out.Metadata()["format"] != "pt" {
				t.Errorf("metadata %v: transformers wants format pt", out.Metadata())
			}
			for _, in := range out.Tensors() {
				want, ok := orig.Info(in.Name)
				if !ok || in.DType != c.dtype || !slices.Equal(in.Shape, want.Shape) {
					t.Fatalf("exported %s %s %v; the original has %+v (present %v)", in.Name, in.DType, in.Shape, want, ok)
				}
				a, b := make([]byte, in.End-in.Begin), make([]byte, want.End-want.Begin)
				if err := out.ReadBytes(in.Name, a); err != nil {
					t.Fatal(err)
				}
				if err := orig.ReadBytes(in.Name, b); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(a, b) {
					t.Errorf("%s: exported bytes differ from the original's", in.Name)
				}
			}
			t.Logf("%d tensors byte-identical", len(out.Tensors()))
		})
	}
	m, _, err := Load(cpu.New(), filepath.Join("testdata", "gpt2"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	ln := m.(*models.GPT2).Blocks[1].LN2.Weight
	v := ln.Float32s()
	v[3] = 70000
	ln.SetFloat32(v)
	dir := t.TempDir()
	err = Save(dir, m, safetensors.F16)
	if err == nil || !strings.Contains(err.Error(), "transformer.h.1.ln_2.weight holds 70000") {
		t.Errorf("F16 of 70000: %v; want an error naming the tensor", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "model.safetensors")); err == nil {
		t.Error("the failed F16 save left a model.safetensors")
	}
}

// exported is read_export.py's output.
type exported struct {
	Architecture string
	DTypes       []string
	Logits64     []float64
	Loss64       float64
	Greedy       []int32
}

// TestExportPyTorch: hf.Save's directories are what testdata/export-*
// holds (GPT-2 in F32, Qwen2 in BF16), and what PyTorch computes from them
// (scripts/hf/read_export.py, run here when /usr/bin/python3 has torch,
// else its committed output) matches the Go model loaded back from them:
// float64 logits and loss within 1e-10, greedy tokens equal.
func TestExportPyTorch(t *testing.T) {
	python := "/usr/bin/python3"
	haveTorch := exec.Command(python, "-c", "import torch").Run() == nil
	if !haveTorch {
		t.Logf("%s has no torch: comparing with the committed read_export.py output", python)
	}
	dev := cpu.New()
	for _, c := range []struct {
		fixture string
		dtype   safetensors.DType
	}{{"gpt2", safetensors.F32}, {"qwen2", safetensors.BF16}} {
		t.Run(c.fixture, func(t *testing.T) {
			m, _, err := Load(dev, filepath.Join("testdata", c.fixture), Options{})
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			if err := Save(dir, m, c.dtype); err != nil {
				t.Fatal(err)
			}
			committed := filepath.Join("testdata", "export-"+c.fixture)
			golden := filepath.Join("testdata", c.fixture, "golden.json")
			var out []byte
			if haveTorch {
				cmd := exec.Command(python, filepath.Join("..", "..", "scripts", "hf", "read_export.py"), dir, golden)
				cmd.Stderr = os.Stderr
				if out, err = cmd.Output(); err != nil {
					t.Fatalf("read_export.py: %v", err)
				}
			}
			if *update {
				if !haveTorch {
					t.Fatal("-update needs torch")
				}
				os.MkdirAll(committed, 0o755)
				for _, f := range []string{"config.json", "model.safetensors"} {
					b, _ := os.ReadFile(filepath.Join(dir, f))
					os.WriteFile(filepath.Join(committed, f), b, 0o644)
				}
				os.WriteFile(filepath.Join(committed, "pytorch.json"), out, 0o644)
			}
			for _, f := range []string{"config.json", "model.safetensors"} {
				a, _ := os.ReadFile(filepath.Join(dir, f))
				b, err := os.ReadFile(filepath.Join(committed, f))
				if err != nil || !bytes.Equal(a, b) {
					t.Errorf("%s differs from %s (err %v): rerun with -update if Save changed on purpose", f, committed, err)
				}
			}
			if !haveTorch {
				if out, err = os.ReadFile(filepath.Join(committed, "pytorch.json")); err != nil {
					t.Fatal(err)
				}
			}
			var py exported
			if err := json.Unmarshal(out, &py); err != nil {
				t.Fatal(err)
			}
			back, cfg, err := Load(dev, dir, Options{DType: device.Float64})
			if err != nil {
				t.Fatal(err)
			}
			want := readGolden(t, filepath.Join("testdata", c.fixture))
			logits, loss := run(t, dev, back, want.Tokens)
			e, le := relErr(logits, py.Logits64), math.Abs(loss-py.Loss64)/py.Loss64
			if py.Architecture != cfg.Architecture || !slices.Equal(py.DTypes, []string{string(c.dtype)}) || e > 1e-10 || le > 1e-10 {
				t.Errorf("PyTorch read %s %v: logits rel err %.3g, loss rel err %.3g (want %s %s, within 1e-10)", py.Architecture, py.DTypes, e, le, cfg.Architecture, c.dtype)
			}
			got, err := models.Generate(dev, back, want.Prompt, models.GenerateOptions{Tokens: len(py.Greedy)})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, py.Greedy) {
				t.Errorf("greedy %v, PyTorch %v", got, py.Greedy)
			}
			t.Logf("%s %s export read by PyTorch: logits rel err %.2g, loss rel err %.2g, %d greedy tokens equal", cfg.Architecture, c.dtype, e, le, len(got))
		})
	}
}
