package models

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/hilbert-ml/hilbert/autograd"
	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/device/cuda"
	"github.com/hilbert-ml/hilbert/internal/cudaemu"
	"github.com/hilbert-ml/hilbert/nn"
	"github.com/hilbert-ml/hilbert/safetensors"
	"github.com/hilbert-ml/hilbert/tensor"
)

// GPT-2 parity with PyTorch. scripts/parity/gpt2.py builds a tiny GPT-2
// in PyTorch with random weights and writes testdata/gpt2_golden.safetensors:
// the weights, a fixed batch, and the logits, loss and every parameter's
// gradient computed in float64. This test loads the weights into NewGPT2's
// model, runs forward and backward in float32 and compares.
//
// Tolerances (Hilbert float32 against the float64 reference). Errors are
// measured per tensor against its largest |value|, floored at 1e-3 of the
// largest over all gradients (the key biases' exact gradient is zero: a
// bias on the keys shifts every score of a row, which the softmax
// cancels, so theirs is rounding noise). PyTorch's own float32 run of the
// same model is recorded in the golden metadata: logits ~9e-7, gradients
// ~3e-5 (Hilbert: ~6e-5), loss ~5e-8. The
// tolerances leave an order of magnitude over that for other summation
// orders, while a wrong formula, missing bias or transposed weight gives
// an O(1) error.
const (
	gpt2LogitTol = 1e-5
	gpt2LossTol  = 1e-5
	gpt2GradTol  = 1e-3
)

const gpt2Golden = "testdata/gpt2_golden.safetensors"

func TestGPT2ParityPyTorch(t *testing.T) { checkGPT2Parity(t, cpu.New()) }

// TestGPT2ParityOnEmulatedCUDA runs the same comparison on the CUDA
// backend (its CPU emulator): every op of the model on that backend.
func TestGPT2ParityOnEmulatedCUDA(t *testing.T) {
	if testing.Short() {
		t.Skip("the CUDA emulator compiles kernels with g++")
	}
	cudaemu.Setenv(t)
	gpu, err := cuda.New(0)
	if err != nil {
		t.Fatalf("New on the CUDA emulator: %v", err)
	}
	defer gpu.Close()
	checkGPT2Parity(t, gpu)
}

func checkGPT2Parity(t *testing.T, dev device.Device) {
	golden, err := safetensors.Open(gpt2Golden)
	if err != nil {
		t.Fatal(err)
	}
	defer golden.Close()
	var gc struct{ Layers, Dim, Heads, Vocab, Context int }
	if err := json.Unmarshal([]byte(golden.Metadata()["config"]), &gc); err != nil {
		t.Fatal(err)
	}
	cfg, err := GPT2Preset("gpt2-tiny")
	if err != nil {
		t.Fatal(err)
	}
	if gc.Layers != cfg.Layers || gc.Dim != cfg.Dim || gc.Heads != cfg.Heads || gc.Vocab != cfg.Vocab || gc.Context != cfg.Context {
		t.Fatalf("golden config %+v, gpt2-tiny %+v", gc, cfg)
	}
	m, err := NewGPT2(dev, cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	read := func(name string, shape []int) []float32 {
		v := make([]float32, tensor.Shape(shape).Numel())
		if err := golden.ReadFloat32(name, shape, v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, p := range m.Parameters() {
		p.SetFloat32(read("weight."+p.Name, p.Shape()))
	}
	inputs, targets := goldenIDs(t, dev, golden, "inputs"), goldenIDs(t, dev, golden, "targets")

	g := autograd.New(dev)
	defer g.Reset()
	logits, loss := m.Forward(g, inputs, targets)
	if err := g.Err(); err != nil {
		t.Fatal(err)
	}
	if got, want := logits.Shape(), (tensor.Shape{inputs.Dim(0), inputs.Dim(1), cfg.Vocab}); got.String() != want.String() {
		t.Fatalf("logits %v, want %v", got, want)
	}
	relErr := func(have, want []float32, floor float64) float64 {
		var maxRef, maxErr float64
		for i := range want {
			maxRef = max(maxRef, math.Abs(float64(want[i])))
			maxErr = max(maxErr, math.Abs(float64(have[i])-float64(want[i])))
		}
		return maxErr / max(maxRef, floor)
	}
	if e := relErr(logits.Float32s(), read("logits", logits.Shape()), 0); e > gpt2LogitTol {
		t.Errorf("logits: max err / max|logit| %.3g > %g", e, gpt2LogitTol)
	} else {
		t.Logf("logits: max err / max|logit| %.3g (PyTorch float32: %s)", e, golden.Metadata()["pytorch_f32_logits_max_rel_err"])
	}
	wantLoss := read("loss", []int{})[0]
	if e := math.Abs(float64(loss.Item()-wantLoss)) / float64(wantLoss); e > gpt2LossTol {
		t.Errorf("loss %.7f, want %.7f (rel err %.2g)", loss.Item(), wantLoss, e)
	}
	if err := g.Backward(loss); err != nil {
		t.Fatal(err)
	}
	want := map[string][]float32{}
	floor := 0.0
	for _, p := range m.Parameters() {
		want[p.Name] = read("grad."+p.Name, p.Shape())
		for _, v := range want[p.Name] {
			floor = max(floor, 1e-3*math.Abs(float64(v)))
		}
	}
	worst := 0.0
	for _, p := range m.Parameters() {
		e := relErr(p.Grad().Float32s(), want[p.Name], floor)
		worst = max(worst, e)
		if e > gpt2GradTol {
			t.Errorf("grad %s: max err / max|grad| %.3g > %g", p.Name, e, gpt2GradTol)
		}
	}
	t.Logf("%d gradients: worst max err / max|grad| %.3g (PyTorch float32: %s)", len(m.Parameters()), worst, golden.Metadata()["pytorch_f32_grad_max_rel_err"])
}

// TestGPT2Shape: the 124M preset has GPT-2's parameter count, the tied
// head is one parameter, and the tiny model's built count matches
// NumParams.
func TestGPT2Shape(t *testing.T) {
	c, err := GPT2Preset("gpt2")
	if err != nil {
		t.Fatal(err)
	}
	if n := c.NumParams(); n != 124439808 {
		t.Errorf("gpt2 NumParams %d, want 124439808", n)
	}
	tiny, _ := GPT2Preset("gpt2-tiny")
	m, err := NewGPT2(cpu.New(), tiny, 1)
	if err != nil {
		t.Fatal(err)
	}
	if n := nn.NumParams(m.Parameters()); n != tiny.NumParams() {
		t.Errorf("built %d parameters, NumParams %d", n, tiny.NumParams())
	}
	if tied := nn.Tied(m); tied["head.weight"] != "tok.weight" {
		t.Errorf("Tied %v, want head.weight -> tok.weight", tied)
	}
	if _, err := GPT2Preset("gpt3"); err == nil {
		t.Error("unknown preset accepted")
	}
	bad := tiny
	bad.Heads = 5
	if _, err := NewGPT2(cpu.New(), bad, 1); err == nil {
		t.Error("5 heads of width 32 accepted")
	}
}

// TestGPT2SaveLoad: a checkpoint holds the tied weight once and restores
// the model exactly (same logits).
func TestGPT2SaveLoad(t *testing.T) {
	dev := cpu.New()
	cfg, _ := GPT2Preset("gpt2-tiny")
	a, _ := NewGPT2(dev, cfg, 1)
	b, _ := NewGPT2(dev, cfg, 2)
	path := t.TempDir() + "/gpt2.safetensors"
	if err := a.Save(path, map[string]string{"preset": "gpt2-tiny"}); err != nil {
		t.Fatal(err)
	}
	f, err := safetensors.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := f.Info("head.weight"); ok {
		t.Error("the checkpoint holds the tied head.weight")
	}
	f.Close()
	if _, err := b.Load(path); err != nil {
		t.Fatal(err)
	}
	ids, _ := tensor.FromInt32(dev, []int32{3, 1, 4, 1, 5, 9, 2, 6}, 1, 8)
	run := func(m *GPT2) []float32 {
		g := autograd.New(dev)
		defer g.Reset()
		l, _ := m.Forward(g, ids, nil)
		return append([]float32(nil), l.Float32s()...)
	}
	la, lb := run(a), run(b)
	for i := range la {
		if la[i] != lb[i] {
			t.Fatalf("logit %d: %g after Load, %g saved", i, lb[i], la[i])
		}
	}
	if b.Head.Weight != b.Tok.Weight {
		t.Error("Load untied the head")
	}
}

// TestGPT2LossFused: Loss (the fused head and loss) gives Forward's loss
// and the same gradients.
func TestGPT2LossFused(t *testing.T) {
	dev := cpu.New()
	cfg, _ := GPT2Preset("gpt2-tiny")
	cfg.InitStd = 0.2
	m, _ := NewGPT2(dev, cfg, 4)
	in := make([]int32, 2*12)
	tg := make([]int32, 2*12)
	for i := range in {
		in[i], tg[i] = int32((i*13+1)%64), int32((i*5+7)%64)
	}
	inputs, _ := tensor.FromInt32(dev, in, 2, 12)
	targets, _ := tensor.FromInt32(dev, tg, 2, 12)
	run := func(fused bool) (float32, [][]float32) {
		tensor.ZeroGrad(m.Parameters())
		g := autograd.New(dev)
		defer g.Reset()
		var loss *tensor.Tensor
		if fused {
			loss = m.Loss(g, inputs, targets)
		} else {
			_, loss = m.Forward(g, inputs, targets)
		}
		if err := g.Err(); err != nil {
			t.Fatal(err)
		}
		v := loss.Item()
		if err := g.Backward(loss); err != nil {
			t.Fatal(err)
		}
		var grads [][]float32
		for _, p := range m.Parameters() {
			grads = append(grads, append([]float32(nil), p.Grad().Float32s()...))
		}
		return v, grads
	}
	lf, gf := run(true)
	lu, gu := run(false)
	if math.Abs(float64(lf-lu)) > 1e-5*math.Abs(float64(lu)) {
		t.Errorf("fused loss %g, Forward's %g", lf, lu)
	}
	for i, p := range m.Parameters() {
		if d := maxAbsDiff(gf[i], gu[i]); d > 1e-5 {
			t.Errorf("grad %s: fused and unfused differ by %g", p.Name, d)
		}
	}
}
