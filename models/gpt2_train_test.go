package models_test

import (
	"math"
	"testing"

	"github.com/hilbert-ml/hilbert/autograd"
	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/models"
	"github.com/hilbert-ml/hilbert/nn"
	"github.com/hilbert-ml/hilbert/optim"
	"github.com/hilbert-ml/hilbert/tensor"
)

func tinyBatch(t *testing.T) (inputs, targets *tensor.Tensor) {
	t.Helper()
	dev := cpu.New()
	in := make([]int32, 2*16)
	tg := make([]int32, 2*16)
	for i := range in {
		in[i], tg[i] = int32((i*7+3)%64), int32((i*11+5)%64)
	}
	inputs, _ = tensor.FromInt32(dev, in, 2, 16)
	targets, _ = tensor.FromInt32(dev, tg, 2, 16)
	return inputs, targets
}

// TestGPT2TiedStepOnce: an optimizer over the GPT-2 parameters accepts
// the tied head (one tensor, tok.weight), and one AdamW step moves it by
// one step: the first AdamW step is lr * g/(|g|+eps) ~ lr per element,
// so two updates (the head's and the embedding's) would move it by 2 lr.
func TestGPT2TiedStepOnce(t *testing.T) {
	dev := cpu.New()
	cfg, _ := models.GPT2Preset("gpt2-tiny")
	m, err := models.NewGPT2(dev, cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	const lr = 1e-3
	opt, err := optim.NewAdamW(optim.AdamWConfig{LR: lr, Beta1: 0.9, Beta2: 0.999, Eps: 1e-12}, m.Parameters())
	if err != nil {
		t.Fatal(err)
	}
	if len(opt.Params()) != len(m.Parameters()) {
		t.Fatalf("optimizer owns %d parameters, the model has %d", len(opt.Params()), len(m.Parameters()))
	}
	before := append([]float32(nil), m.Tok.Weight.Float32s()...)
	inputs, targets := tinyBatch(t)
	g := autograd.New(dev)
	defer g.Reset()
	_, loss := m.Forward(g, inputs, targets)
	if err := g.Backward(loss); err != nil {
		t.Fatal(err)
	}
	grad := m.Tok.Weight.Grad().Float32s()
	if err := opt.Step(1); err != nil {
		t.Fatal(err)
	}
	after := m.Tok.Weight.Float32s()
	checked := 0
	for i := range before {
		if math.Abs(float64(grad[i])) < 1e-6 {
			continue
		}
		checked++
		if d := math.Abs(float64(after[i] - before[i])); math.Abs(d-lr) > 1e-2*lr {
			t.Fatalf("tok.weight[%d] moved by %g, want one step of %g", i, d, lr)
		}
	}
	if checked < len(before)/2 {
		t.Fatalf("only %d of %d elements had a gradient", checked, len(before))
	}
}

// TestGPT2Dropout: in eval mode (set once on the model) dropout changes
// nothing, giving the logits of a dropout-free model; in train mode the
// logits differ and two models built from one seed agree.
func TestGPT2Dropout(t *testing.T) {
	dev := cpu.New()
	cfg, _ := models.GPT2Preset("gpt2-tiny")
	inputs, _ := tinyBatch(t)
	logits := func(p float64, train bool) []float32 {
		c := cfg
		c.Dropout = p
		m, err := models.NewGPT2(dev, c, 1)
		if err != nil {
			t.Fatal(err)
		}
		nn.SetTraining(m, train)
		g := autograd.New(dev)
		defer g.Reset()
		l, _ := m.Forward(g, inputs, nil)
		if err := g.Err(); err != nil {
			t.Fatal(err)
		}
		return append([]float32(nil), l.Float32s()...)
	}
	ref := logits(0, true)
	same := func(a, b []float32) bool {
		for i := range a {
			if a[i] != b[i] {
				return false
			}
		}
		return true
	}
	if !same(logits(0.2, false), ref) {
		t.Error("eval mode: dropout changed the logits")
	}
	tr := logits(0.2, true)
	if same(tr, ref) {
		t.Error("train mode: dropout changed nothing")
	}
	if !same(logits(0.2, true), tr) {
		t.Error("train mode: the same seed gave different logits")
	}
}
