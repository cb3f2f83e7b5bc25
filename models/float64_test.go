package models

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/hilbert-ml/hilbert/autograd"
	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/optim"
	"github.com/hilbert-ml/hilbert/tensor"
)

// TestTransformerFloat64Run is a paper run replayed in float64 at library
// level: the Transformer built with DType float64 draws the float32 model's
// initial numbers unrounded, trains five updates of the paper's recipe
// (Muon blocks, AdamW embedding, RowNorm head, clipping at 1, cosine
// schedule) in float64, and its losses agree with the float32 run's to
// float32 rounding; its parameters save as F64 and load back bit for bit.
func TestTransformerFloat64Run(t *testing.T) {
	run := func(dt device.DType) ([]float64, *Transformer) {
		cfg := tinyConfig()
		cfg.DType = dt
		m, err := New(cpu.New(), cfg, 3)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range m.Parameters() {
			if p.DType() != dt {
				t.Fatalf("%s is %v, want %v", p.Name, p.DType(), dt)
			}
		}
		set, err := optim.NewSet(optim.PaperRecipe(optim.PaperOptions{Width: cfg.Dim}), m.Parameters())
		if err != nil {
			t.Fatal(err)
		}
		sched := optim.Cosine{Total: 5, Warmup: 1, Final: 0.1}
		g := autograd.New(cpu.New())
		var losses []float64
		for step := range 5 {
			inputs, targets := randomBatch(cpu.New(), uint64(20+step), 2, cfg.Context, cfg.Vocab)
			g.Reset()
			set.ZeroGrad()
			loss, _ := m.Forward(g, inputs, targets, ForwardOptions{})
			if err := g.Err(); err != nil {
				t.Fatal(err)
			}
			if loss.DType() != dt {
				t.Fatalf("loss is %v", loss.DType())
			}
			losses = append(losses, loss.Float64s()[0])
			if err := g.Backward(loss); err != nil {
				t.Fatal(err)
			}
			if _, err := optim.ClipGradNorm(m.Parameters(), 1); err != nil {
				t.Fatal(err)
			}
			if err := set.Step(sched.Scale(step)); err != nil {
				t.Fatal(err)
			}
		}
		g.Reset()
		return losses, m
	}
	l32, _ := run(device.Float32)
	l64, m64 := run(device.Float64)
	for i := range l32 {
		if d := math.Abs(l64[i]-l32[i]) / l64[i]; d > 1e-5 || l64[i] == l32[i] {
			t.Errorf("update %d: float64 loss %.12g, float32 %.12g (rel diff %.2g: want within float32 rounding, and not equal)", i, l64[i], l32[i], d)
		}
	}
	t.Logf("float64 losses %.9g; float32 %.9g", l64, l32)

	path := filepath.Join(t.TempDir(), "m64.safetensors")
	if err := m64.Save(path, nil); err != nil {
		t.Fatal(err)
	}
	cfg := tinyConfig()
	cfg.DType = device.Float64
	back, err := New(cpu.New(), cfg, 4)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := back.Load(path); err != nil {
		t.Fatal(err)
	}
	for i, p := range m64.Parameters() {
		if !equal64(p, back.Parameters()[i]) {
			t.Fatalf("%s differs after Save and Load", p.Name)
		}
	}
}

func equal64(a, b *tensor.Tensor) bool {
	x, y := a.Float64s(), b.Float64s()
	for i := range x {
		if math.Float64bits(x[i]) != math.Float64bits(y[i]) {
			return false
		}
	}
	return len(x) == len(y)
}
