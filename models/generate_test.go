package models

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/hilbert-ml/hilbert/autograd"
	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/device/cuda"
	"github.com/hilbert-ml/hilbert/internal/cudaemu"
	"github.com/hilbert-ml/hilbert/nn"
	"github.com/hilbert-ml/hilbert/tensor"
)

// genModels are the two families at test size, with an init std large
// enough that the next-token distributions are far from uniform.
func genModels(t *testing.T) map[string]LM {
	t.Helper()
	dev := cpu.New()
	tiny, _ := GPT2Preset("gpt2-tiny")
	tiny.InitStd = 0.3
	gpt, err := NewGPT2(dev, tiny, 3)
	if err != nil {
		t.Fatal(err)
	}
	paper, err := New(dev, Config{Layers: 2, Dim: 64, HeadDim: 16, MLPHidden: 128, Vocab: 64, Context: 16, RoPEBase: 10000, InitStd: 0.3}, 3)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]LM{"gpt2": gpt, "transformer": paper}
}

// TestGenerateCacheMatchesNoCache: the same seed gives the same tokens
// with and without the KV cache, for greedy decoding and for sampling
// with temperature, top-k and top-p; greedy decoding is deterministic and
// each greedy token is the argmax of a whole-sequence forward pass.
func TestGenerateCacheMatchesNoCache(t *testing.T) {
	dev := cpu.New()
	prompt := []int32{5, 17, 42}
	opts := []GenerateOptions{
		{Tokens: 13},
		{Tokens: 13, Temperature: 1, Seed: 1},
		{Tokens: 13, Temperature: 0.8, TopK: 10, Seed: 2},
		{Tokens: 13, Temperature: 1.2, TopP: 0.9, Seed: 3},
		{Tokens: 13, Temperature: 1, TopK: 20, TopP: 0.7, Seed: 4},
	}
	for name, m := range genModels(t) {
		for _, o := range opts {
			t.Run(fmt.Sprintf("%s/T=%g,k=%d,p=%g", name, o.Temperature, o.TopK, o.TopP), func(t *testing.T) {
				cached, err := Generate(dev, m, prompt, o)
				if err != nil {
					t.Fatal(err)
				}
				o2 := o
				o2.NoCache = true
				full, err := Generate(dev, m, prompt, o2)
				if err != nil {
					t.Fatal(err)
				}
				if fmt.Sprint(cached) != fmt.Sprint(full) {
					t.Errorf("with cache %v, without %v", cached, full)
				}
				if len(cached) != o.Tokens {
					t.Errorf("%d tokens, want %d", len(cached), o.Tokens)
				}
				again, _ := Generate(dev, m, prompt, o)
				if fmt.Sprint(again) != fmt.Sprint(cached) {
					t.Errorf("same seed, second run %v, first %v", again, cached)
				}
				if o.Temperature == 0 {
					checkGreedy(t, m, prompt, cached)
				}
			})
		}
	}
}

// checkGreedy: each greedy token is the argmax of the last row of a
// whole-sequence forward pass.
func checkGreedy(t *testing.T, m LM, prompt, out []int32) {
	dev := cpu.New()
	g := autograd.New(dev)
	g.SetNoGrad(true)
	seq := append([]int32(nil), prompt...)
	for _, tok := range out {
		ids, _ := tensor.FromInt32(dev, seq, 1, len(seq))
		l := m.ForwardCached(g, ids, nil)
		if g.Err() != nil {
			t.Fatal(g.Err())
		}
		v := l.Dim(2)
		row := l.Float32s()[(len(seq)-1)*v:]
		best := 0
		for i := range row {
			if row[i] > row[best] {
				best = i
			}
		}
		if int32(best) != tok {
			t.Fatalf("greedy token %d after %v, argmax %d", tok, seq, best)
		}
		seq = append(seq, tok)
		g.Reset()
	}
}

// TestGenerateCachedLogits: the logits of a token fed through the cache
// equal the last row of the whole sequence's logits.
func TestGenerateCachedLogits(t *testing.T) {
	dev := cpu.New()
	seq := []int32{1, 9, 33, 7, 60, 2, 2, 14}
	for name, m := range genModels(t) {
		g := autograd.New(dev)
		g.SetNoGrad(true)
		ids, _ := tensor.FromInt32(dev, seq, 1, len(seq))
		full := append([]float32(nil), m.ForwardCached(g, ids, nil).Float32s()...)
		g.Reset()
		cache := nnCache(m)
		v := len(full) / len(seq)
		for i := range seq {
			one, _ := tensor.FromInt32(dev, seq[i:i+1], 1, 1)
			l := m.ForwardCached(g, one, cache)
			if g.Err() != nil {
				t.Fatal(g.Err())
			}
			if d := maxAbsDiff(l.Float32s(), full[i*v:(i+1)*v]); d > 1e-4 {
				t.Errorf("%s: position %d: cached logits differ by %g", name, i, d)
			}
			g.Reset()
		}
		cache.Release()
	}
}

func maxAbsDiff(a, b []float32) float64 {
	d := 0.0
	for i := range a {
		d = max(d, math.Abs(float64(a[i]-b[i])))
	}
	return d
}

// TestSampler: top-k 1 and a tiny top-p are greedy; at temperature 1 the
// draws follow softmax(logits) (frequencies within 4 standard errors);
// top-k only ever returns the k most likely tokens.
func TestSampler(t *testing.T) {
	logits := []float32{0.5, 2, -1, 1.5, 0, 1}
	var s sampler
	for step := range uint64(50) {
		if got := s.pick(logits, GenerateOptions{Temperature: 1, TopK: 1, Seed: 7}, step); got != 1 {
			t.Fatalf("top-k 1 picked %d, want 1", got)
		}
		if got := s.pick(logits, GenerateOptions{Temperature: 1, TopP: 1e-6, Seed: 7}, step); got != 1 {
			t.Fatalf("top-p 1e-6 picked %d, want 1", got)
		}
		if got := s.pick(logits, GenerateOptions{Temperature: 1, TopK: 2, Seed: 7}, step); got != 1 && got != 3 {
			t.Fatalf("top-k 2 picked %d, want 1 or 3", got)
		}
	}
	const n = 20000
	counts := make([]int, len(logits))
	for step := range uint64(n) {
		counts[s.pick(logits, GenerateOptions{Temperature: 1, Seed: 11}, step)]++
	}
	z := 0.0
	for _, l := range logits {
		z += math.Exp(float64(l))
	}
	for i, l := range logits {
		p := math.Exp(float64(l)) / z
		se := math.Sqrt(p * (1 - p) / n)
		if f := float64(counts[i]) / n; math.Abs(f-p) > 4*se {
			t.Errorf("token %d: frequency %.4f, softmax %.4f (se %.4f)", i, f, p, se)
		}
	}
}

// TestGenerateErrors: bad options are refused with an error.
func TestGenerateErrors(t *testing.T) {
	m := genModels(t)["gpt2"]
	for _, c := range []struct {
		name   string
		prompt []int32
		opt    GenerateOptions
	}{
		{"empty prompt", nil, GenerateOptions{Tokens: 1}},
		{"past context", []int32{1, 2}, GenerateOptions{Tokens: 15}},
		{"negative temperature", []int32{1}, GenerateOptions{Tokens: 1, Temperature: -1}},
		{"top-p above 1", []int32{1}, GenerateOptions{Tokens: 1, Temperature: 1, TopP: 1.5}},
		{"token out of vocab", []int32{64}, GenerateOptions{Tokens: 1}},
	} {
		if _, err := Generate(cpu.New(), m, c.prompt, c.opt); err == nil {
			t.Errorf("%s: accepted", c.name)
		}
	}
}

func nnCache(m LM) *nn.KVCache { return nn.NewKVCache(m.Layers()) }

// TestGenerateOnEmulatedCUDA: on the CUDA backend (its emulator) the KV
// cache gives the tokens of the uncached run, greedy decoding gives the
// CPU's tokens, and train-mode dropout (Philox masks) matches the CPU's.
func TestGenerateOnEmulatedCUDA(t *testing.T) {
	if testing.Short() {
		t.Skip("the CUDA emulator compiles kernels with g++")
	}
	cudaemu.Setenv(t)
	gpu, err := cuda.New(0)
	if err != nil {
		t.Fatalf("New on the CUDA emulator: %v", err)
	}
	defer gpu.Close()
	cfg, _ := GPT2Preset("gpt2-tiny")
	cfg.InitStd = 0.3
	prompt := []int32{5, 17, 42}
	var greedy [2]string
	for i, dev := range []device.Device{cpu.New(), gpu} {
		m, err := NewGPT2(dev, cfg, 3)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range []GenerateOptions{{Tokens: 10}, {Tokens: 10, Temperature: 1, TopK: 20, TopP: 0.9, Seed: 5}} {
			cached, err := Generate(dev, m, prompt, o)
			if err != nil {
				t.Fatal(err)
			}
			o.NoCache = true
			full, err := Generate(dev, m, prompt, o)
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(cached) != fmt.Sprint(full) {
				t.Errorf("%s T=%g: with cache %v, without %v", dev.Name(), o.Temperature, cached, full)
			}
			if o.Temperature == 0 {
				greedy[i] = fmt.Sprint(cached)
			}
		}
	}
	if greedy[0] != greedy[1] {
		t.Errorf("greedy tokens: CPU %s, CUDA %s", greedy[0], greedy[1])
	}
	cfg.Dropout = 0.3
	var logits [2][]float32
	for i, dev := range []device.Device{cpu.New(), gpu} {
		m, _ := NewGPT2(dev, cfg, 3)
		g := autograd.New(dev)
		ids, _ := tensor.FromInt32(dev, prompt, 1, 3)
		l, _ := m.Forward(g, ids, nil)
		if g.Err() != nil {
			t.Fatal(g.Err())
		}
		logits[i] = append([]float32(nil), l.Float32s()...)
		g.Reset()
	}
	if d := maxAbsDiff(logits[0], logits[1]); d > 1e-4 {
		t.Errorf("train-mode logits differ between CPU and CUDA by %g (dropout masks?)", d)
	}
}

// TestGenerateBatch: each row of a batch gets the tokens Generate gives
// its prompt alone with seed Seed+row, greedy and sampled, with and
// without the cache; Stream sees every step's tokens; prompts of two
// lengths are refused.
func TestGenerateBatch(t *testing.T) {
	dev := cpu.New()
	prompts := [][]int32{{5, 17, 42}, {1, 2, 3}, {60, 0, 9}}
	for name, m := range genModels(t) {
		for _, o := range []GenerateOptions{
			{Tokens: 9},
			{Tokens: 9, Temperature: 1, TopK: 20, TopP: 0.9, Seed: 5},
			{Tokens: 9, Temperature: 1, Seed: 6, NoCache: true},
		} {
			t.Run(fmt.Sprintf("%s/T=%g,nocache=%v", name, o.Temperature, o.NoCache), func(t *testing.T) {
				var streamed [][]int32
				ob := o
				ob.Stream = func(step int, tokens []int32) {
					if step != len(streamed) || len(tokens) != len(prompts) {
						t.Fatalf("Stream(%d, %v) after %d steps", step, tokens, len(streamed))
					}
					streamed = append(streamed, append([]int32(nil), tokens...))
				}
				got, err := GenerateBatch(dev, m, prompts, ob)
				if err != nil {
					t.Fatal(err)
				}
				for r, p := range prompts {
					or := o
					or.Seed += uint64(r)
					want, err := Generate(dev, m, p, or)
					if err != nil {
						t.Fatal(err)
					}
					if fmt.Sprint(got[r]) != fmt.Sprint(want) {
						t.Errorf("row %d: batch %v, alone %v", r, got[r], want)
					}
					for step, toks := range streamed {
						if toks[r] != got[r][step] {
							t.Errorf("row %d step %d: streamed %d, returned %d", r, step, toks[r], got[r][step])
						}
					}
				}
				if len(streamed) != o.Tokens {
					t.Errorf("Stream called %d times, want %d", len(streamed), o.Tokens)
				}
			})
		}
	}
	if _, err := GenerateBatch(dev, genModels(t)["gpt2"], [][]int32{{1, 2}, {3}}, GenerateOptions{Tokens: 1}); err == nil || !strings.Contains(err.Error(), "one length") {
		t.Errorf("prompts of two lengths: error %v, want one naming the lengths", err)
	}
	if _, err := GenerateBatch(dev, genModels(t)["gpt2"], nil, GenerateOptions{Tokens: 1}); err == nil {
		t.Error("no prompts: accepted")
	}
}

// TestGenerateKeepsPoolFlat: a longer generation leaves no more in the
// buffer pool than a shorter one from the same prompt (the KV cache's
// outgrown tensors go back to the device, not to the pool, where buffers
// of their lengths would never be asked for again).
func TestGenerateKeepsPoolFlat(t *testing.T) {
	dev := cpu.New()
	m := genModels(t)["gpt2"]
	held := func(tokens int) int64 {
		tensor.DrainPool()
		if _, err := GenerateBatch(dev, m, [][]int32{{1, 2, 3}, {4, 5, 6}}, GenerateOptions{Tokens: tokens}); err != nil {
			t.Fatal(err)
		}
		return tensor.PoolBytes()
	}
	if short, long := held(3), held(12); long > short {
		t.Errorf("the pool holds %d bytes after 3 tokens, %d after 12: want no more (it grew by the cache's outgrown tensors)", short, long)
	}
}

// TestForwardCachedLast: each family's last-position logits are the last
// row of ForwardCached's, bit for bit, for a prompt and for a cached
// step; and Generate gives the same tokens whether or not it can use them.
func TestForwardCachedLast(t *testing.T) {
	dev := cpu.New()
	lms := genModels(t)
	lc, _ := LlamaPreset("llama-tiny")
	lc.InitStd = 0.3
	llama, err := NewLlama(dev, lc, 3)
	if err != nil {
		t.Fatal(err)
	}
	lms["llama"] = llama
	seq := []int32{1, 9, 33, 7, 60, 2, 5, 14, 3, 8, 11, 40}
	for name, m := range lms {
		lf, ok := m.(LastForwarder)
		if !ok {
			t.Fatalf("%s: no ForwardCachedLast", name)
		}
		g := autograd.New(dev)
		g.SetNoGrad(true)
		full, last := nnCache(m), nnCache(m)
		for _, span := range [][2]int{{0, 5}, {5, 6}} {
			ids, _ := tensor.FromInt32(dev, seq[2*span[0]:2*span[1]], 2, span[1]-span[0])
			all := m.ForwardCached(g, ids, full).Float32s()
			got := lf.ForwardCachedLast(g, ids, last)
			if err := g.Err(); err != nil {
				t.Fatal(err)
			}
			v, tk := got.Dim(1), span[1]-span[0]
			gotv := got.Float32s()
			for b := range 2 {
				want := all[(b*tk+tk-1)*v : (b*tk+tk)*v]
				for i := range v {
					if math.Float32bits(gotv[b*v+i]) != math.Float32bits(want[i]) {
						t.Fatalf("%s positions %v row %d: logit %d = %v, ForwardCached's %v", name, span, b, i, gotv[b*v+i], want[i])
					}
				}
			}
			g.Reset()
		}
		full.Release()
		last.Release()
		o := GenerateOptions{Tokens: 6, Temperature: 1, TopK: 10, Seed: 9}
		with, err1 := Generate(dev, m, seq[:4], o)
		without, err2 := Generate(dev, plainLM{m}, seq[:4], o)
		if err1 != nil || err2 != nil || fmt.Sprint(with) != fmt.Sprint(without) {
			t.Errorf("%s: Generate %v (%v) with ForwardCachedLast, %v (%v) without", name, with, err1, without, err2)
		}
	}
}

// plainLM hides an LM's other methods (ForwardCachedLast) from Generate.
type plainLM struct{ LM }
