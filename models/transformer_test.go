package models

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/hilbert-ml/hilbert/autograd"
	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/nn"
	"github.com/hilbert-ml/hilbert/tensor"
)

func TestPresetParamCounts(t *testing.T) {
	cases := []struct {
		preset string
		dim    int
		want   int
	}{
		{"190m", 512, 185_680_896},
		{"380m", 768, 379_184_640},
		{"640m", 1024, 639_797_248},
	}
	for _, c := range cases {
		cfg, err := Preset(c.preset)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Dim != c.dim || cfg.Layers != 32 || cfg.Vocab != 50257 || cfg.Context != 2048 || cfg.HeadDim != 64 {
			t.Errorf("%s: config %+v", c.preset, cfg)
		}
		if got := cfg.NumParams(); got != c.want {
			t.Errorf("%s: %d parameters, want %d", c.preset, got, c.want)
		}
	}
	if _, err := Preset("7b"); err == nil {
		t.Error("unknown preset accepted")
	}
}

// tinyConfig is a whole model small enough for finite differences.
func tinyConfig() Config {
	return Config{Layers: 2, Dim: 32, HeadDim: 16, MLPHidden: 128, Vocab: 37, Context: 8, RoPEBase: 10000, InitStd: 0.02}
}

func randomBatch(dev *cpu.Device, seed uint64, b, t, vocab int) (inputs, targets *tensor.Tensor) {
	rng := rand.New(rand.NewPCG(seed, 1))
	seq := make([]int32, b*(t+1))
	for i := range seq {
		seq[i] = int32(rng.IntN(vocab))
	}
	in, tg := make([]int32, b*t), make([]int32, b*t)
	for i := range b {
		copy(in[i*t:], seq[i*(t+1):i*(t+1)+t])
		copy(tg[i*t:], seq[i*(t+1)+1:(i+1)*(t+1)])
	}
	inputs, _ = tensor.FromInt32(dev, in, b, t)
	targets, _ = tensor.FromInt32(dev, tg, b, t)
	return inputs, targets
}

func TestNamesAndCount(t *testing.T) {
	dev := cpu.New()
	cfg := tinyConfig()
	m, err := New(dev, cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	ps := m.Parameters()
	want := []string{"embed.weight",
		"blocks.0.attn.q.weight", "blocks.0.attn.k.weight", "blocks.0.attn.v.weight", "blocks.0.attn.out.weight",
		"blocks.0.mlp.gate.weight", "blocks.0.mlp.up.weight", "blocks.0.mlp.down.weight",
		"blocks.1.attn.q.weight", "blocks.1.attn.k.weight", "blocks.1.attn.v.weight", "blocks.1.attn.out.weight",
		"blocks.1.mlp.gate.weight", "blocks.1.mlp.up.weight", "blocks.1.mlp.down.weight",
		"head.weight"}
	if len(ps) != len(want) {
		t.Fatalf("%d parameters, want %d", len(ps), len(want))
	}
	n := 0
	for i, p := range ps {
		if p.Name != want[i] {
			t.Errorf("parameter %d named %q, want %q", i, p.Name, want[i])
		}
		if !p.RequiresGrad() {
			t.Errorf("%s does not require grad", p.Name)
		}
		n += p.Len()
	}
	if n != cfg.NumParams() {
		t.Errorf("%d parameter elements, config says %d", n, cfg.NumParams())
	}
	// Init is N(0, 0.02^2): check the sample std of the embedding.
	var ss float64
	e := ps[0].Float32s()
	for _, v := range e {
		ss += float64(v) * float64(v)
	}
	if std := math.Sqrt(ss / float64(len(e))); math.Abs(std-0.02) > 0.002 {
		t.Errorf("embedding init std %g, want 0.02", std)
	}
}

func TestForwardInitialLoss(t *testing.T) {
	dev := cpu.New()
	cfg := tinyConfig()
	m, err := New(dev, cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	inputs, targets := randomBatch(dev, 2, 2, 5, cfg.Vocab)
	g := autograd.New(dev)
	loss, hidden := m.Forward(g, inputs, targets, ForwardOptions{Hidden: true, KeepHidden: true})
	if err := g.Err(); err != nil {
		t.Fatal(err)
	}
	if got, want := float64(loss.Item()), math.Log(float64(cfg.Vocab)); math.Abs(got-want) > 0.05 {
		t.Errorf("initial loss %g, want about ln V = %g", got, want)
	}
	if err := g.Backward(loss); err != nil {
		t.Fatal(err)
	}
	if s := hidden.Shape(); len(s) != 2 || s[0] != 10 || s[1] != cfg.Dim {
		t.Errorf("hidden shape %v", s)
	}
	// RMS-normalised rows have mean square ms/(ms+eps), within 1% of 1 for
	// activations of the init's scale (ms ~ 4e-4 against eps 1e-6).
	h := hidden.Float32s()
	var ss float64
	for _, v := range h[:cfg.Dim] {
		ss += float64(v) * float64(v)
	}
	if ms := ss / float64(cfg.Dim); math.Abs(ms-1) > 1e-2 {
		t.Errorf("hidden row mean square %g, want 1", ms)
	}
	hidden.Release()
	for _, p := range m.Parameters() {
		if p.Grad() == nil {
			t.Errorf("%s has no gradient", p.Name)
		}
	}
}

// TestForwardErrors: bad inputs are recorded in the graph with a message
// naming the problem, and both entry points return nil.
func TestForwardErrors(t *testing.T) {
	dev := cpu.New()
	cfg := tinyConfig()
	m, err := New(dev, cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	ids := func(b, n int) *tensor.Tensor {
		x, err := tensor.FromInt32(dev, make([]int32, b*n), b, n)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	flat, _ := tensor.FromInt32(dev, make([]int32, 4), 4)
	full := kvCacheFor(t, m, dev, cfg.Context)
	defer full.Release()
	cases := []struct {
		name string
		run  func(g *autograd.Graph) bool // whether the results were nil
		want string
	}{
		{"nil inputs", func(g *autograd.Graph) bool {
			l, h := m.Forward(g, nil, ids(1, 4), ForwardOptions{})
			return l == nil && h == nil
		},
			"want two equal [batch, seq] shapes"},
		{"targets of another shape", func(g *autograd.Graph) bool {
			l, h := m.Forward(g, ids(1, 4), ids(2, 4), ForwardOptions{})
			return l == nil && h == nil
		}, "want two equal [batch, seq] shapes"},
		{"sequence past the context", func(g *autograd.Graph) bool {
			l, h := m.Forward(g, ids(1, cfg.Context+1), ids(1, cfg.Context+1), ForwardOptions{})
			return l == nil && h == nil
		}, "positions 0..8 exceed the context of 8"},
		{"rank-1 inputs to ForwardCached", func(g *autograd.Graph) bool { return m.ForwardCached(g, flat, nil) == nil },
			"want [batch, seq]"},
		{"a full cache", func(g *autograd.Graph) bool { return m.ForwardCached(g, ids(1, 1), full) == nil },
			"positions 8..8 exceed the context of 8"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := autograd.New(dev)
			g.SetNoGrad(true)
			defer g.Reset()
			if !c.run(g) {
				t.Error("non-nil result on bad input")
			}
			if err := g.Err(); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want one containing %q", err, c.want)
			}
		})
	}
}

// kvCacheFor returns a KV cache of m holding n positions of batch 1.
func kvCacheFor(t *testing.T, m *Transformer, dev *cpu.Device, n int) *nn.KVCache {
	t.Helper()
	cache := nn.NewKVCache(m.Layers())
	g := autograd.New(dev)
	g.SetNoGrad(true)
	defer g.Reset()
	x, _ := tensor.FromInt32(dev, make([]int32, n), 1, n)
	if m.ForwardCached(g, x, cache) == nil {
		t.Fatal(g.Err())
	}
	return cache
}
