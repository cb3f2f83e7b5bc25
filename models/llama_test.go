package models

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/hilbert-ml/hilbert/autograd"
	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/device/cuda"
	"github.com/hilbert-ml/hilbert/internal/cudaemu"
	"github.com/hilbert-ml/hilbert/nn"
	"github.com/hilbert-ml/hilbert/tensor"
)

// TestLlamaPresetParams: the presets have the parameter counts their
// model cards publish (so the shapes are those models'), and NumParams
// counts what NewLlama builds.
func TestLlamaPresetParams(t *testing.T) {
	for name, want := range map[string]int{
		"smollm-135m": 134515008, "smollm-360m": 361821120, "llama-3.2-1b": 1235814400, "qwen2-0.5b": 494032768,
	} {
		c, err := LlamaPreset(name)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.NumParams(); got != want {
			t.Errorf("%s: %d parameters, want %d", name, got, want)
		}
	}
	for _, c := range []LlamaConfig{
		llamaPresets["llama-tiny"],
		{Layers: 1, Dim: 16, Heads: 4, KVHeads: 1, HeadDim: 6, MLPHidden: 24, Vocab: 11, Context: 8, RoPETheta: 100,
			NormEps: 1e-6, QKVBias: true, OutBias: true, TieEmbeddings: true},
	} {
		m, err := NewLlama(cpu.New(), c, 1)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := nn.NumParams(m.Parameters()), c.NumParams(); got != want {
			t.Errorf("%+v: built %d parameters, NumParams %d", c, got, want)
		}
	}
	if _, err := LlamaPreset("llama-7b"); err == nil {
		t.Error("an unknown preset gave no error")
	}
}

// TestLlamaCachedChunks: running a sequence (float64) through the KV cache in two
// chunks (the second attends to the first with a causal mask inside
// itself) gives the logits of the whole sequence at once, and Generate
// with the cache gives NoCache's tokens.
func TestLlamaCachedChunks(t *testing.T) {
	dev := cpu.New()
	cfg := llamaPresets["llama-tiny"]
	cfg.InitStd, cfg.DType = 0.3, device.Float64
	m, err := NewLlama(dev, cfg, 7)
	if err != nil {
		t.Fatal(err)
	}
	seq := []int32{3, 1, 4, 1, 5, 9, 2, 6, 5}
	g := autograd.New(dev)
	g.SetNoGrad(true)
	defer g.Reset()
	ids := func(v []int32) *tensor.Tensor {
		x, err := tensor.FromInt32(dev, v, 1, len(v))
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	whole := m.ForwardCached(g, ids(seq), nil).Float64s()
	cache := nn.NewKVCache(m.Layers())
	defer cache.Release()
	first := m.ForwardCached(g, ids(seq[:4]), cache).Float64s()
	second := m.ForwardCached(g, ids(seq[4:]), cache).Float64s()
	if err := g.Err(); err != nil {
		t.Fatal(err)
	}
	chunks := append(first, second...)
	worst, scale := 0.0, 0.0
	for i := range whole {
		worst = max(worst, math.Abs(chunks[i]-whole[i]))
		scale = max(scale, math.Abs(whole[i]))
	}
	if worst > 1e-12*scale {
		t.Errorf("chunked logits differ from whole-sequence logits by %.3g (largest logit %.3g)", worst, scale)
	}
	a, err := Generate(dev, m, seq[:3], GenerateOptions{Tokens: 20})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Generate(dev, m, seq[:3], GenerateOptions{Tokens: 20, NoCache: true})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(a, b) {
		t.Errorf("cached %v, uncached %v", a, b)
	}
}

// TestLlamaGradCheck compares the float64 backward pass of a Llama with
// every option on (GQA with one KV head, head dim 6 != dim/heads, q/k/v
// and output biases, tied head, RoPE) with central differences, for the
// largest and two random elements of every parameter. In float64 with
// step 1e-5 the truncation error is ~1e-10 relative, so 1e-6 relative
// (plus 1e-9 absolute) separates rounding from a wrong rule.
func TestLlamaGradCheck(t *testing.T) {
	dev := cpu.New()
	cfg := LlamaConfig{Layers: 2, Dim: 16, Heads: 4, KVHeads: 1, HeadDim: 6, MLPHidden: 24, Vocab: 11, Context: 8,
		RoPETheta: 100, NormEps: 1e-6, QKVBias: true, OutBias: true, TieEmbeddings: true, InitStd: 0.4, DType: device.Float64}
	m, err := NewLlama(dev, cfg, 3)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	in, tg := make([]int32, 2*6), make([]int32, 2*6)
	for i := range in {
		in[i], tg[i] = int32(rng.IntN(cfg.Vocab)), int32(rng.IntN(cfg.Vocab))
	}
	inputs, _ := tensor.FromInt32(dev, in, 2, 6)
	targets, _ := tensor.FromInt32(dev, tg, 2, 6)
	g := autograd.New(dev)
	if err := g.Backward(m.Loss(g, inputs, targets)); err != nil {
		t.Fatal(err)
	}
	lossAt := func() float64 {
		g.Reset()
		g.SetNoGrad(true)
		defer g.SetNoGrad(false)
		l := m.Loss(g, inputs, targets)
		if err := g.Err(); err != nil {
			t.Fatal(err)
		}
		return l.Float64s()[0]
	}
	const h = 1e-5
	for _, p := range m.Parameters() {
		grad := p.Grad().Float64s()
		big := 0
		for i := range grad {
			if math.Abs(grad[i]) > math.Abs(grad[big]) {
				big = i
			}
		}
		w := p.Float64s()
		for _, i := range []int{big, rng.IntN(len(w)), rng.IntN(len(w))} {
			orig := w[i]
			w[i] = orig + h
			p.SetFloat64(w)
			up := lossAt()
			w[i] = orig - h
			p.SetFloat64(w)
			down := lossAt()
			w[i] = orig
			p.SetFloat64(w)
			if fd := (up - down) / (2 * h); math.Abs(fd-grad[i]) > 1e-6*math.Abs(grad[i])+1e-9 {
				t.Errorf("%s[%d]: analytic %.10g, finite difference %.10g", p.Name, i, grad[i], fd)
			}
		}
	}
}

// TestLlamaOnEmulatedCUDA: on the CUDA backend (its emulator) llama-tiny
// (GQA 4/2, head dim 16) gives the CPU's logits and gradients to float32
// rounding, and the CPU's greedy tokens with the KV cache.
func TestLlamaOnEmulatedCUDA(t *testing.T) {
	if testing.Short() {
		t.Skip("the CUDA emulator compiles kernels with g++")
	}
	cudaemu.Setenv(t)
	gpu, err := cuda.New(0)
	if err != nil {
		t.Fatalf("New on the CUDA emulator: %v", err)
	}
	defer gpu.Close()
	cfg := llamaPresets["llama-tiny"]
	cfg.InitStd = 0.3
	seq := []int32{3, 1, 4, 1, 5, 9, 2, 6}
	var logits, grads [2][]float32
	var greedy [2][]int32
	for i, dev := range []device.Device{cpu.New(), gpu} {
		m, err := NewLlama(dev, cfg, 11)
		if err != nil {
			t.Fatal(err)
		}
		g := autograd.New(dev)
		in, _ := tensor.FromInt32(dev, seq[:7], 1, 7)
		tg, _ := tensor.FromInt32(dev, seq[1:], 1, 7)
		l, loss := m.Forward(g, in, tg)
		if err := g.Err(); err != nil {
			t.Fatal(err)
		}
		logits[i] = l.Float32s()
		if err := g.Backward(loss); err != nil {
			t.Fatal(err)
		}
		for _, p := range m.Parameters() {
			grads[i] = append(grads[i], p.Grad().Float32s()...)
		}
		g.Reset()
		if greedy[i], err = Generate(dev, m, seq[:3], GenerateOptions{Tokens: 12}); err != nil {
			t.Fatal(err)
		}
	}
	if d := maxAbsDiff(logits[0], logits[1]); d > 1e-4 {
		t.Errorf("logits differ between CPU and CUDA by %g", d)
	}
	if d := maxAbsDiff(grads[0], grads[1]); d > 1e-4 {
		t.Errorf("gradients differ between CPU and CUDA by %g", d)
	}
	if !slices.Equal(greedy[0], greedy[1]) {
		t.Errorf("greedy tokens: CPU %v, CUDA %v", greedy[0], greedy[1])
	}
	t.Logf("CPU vs CUDA: logits %.2g, gradients %.2g apart; %d greedy tokens equal",
		maxAbsDiff(logits[0], logits[1]), maxAbsDiff(grads[0], grads[1]), len(greedy[0]))
}
