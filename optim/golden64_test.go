package optim

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/tensor"
)

// golden64 is testdata/golden64.json, written by scripts/optim/golden64.py
// from PyTorch float64 steps.
type golden64 struct {
	Scales []float64
	Cases  []goldenCase
}

type goldenCase struct {
	Name, Kind string
	Config     json.RawMessage
	Params     []struct {
		Name  string
		Shape []int
		Data  []float64
	}
	Grads [][][]float64 // [update][parameter]
	Want  [][][]float64 // parameters after each update
}

func readGolden64(t *testing.T) golden64 {
	t.Helper()
	raw, err := os.ReadFile("testdata/golden64.json")
	if err != nil {
		t.Fatal(err)
	}
	var g golden64
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatalf("testdata/golden64.json: %v", err)
	}
	return g
}

// goldenConfig decodes a case's hyper-parameters into the kind's Config.
func goldenConfig(t *testing.T, c goldenCase) Config {
	t.Helper()
	var cfg Config
	switch c.Kind {
	case "adamw":
		var a AdamWConfig
		cfg = &a
	case "sgd":
		var s SGDConfig
		cfg = &s
	case "muon":
		var m MuonConfig
		cfg = &m
	case "rownorm":
		var r RowNormConfig
		cfg = &r
	case "lion":
		var l LionConfig
		cfg = &l
	default:
		t.Fatalf("%s: kind %q", c.Name, c.Kind)
	}
	if err := json.Unmarshal(c.Config, cfg); err != nil {
		t.Fatalf("%s: config: %v", c.Name, err)
	}
	// The pointer receivers' Configs are the values'.
	switch v := cfg.(type) {
	case *AdamWConfig:
		return *v
	case *SGDConfig:
		return *v
	case *MuonConfig:
		return *v
	case *RowNormConfig:
		return *v
	case *LionConfig:
		return *v
	}
	return nil
}

func goldenParams(t *testing.T, c goldenCase) []*tensor.Tensor {
	t.Helper()
	ps := make([]*tensor.Tensor, len(c.Params))
	for i, gp := range c.Params {
		p, err := tensor.FromFloat64(cpu.New(), gp.Data, gp.Shape...)
		if err != nil {
			t.Fatal(err)
		}
		p.Name = gp.Name
		p.SetRequiresGrad(true)
		ps[i] = p
	}
	return ps
}

func setGrads64(t *testing.T, ps []*tensor.Tensor, grads [][]float64) {
	t.Helper()
	for i, p := range ps {
		g, err := tensor.FromFloat64(p.Device(), grads[i], p.Shape()...)
		if err != nil {
			t.Fatal(err)
		}
		p.SetGrad(g)
	}
}

// maxRelDiff is max |got - want| / max(1, |want|).
func maxRelDiff(got, want []float64) float64 {
	if len(got) != len(want) {
		return math.Inf(1)
	}
	var d float64
	for i := range got {
		d = max(d, math.Abs(got[i]-want[i])/max(1, math.Abs(want[i])))
	}
	if math.IsNaN(d) {
		return math.Inf(1)
	}
	return d
}

// TestGolden64 runs every optimizer and ClipGradNorm on float64 parameters
// for five updates under the paper's cosine schedule, against PyTorch
// float64 (torch.optim.AdamW and SGD; Muon and RowNorm as their
// definitions in torch operations), to 1e-12. Halfway, the optimizer
// state is saved with SaveState64 and loaded into a fresh set, which
// finishes the run.
func TestGolden64(t *testing.T) {
	g := readGolden64(t)
	sched := Cosine{Total: 5, Warmup: 1, Final: 0.1}
	for s, want := range g.Scales {
		if got := sched.Scale(s); math.Abs(got-want) > 1e-15 {
			t.Errorf("Cosine.Scale(%d) = %v, PyTorch's script %v", s, got, want)
		}
	}
	const tol = 1e-12
	for _, c := range g.Cases {
		t.Run(c.Name, func(t *testing.T) {
			ps := goldenParams(t, c)
			if c.Kind == "clip" {
				var cfg struct{ MaxNorm float64 }
				if err := json.Unmarshal(c.Config, &cfg); err != nil {
					t.Fatal(err)
				}
				for s, grads := range c.Grads {
					setGrads64(t, ps, grads)
					if _, err := ClipGradNorm(ps, cfg.MaxNorm); err != nil {
						t.Fatal(err)
					}
					for i, p := range ps {
						if d := maxRelDiff(p.Grad().Float64s(), c.Want[s][i]); d > tol {
							t.Errorf("update %d: clipped gradient of %s differs from PyTorch by %.3g", s, p.Name, d)
						}
					}
				}
				return
			}
			recipe := Recipe{Groups: []GroupSpec{{Name: c.Kind, Match: Prefix(""), Config: goldenConfig(t, c)}}}
			set, err := NewSet(recipe, ps)
			if err != nil {
				t.Fatal(err)
			}
			var worst float64
			defer func() { t.Logf("largest relative difference from PyTorch: %.3g", worst) }()
			for s, grads := range c.Grads {
				if s == len(c.Grads)/2 {
					// Resume from saved state: a fresh set over copies.
					tensors, counters := set.SaveState64()
					fresh := make([]*tensor.Tensor, len(ps))
					for i, p := range ps {
						q, err := tensor.FromFloat64(p.Device(), p.Float64s(), p.Shape()...)
						if err != nil {
							t.Fatal(err)
						}
						q.Name = p.Name
						fresh[i] = q
					}
					if set, err = NewSet(recipe, fresh); err != nil {
						t.Fatal(err)
					}
					if err := set.LoadState64(tensors, counters); err != nil {
						t.Fatal(err)
					}
					ps = fresh
				}
				setGrads64(t, ps, grads)
				if err := set.Step(sched.Scale(s)); err != nil {
					t.Fatal(err)
				}
				for i, p := range ps {
					if p.DType().String() != "float64" {
						t.Fatalf("%s became %v", p.Name, p.DType())
					}
					d := maxRelDiff(p.Float64s(), c.Want[s][i])
					worst = max(worst, d)
					if d > tol {
						t.Errorf("update %d: %s differs from PyTorch float64 by %.3g (tolerance %g)", s, p.Name, d, tol)
					}
				}
			}
		})
	}
}

// runFloat32Case runs a golden case on float32 parameters under the golden
// schedule, calling after with the update's index and the parameters after
// each update.
func runFloat32Case(t *testing.T, c goldenCase, after func(s int, ps []*tensor.Tensor)) {
	t.Helper()
	ps := make([]*tensor.Tensor, len(c.Params))
	for i, gp := range c.Params {
		ps[i] = param(t, gp.Name, gp.Data, gp.Shape...)
	}
	opt, err := goldenConfig(t, c).New(ps)
	if err != nil {
		t.Fatal(err)
	}
	sched := Cosine{Total: 5, Warmup: 1, Final: 0.1}
	for s, grads := range c.Grads {
		for i, p := range ps {
			setGrad(t, p, grads[i])
		}
		if err := opt.Step(sched.Scale(s)); err != nil {
			t.Fatal(err)
		}
		after(s, ps)
	}
}

// TestGolden64Float32Rounds shows the golden test has teeth: the same AdamW
// case in float32 misses PyTorch's float64 values by far more than 1e-12.
func TestGolden64Float32Rounds(t *testing.T) {
	g := readGolden64(t)
	for _, c := range g.Cases {
		if c.Kind != "adamw" {
			continue
		}
		var worst float64
		runFloat32Case(t, c, func(s int, ps []*tensor.Tensor) {
			for i, p := range ps {
				worst = max(worst, maxRelDiff(f64(p.Float32s()), c.Want[s][i]))
			}
		})
		if worst < 1e-9 {
			t.Errorf("float32 AdamW within %.3g of PyTorch float64: the float64 comparison proves nothing", worst)
		}
		return
	}
	t.Fatal("no adamw case in testdata/golden64.json")
}

// TestPaperRecipeFloat64 runs the paper's recipe (Muon blocks, AdamW
// embedding, RowNorm head, clipped at 1) on float64 parameters and on the
// same parameters rounded to float32, for three updates: the float64 run
// stays float64 and agrees with the float32 one to float32 rounding, yet
// differs from it (so it did not step in float32).
func TestPaperRecipeFloat64(t *testing.T) {
	shapes := map[string][]int{"embed.weight": {6, 4}, "blocks.0.w": {4, 4}, "blocks.0.v": {8, 4}, "head.weight": {6, 4}}
	names := []string{"embed.weight", "blocks.0.w", "blocks.0.v", "head.weight"}
	rng := rand.New(rand.NewPCG(5, 6))
	init := map[string][]float64{}
	for _, n := range names {
		init[n] = round32(randn(rng, tensor.Shape(shapes[n]).Numel(), 0.5))
	}
	var grads [3]map[string][]float64
	for s := range grads {
		grads[s] = map[string][]float64{}
		for _, n := range names {
			grads[s][n] = round32(randn(rng, tensor.Shape(shapes[n]).Numel(), 1))
		}
	}
	run := func(mk func(name string, data []float64, shape []int) *tensor.Tensor, setG func(p *tensor.Tensor, g []float64)) map[string][]float64 {
		ps := make([]*tensor.Tensor, len(names))
		for i, n := range names {
			ps[i] = mk(n, init[n], shapes[n])
		}
		set, err := NewSet(PaperRecipe(PaperOptions{Width: 4}), ps)
		if err != nil {
			t.Fatal(err)
		}
		sched := Cosine{Total: 3, Warmup: 1, Final: 0.1}
		for s := range grads {
			for i, n := range names {
				setG(ps[i], grads[s][n])
			}
			if _, err := ClipGradNorm(ps, 1); err != nil {
				t.Fatal(err)
			}
			if err := set.Step(sched.Scale(s)); err != nil {
				t.Fatal(err)
			}
		}
		out := map[string][]float64{}
		for i, n := range names {
			out[n] = ps[i].Float64s()
		}
		return out
	}
	p64 := run(func(name string, data []float64, shape []int) *tensor.Tensor {
		p, err := tensor.FromFloat64(cpu.New(), data, shape...)
		if err != nil {
			t.Fatal(err)
		}
		p.Name = name
		p.SetRequiresGrad(true)
		return p
	}, func(p *tensor.Tensor, g []float64) { setGrads64(t, []*tensor.Tensor{p}, [][]float64{g}) })
	p32 := run(func(name string, data []float64, shape []int) *tensor.Tensor {
		return param(t, name, data, shape...)
	}, func(p *tensor.Tensor, g []float64) { setGrad(t, p, g) })
	for _, n := range names {
		near(t, n, p64[n], p32[n], 1e-5, 1e-5)
		if maxRelDiff(p64[n], p32[n]) == 0 {
			t.Errorf("%s: the float64 run equals the float32 one bit for bit", n)
		}
	}
}
