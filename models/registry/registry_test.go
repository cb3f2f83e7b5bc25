package registry

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/hilbert-ml/hilbert/autograd"
	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/models"
	"github.com/hilbert-ml/hilbert/optim"
	"github.com/hilbert-ml/hilbert/tensor"
)

// small is a preset shrunk for building in a test (same architecture,
// same parameter names and roles, fewer layers and a small vocabulary):
// the big presets are checked by shape only.
func small(cfg any) any {
	switch c := cfg.(type) {
	case models.Config:
		c.Layers, c.Vocab, c.Context = min(c.Layers, 2), 64, 16
		if c.Dim > 256 {
			c.Dim, c.MLPHidden = 128, 512
		}
		return c
	case models.GPT2Config:
		c.Layers, c.Vocab, c.Context = min(c.Layers, 2), 64, 16
		if c.Dim > 256 {
			c.Dim, c.Heads = 64, 4
		}
		return c
	case models.LlamaConfig:
		c.Layers, c.Vocab, c.Context = min(c.Layers, 2), 64, 16
		if c.Dim > 256 {
			c.Dim, c.Heads, c.KVHeads, c.MLPHidden = 64, 4, 2, 128
		}
		return c
	}
	return cfg
}

// TestPresets: the built-in families have today's presets, GPT-2's real
// shapes for the big ones, and for every preset (shrunk) and either head
// the roles cover every parameter exactly once.
func TestPresets(t *testing.T) {
	want := map[string][]string{
		"paper": {"190m", "380m", "640m", "cpu-128", "cpu-256"},
		"gpt2":  {"gpt2", "gpt2-large", "gpt2-medium", "gpt2-tiny", "gpt2-xl"},
		"llama": {"llama-tiny", "smollm-135m", "smollm-360m", "llama-3.2-1b", "qwen2-0.5b"},
	}
	shapes := map[string][3]int{"gpt2": {12, 768, 12}, "gpt2-medium": {24, 1024, 16}, "gpt2-large": {36, 1280, 20}, "gpt2-xl": {48, 1600, 25}}
	for fam, names := range want {
		f, err := Lookup(fam)
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(names)
		if got := f.PresetNames(); !slices.Equal(got, names) {
			t.Errorf("%s presets %v, want %v", fam, got, names)
		}
		for _, p := range names {
			cfg, _ := f.Preset(p)
			if s, ok := shapes[p]; ok {
				c := cfg.(models.GPT2Config)
				if [3]int{c.Layers, c.Dim, c.Heads} != s || c.Vocab != 50257 || c.Context != 1024 {
					t.Errorf("%s: %+v, want layers, dim, heads %v, vocab 50257, context 1024", p, c, s)
				}
			}
			for _, untie := range []bool{false, true} {
				lc, isLlama := cfg.(models.LlamaConfig)
				if untie && (fam == "paper" || isLlama && !lc.TieEmbeddings) {
					continue
				}
				m, err := f.Build(cpu.New(), small(cfg), BuildOptions{Seed: 1, UntieHead: untie})
				if err != nil {
					t.Fatalf("%s/%s: %v", fam, p, err)
				}
				r, err := f.Roles(m)
				if err != nil {
					t.Fatalf("%s/%s untie=%v: %v", fam, p, untie, err)
				}
				count := map[Role]int{}
				for _, q := range m.Parameters() {
					count[r.Of[q.Name]]++
				}
				if len(r.Of) != len(m.Parameters()) || count[Matrix] == 0 || count[Embedding] == 0 {
					t.Errorf("%s/%s: %d roles for %d parameters (%v)", fam, p, len(r.Of), len(m.Parameters()), count)
				}
				if tied := (fam == "gpt2" || lc.TieEmbeddings) && !untie; (r.TiedTo != "") != tied || (count[Head] == 1) == tied {
					t.Errorf("%s/%s untie=%v: tied to %q, %d heads", fam, p, untie, r.TiedTo, count[Head])
				}
			}
		}
	}
}

// TestLookupErrors: unknown names are named with what there is.
func TestLookupErrors(t *testing.T) {
	if _, err := Lookup("mamba"); err == nil || !strings.Contains(err.Error(), `unknown model "mamba" (have gpt2, llama, paper`) {
		t.Errorf("Lookup(mamba): %v", err)
	}
	f, _ := Lookup("gpt2")
	if _, err := f.Preset("190m"); err == nil || !strings.Contains(err.Error(), `model "gpt2" has no preset "190m" (have gpt2, gpt2-large`) {
		t.Errorf("gpt2 preset 190m: %v", err)
	}
	if _, err := f.Build(cpu.New(), models.Config{}, BuildOptions{}); err == nil || !strings.Contains(err.Error(), "takes a models.GPT2Config config, got models.Config") {
		t.Errorf("gpt2 built from a paper config: %v", err)
	}
	if err := Register(Family{Name: "gpt2", Build: f.Build, Roles: f.Roles}); err == nil || !strings.Contains(err.Error(), "already registered") {
		t.Errorf("registering gpt2 twice: %v", err)
	}
}

// TestTiedHead: RowNorm on GPT-2's tied head is a clear error; the AdamW
// head trains it with the embedding; untied, RowNorm takes the copy, and
// the untied model's logits equal the tied one's at initialisation.
func TestTiedHead(t *testing.T) {
	f, _ := Lookup("gpt2")
	tied, _ := f.BuildPreset(cpu.New(), "gpt2-tiny", BuildOptions{Seed: 2})
	r, _ := f.Roles(tied)
	if _, err := Recipe(r, tied.Parameters(), RecipeOptions{}); err == nil || !strings.Contains(err.Error(), "tied to tok.weight: RowNorm cannot take a tied head") {
		t.Errorf("RowNorm on a tied head: %v", err)
	}
	if _, err := Recipe(r, tied.Parameters(), RecipeOptions{Head: optim.HeadAdamW, HeadLR: 1e-3}); err == nil || !strings.Contains(err.Error(), "head LR") {
		t.Errorf("head LR for a tied head: %v", err)
	}
	rec, err := Recipe(r, tied.Parameters(), RecipeOptions{Head: optim.HeadAdamW})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := optim.NewSet(rec, tied.Parameters()); err != nil {
		t.Fatalf("AdamW recipe of a tied GPT-2: %v", err)
	}
	untied, _ := f.BuildPreset(cpu.New(), "gpt2-tiny", BuildOptions{Seed: 2, UntieHead: true})
	ru, _ := f.Roles(untied)
	rec, err = Recipe(ru, untied.Parameters(), RecipeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := optim.NewSet(rec, untied.Parameters())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, g := range s.Groups() {
		names = append(names, g.Name)
	}
	if !slices.Equal(names, []string{"blocks", "embed", "head", "gains"}) {
		t.Errorf("untied GPT-2 groups %v", names)
	}
	if _, ok := s.Group("head").(*optim.RowNorm); !ok {
		t.Errorf("untied head's optimizer %T, want RowNorm", s.Group("head"))
	}
	a := logits(t, tied, []int32{1, 2, 3})
	b := logits(t, untied, []int32{1, 2, 3})
	if !slices.Equal(a, b) {
		t.Errorf("untying changed the logits at initialisation")
	}
}

// TestPaperRecipeByRoles: the paper model's recipe from roles gives the
// groups of optim.PaperRecipe, the same members, and a bit-identical
// update, for both heads.
func TestPaperRecipeByRoles(t *testing.T) {
	f, _ := Lookup("paper")
	cfg := models.Config{Layers: 2, Dim: 64, HeadDim: 16, MLPHidden: 256, Vocab: 96, Context: 16, RoPEBase: 10000, InitStd: 0.02}
	for _, head := range []optim.HeadOptimizer{optim.HeadRowNorm, optim.HeadAdamW} {
		var after [2][][]float32
		var groups [2][]string
		for k := range 2 {
			m, err := f.Build(cpu.New(), cfg, BuildOptions{Seed: 5})
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(7, 8))
			for _, p := range m.Parameters() {
				g := make([]float32, p.Len())
				for i := range g {
					g[i] = float32(rng.NormFloat64())
				}
				gt, _ := tensor.FromFloat32(p.Device(), g, p.Shape()...)
				p.SetGrad(gt)
			}
			var rec optim.Recipe
			if k == 0 {
				rec = optim.PaperRecipe(optim.PaperOptions{Head: head, Width: cfg.Dim})
			} else {
				r, err := f.Roles(m)
				if err != nil {
					t.Fatal(err)
				}
				if rec, err = Recipe(r, m.Parameters(), RecipeOptions{Head: head, Width: cfg.Dim}); err != nil {
					t.Fatal(err)
				}
			}
			s, err := optim.NewSet(rec, m.Parameters())
			if err != nil {
				t.Fatal(err)
			}
			for _, g := range s.Groups() {
				groups[k] = append(groups[k], g.Name)
				for _, p := range m.Parameters() {
					if s.Optimizer(p) == g.Optimizer {
						groups[k] = append(groups[k], p.Name)
					}
				}
			}
			for range 2 {
				if err := s.Step(1); err != nil {
					t.Fatal(err)
				}
			}
			for _, p := range m.Parameters() {
				after[k] = append(after[k], p.Float32s())
			}
		}
		if !slices.Equal(groups[0], groups[1]) {
			t.Errorf("head %v: groups by name %v, by roles %v", head, groups[0], groups[1])
		}
		for i := range after[0] {
			if !bitEqual(after[0][i], after[1][i]) {
				t.Errorf("head %v: parameter %d differs after two steps", head, i)
			}
		}
	}
}

func bitEqual(a, b []float32) bool {
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

// logits runs m over ids and returns its logits.
func logits(t *testing.T, m Model, ids []int32) []float32 {
	t.Helper()
	dev := cpu.New()
	g := autograd.New(dev)
	g.SetNoGrad(true)
	defer g.Reset()
	in, err := tensor.FromInt32(dev, ids, 1, len(ids))
	if err != nil {
		t.Fatal(err)
	}
	defer in.Release()
	out := m.ForwardCached(g, in, nil)
	if err := g.Err(); err != nil {
		t.Fatal(err)
	}
	return out.Float32s()
}
