package train

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hilbert-ml/hilbert/data"
	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/models"
	"github.com/hilbert-ml/hilbert/models/registry"
	"github.com/hilbert-ml/hilbert/nn"
	"github.com/hilbert-ml/hilbert/optim"
	"github.com/hilbert-ml/hilbert/safetensors"
)

// familyConfig is tinyConfig with a model of another family.
func familyConfig(t *testing.T, runs string, shards []string, val, family string, arch any, untie bool, head string) Config {
	c := tinyConfig(t, runs, shards, val)
	c.Model, c.Family, c.Arch, c.UntieHead, c.Head = models.Config{}, family, arch, untie, head
	return c
}

func tinyGPT2() models.GPT2Config {
	return models.GPT2Config{Layers: 2, Dim: 32, Heads: 2, Vocab: tinyVocab, Context: 16, InitStd: 0.02}
}

func tinyLlama() models.LlamaConfig {
	c, err := models.LlamaPreset("llama-tiny")
	if err != nil {
		panic(err)
	}
	c.Vocab, c.Context = tinyVocab, 16
	return c
}

// TestTrainerTrainsEveryFamily: the one trainer runs GPT-2 (tied head with
// AdamW, untied with RowNorm) and Llama, each interrupted and resumed bit
// for bit; the diagnostics exist exactly where the head is untied, and
// RowNorm's D(S_t) <= 2 lr_t holds on each.
func TestTrainerTrainsEveryFamily(t *testing.T) {
	dataDir := t.TempDir()
	shards, val := writeTinyShards(t, dataDir)
	cases := []struct {
		name, family string
		arch         any
		untie        bool
		head         string
		diagnostics  bool
	}{
		{"gpt2 tied adamw", "gpt2", tinyGPT2(), false, "adamw", false},
		{"gpt2 untied rownorm", "gpt2", tinyGPT2(), true, "rownorm", true},
		{"llama rownorm", "llama", tinyLlama(), false, "rownorm", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			straightCfg := familyConfig(t, t.TempDir(), shards, val, tc.family, tc.arch, tc.untie, tc.head)
			straightCfg.Steps = 8
			straight, err := runToEnd(t, straightCfg, false, 0)
			if err != nil {
				t.Fatal(err)
			}
			cfg := straightCfg
			cfg.RunsDir = t.TempDir()
			if _, err := runToEnd(t, cfg, false, 6); !errors.Is(err, ErrInterrupted) {
				t.Fatalf("interrupted run: %v, want ErrInterrupted", err)
			}
			resumed, err := runToEnd(t, cfg, true, 0)
			if err != nil {
				t.Fatal(err)
			}
			a, b := straight.History(), resumed.History()
			if len(a) != len(b) || len(a) != cfg.Steps+1 {
				t.Fatalf("records: %d and %d, want %d", len(a), len(b), cfg.Steps+1)
			}
			for i := range a {
				if !sameRecord(a[i], b[i]) {
					t.Errorf("update %d differs:\nuninterrupted %+v\nresumed       %+v", a[i].Step, a[i], b[i])
				}
			}
			s := straight.Summary()
			if got := !math.IsNaN(s.Diameter) && !math.IsNaN(s.HilbertRMS); got != tc.diagnostics {
				t.Errorf("diagnostics D %v, Hilbert RMS %v: want present = %v", s.Diameter, s.HilbertRMS, tc.diagnostics)
			}
			if a[0].ValLoss == nil || !(s.ValLoss < *a[0].ValLoss) {
				t.Errorf("validation loss %v did not fall from the initial %v", s.ValLoss, a[0].ValLoss)
			}
			for _, r := range a {
				if tc.head == "rownorm" && r.Diameter != nil && *r.Diameter > 2**r.LR*(1+1e-6) {
					t.Errorf("update %d: D(S_t) = %g > 2 lr_t = %g", r.Step, *r.Diameter, 2**r.LR)
				}
			}
			// The checkpoint rebuilds the model: the family, its
			// configuration and the untied head, with the trained weights.
			ck, err := OpenCheckpoint(filepath.Join(resumed.Dir(), "checkpoints"))
			if err != nil {
				t.Fatal(err)
			}
			defer ck.Close()
			m, err := ck.BuildModel(cpu.New())
			if err != nil {
				t.Fatal(err)
			}
			want, got := straight.Model().Parameters(), m.Parameters()
			if len(want) != len(got) {
				t.Fatalf("rebuilt model has %d parameters, want %d", len(got), len(want))
			}
			for i := range want {
				if got[i].Name != want[i].Name || !equalFloats(got[i].Float32s(), want[i].Float32s()) {
					t.Errorf("parameter %s of the rebuilt model differs from the trained %s", got[i].Name, want[i].Name)
				}
			}
			if tied := len(nn.Tied(m)) > 0; tied != (tc.family == "gpt2" && !tc.untie) {
				t.Errorf("rebuilt model tied = %v", tied)
			}
			if _, err := os.Stat(filepath.Join(resumed.Dir(), "summary.md")); err != nil {
				t.Error(err)
			}
		})
	}
}

func equalFloats(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

// TestTrainerFamilyErrors: what the run layer refuses, with the words
// that name the problem.
func TestTrainerFamilyErrors(t *testing.T) {
	dataDir := t.TempDir()
	shards, val := writeTinyShards(t, dataDir)
	big := tinyGPT2()
	big.Vocab = 50
	cases := []struct {
		name string
		edit func(c *Config)
		want []string
	}{
		{"unknown family", func(c *Config) { c.Family, c.Arch = "nope", nil }, []string{`unknown model "nope"`, "gpt2", "llama", "paper"}},
		{"tied head with rownorm", func(c *Config) { c.UntieHead = false; c.Head = "rownorm" }, []string{"tied to the embedding", "RowNorm", "-untie-head"}},
		{"tied head with a head lr", func(c *Config) { c.UntieHead = false; c.Head = "adamw"; c.HeadLR = 0.1 }, []string{"head LR", "tied"}},
		{"untie the paper's head", func(c *Config) {
			*c = tinyConfig(t, c.RunsDir, shards, val)
			c.UntieHead = true
		}, []string{"already untied"}},
		{"arch of another family", func(c *Config) { c.Arch = tinyLlama() }, []string{"gpt2", "models.GPT2Config", "models.LlamaConfig"}},
		{"paper model with another family", func(c *Config) { c.Model = tinyConfig(t, "", nil, "").Model }, []string{"Arch", "Model"}},
		{"no preset or arch", func(c *Config) { c.Arch = nil }, []string{"no configuration", "gpt2-tiny"}},
		{"data past the vocabulary", func(c *Config) { c.Arch = big }, []string{"50"}},
		{"seq_len past the context", func(c *Config) { c.SeqLen = 32 }, []string{"seq_len = 32", "1..16"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := familyConfig(t, t.TempDir(), shards, val, "gpt2", tinyGPT2(), true, "rownorm")
			tc.edit(&c)
			tr, err := New(cpu.New(), c)
			if err == nil {
				err = tr.Run(context.Background(), nil)
				tr.Close()
			}
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

// TestPaperFamilyThroughTheRegistry: the paper's model built by the run
// layer through the registry is models.New's, and its recipe from roles
// has the paper recipe's groups and peak rates.
func TestPaperFamilyThroughTheRegistry(t *testing.T) {
	dataDir := t.TempDir()
	shards, val := writeTinyShards(t, dataDir)
	cfg, err := tinyConfig(t, t.TempDir(), shards, val).WithDefaults()
	if err != nil {
		t.Fatal(err)
	}
	rm, err := buildModel(cpu.New(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	direct, err := models.New(cpu.New(), cfg.Model, cfg.Seed)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range direct.Parameters() {
		if q := rm.Parameters()[i]; q.Name != p.Name || !equalFloats(q.Float32s(), p.Float32s()) {
			t.Errorf("parameter %d: %s from the registry differs from models.New's %s", i, q.Name, p.Name)
		}
	}
	if rm.head == nil || rm.head.Name != "head.weight" || rm.vocab != tinyVocab || rm.dim != cfg.Model.Dim {
		t.Errorf("head %v, vocab %d, dim %d", rm.head, rm.vocab, rm.dim)
	}
	r, err := rm.recipe(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, g := range r.Groups {
		names = append(names, g.Name)
	}
	if strings.Join(names, ",") != "blocks,embed,head" {
		t.Errorf("groups %v, want blocks, embed, head (no gains: the paper's norms have none)", names)
	}
	if _, err := registry.Lookup(cfg.FamilyName()); err != nil || cfg.FamilyName() != "paper" {
		t.Errorf("family %q: %v", cfg.FamilyName(), err)
	}
}

// TestOneCheckpointFormat: a Loop reads a run's checkpoint (weights,
// optimizer state and data position, with the run's loader as its
// source), and a run refuses a Loop's checkpoint, which records no
// settings, saying what it is.
func TestOneCheckpointFormat(t *testing.T) {
	dataDir := t.TempDir()
	shards, val := writeTinyShards(t, dataDir)
	cfg := tinyConfig(t, t.TempDir(), shards, val)
	cfg.Steps = 4
	tr, err := runToEnd(t, cfg, false, 0)
	if err != nil {
		t.Fatal(err)
	}
	full, _ := cfg.WithDefaults()
	dev := cpu.New()
	rm, err := buildModel(dev, full)
	if err != nil {
		t.Fatal(err)
	}
	recipe, err := rm.recipe(full)
	if err != nil {
		t.Fatal(err)
	}
	set, err := optim.NewSet(recipe, rm.Parameters())
	if err != nil {
		t.Fatal(err)
	}
	loader, err := data.NewLoader(data.LoaderConfig{Shards: shards, Vocab: tinyVocab, SeqLen: full.SeqLen,
		MicroBatch: full.MicroBatch, BatchSeqs: full.BatchSeqs, Seed: full.DataSeed})
	if err != nil {
		t.Fatal(err)
	}
	defer loader.Close()
	loop, err := NewLoop(dev, LM(dev, rm.lm), LoaderSource(loader, full.MicroBatch, full.SeqLen), set, LoopConfig{})
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(tr.Dir(), "checkpoints")
	if err := loop.Load(root); err != nil {
		t.Fatalf("a Loop loading a run's checkpoint: %v", err)
	}
	dir, step, raw, _, err := readLatest(root)
	if err != nil {
		t.Fatal(err)
	}
	st, err := decodeState(filepath.Join(dir, "state.json"), raw, step)
	if err != nil {
		t.Fatal(err)
	}
	if loop.Step() != 4 || loader.Cursor() != st.Cursor {
		t.Errorf("loaded update %d, cursor %+v; the run's checkpoint: %d, %+v", loop.Step(), loader.Cursor(), st.Step, st.Cursor)
	}
	for i, p := range tr.Model().Parameters() {
		if q := rm.Parameters()[i]; !equalFloats(p.Float32s(), q.Float32s()) {
			t.Errorf("parameter %s differs after the load", p.Name)
		}
	}
	// The Loop's own checkpoint in the run's place: refused by the run.
	if err := loop.Save(root); err != nil {
		t.Fatal(err)
	}
	if _, err := loop.Update(); err != nil {
		t.Fatal(err)
	}
	if err := loop.Save(root); err != nil {
		t.Fatal(err)
	}
	again, err := New(dev, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	err = again.Resume()
	if err == nil || !strings.Contains(err.Error(), "holds no run settings") || !strings.Contains(err.Error(), "train.Loop") {
		t.Errorf("a run resuming a Loop's checkpoint: %v", err)
	}
	// And the Loop reads its own back at update 5.
	if err := loop.Load(root); err != nil || loop.Step() != 5 {
		t.Errorf("Loop.Load of its own checkpoint: update %d, %v", loop.Step(), err)
	}
}

// TestFloat64Run: a float64 run (Config.DType) trains the paper's model
// with every step in float64: interrupted and resumed bit for bit, its
// checkpoint holds F64 parameters and optimizer state, and its losses and
// diagnostics agree with the float32 run's to float32 rounding without
// being equal to them.
func TestFloat64Run(t *testing.T) {
	dataDir := t.TempDir()
	shards, val := writeTinyShards(t, dataDir)
	c32 := tinyConfig(t, t.TempDir(), shards, val)
	c32.Steps = 8
	r32, err := runToEnd(t, c32, false, 0)
	if err != nil {
		t.Fatal(err)
	}
	c64 := c32
	c64.RunsDir, c64.DType = t.TempDir(), "float64"
	r64, err := runToEnd(t, c64, false, 0)
	if err != nil {
		t.Fatal(err)
	}
	cut := c64
	cut.RunsDir = t.TempDir()
	if _, err := runToEnd(t, cut, false, 5); !errors.Is(err, ErrInterrupted) {
		t.Fatalf("interrupted float64 run: %v", err)
	}
	resumed, err := runToEnd(t, cut, true, 0)
	if err != nil {
		t.Fatal(err)
	}
	a, b, f := r64.History(), resumed.History(), r32.History()
	if len(a) != len(b) || len(a) != len(f) {
		t.Fatalf("records: %d, %d, %d", len(a), len(b), len(f))
	}
	equal := true
	for i := range a {
		if !sameRecord(a[i], b[i]) {
			t.Errorf("update %d differs after the resume:\n%+v\n%+v", a[i].Step, a[i], b[i])
		}
		if a[i].Step > 0 {
			if rel := math.Abs(a[i].Loss-f[i].Loss) / f[i].Loss; rel > 1e-4 {
				t.Errorf("update %d: float64 loss %v, float32 %v: relative gap %.2g past float32 rounding", a[i].Step, a[i].Loss, f[i].Loss, rel)
			}
			equal = equal && a[i].Loss == f[i].Loss
		}
		if a[i].Diameter != nil && math.Abs(*a[i].Diameter-*f[i].Diameter) > 1e-3**f[i].Diameter {
			t.Errorf("update %d: D(S_t) %v in float64, %v in float32", a[i].Step, *a[i].Diameter, *f[i].Diameter)
		}
	}
	if equal {
		t.Error("the float64 run's losses equal the float32 run's: it did not run in float64")
	}
	for _, p := range r64.Model().Parameters() {
		if p.DType() != device.Float64 {
			t.Fatalf("parameter %s is %v", p.Name, p.DType())
		}
	}
	for _, file := range []string{"model.safetensors", "optim.safetensors"} {
		sf, err := safetensors.Open(filepath.Join(resumed.Dir(), "checkpoints", "step-0000008", file))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range sf.Tensors() {
			if e.DType != safetensors.F64 {
				t.Errorf("%s: %s is %s, want F64", file, e.Name, e.DType)
			}
		}
		sf.Close()
	}
	// float64 with autocast is refused, naming both.
	bad := c64
	bad.Autocast = "bf16"
	if _, err := bad.WithDefaults(); err == nil || !strings.Contains(err.Error(), "dtype = float64") || !strings.Contains(err.Error(), "autocast") {
		t.Errorf("float64 with bf16 autocast: %v", err)
	}
}
