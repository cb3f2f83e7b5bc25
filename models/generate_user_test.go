package models

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/hilbert-ml/hilbert/autograd"
	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/nn"
	"github.com/hilbert-ml/hilbert/tensor"
)

// TestGenerateEvalMode: a GPT-2 built with Dropout 0.5 gives the same
// greedy tokens on every call, the tokens of the same weights without
// dropout, and its dropouts are back in training mode afterwards.
func TestGenerateEvalMode(t *testing.T) {
	dev := cpu.New()
	cfg, _ := GPT2Preset("gpt2-tiny")
	cfg.InitStd = 0.3
	plain, err := NewGPT2(dev, cfg, 3)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Dropout = 0.5
	m, err := NewGPT2(dev, cfg, 3)
	if err != nil {
		t.Fatal(err)
	}
	prompt, opt := []int32{5, 17, 42}, GenerateOptions{Tokens: 12}
	want, err := Generate(dev, plain, prompt, opt)
	if err != nil {
		t.Fatal(err)
	}
	for call := range 3 {
		got, err := Generate(dev, m, prompt, opt)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("call %d with dropout 0.5: %v, want the tokens without dropout %v", call, got, want)
		}
	}
	if !m.Drop.Training() || !m.Blocks[0].Drop.Training() {
		t.Errorf("after Generate the dropouts are in eval mode; want them back in training mode")
	}
	nn.SetTraining(m, false)
	if _, err := Generate(dev, m, prompt, opt); err != nil {
		t.Fatal(err)
	}
	if m.Drop.Training() {
		t.Errorf("Generate put a model in eval mode back into training mode")
	}
}

// userAttention is a user's own causal attention (no RoPE, no fused
// kernel): it uses the KV cache through Len and Append only.
type userAttention struct {
	Q, K, V, O     nn.Linear
	heads, headDim int
}

func (a *userAttention) forward(g *autograd.Graph, x *tensor.Tensor, cache *nn.KVCache, layer int) *tensor.Tensor {
	b, tq := x.Dim(0), x.Dim(1)
	split := func(l *nn.Linear) *tensor.Tensor {
		return g.Reshape(l.Forward(g, x), b, tq, a.heads, a.headDim)
	}
	q, k, v := split(&a.Q), split(&a.K), split(&a.V)
	pos := 0
	if cache != nil {
		pos = cache.Len(layer)
		k, v = cache.Append(g, layer, k, v)
	}
	if g.Err() != nil {
		return nil
	}
	tk := k.Dim(1)
	qh, kh, vh := g.Permute(q, 0, 2, 1, 3), g.Permute(k, 0, 2, 1, 3), g.Permute(v, 0, 2, 1, 3)
	s := g.Mul(g.MatMul(qh, kh, false, true), g.Constant(1/math.Sqrt(float64(a.headDim)), q.DType()))
	mask := make([]float32, tq*tk)
	for i := range tq {
		for j := pos + i + 1; j < tk; j++ {
			mask[i*tk+j] = float32(math.Inf(-1))
		}
	}
	mt, err := tensor.FromFloat32(g.Device(), mask, tq, tk)
	if err != nil {
		g.Fail(err)
		return nil
	}
	defer mt.Release()
	o := g.MatMul(g.Softmax(g.Add(s, mt), 3), vh, false, false)
	return a.O.Forward(g, g.Reshape(g.Permute(o, 0, 2, 1, 3), b, tq, a.heads*a.headDim))
}

// userLM is a small LM of a user's attention blocks: token and position
// embeddings, residual attention layers, a head.
type userLM struct {
	Tok, Pos nn.Embedding
	Attn     []userAttention
	Head     nn.Linear
	context  int
}

func newUserLM(vocab, dim, heads, layers, context int) *userLM {
	init := nn.NewInit(cpu.New(), 7, 0.3)
	m := &userLM{Tok: nn.NewEmbedding(init, vocab, dim), Pos: nn.NewEmbedding(init, context, dim), Head: nn.NewLinear(init, dim, vocab), context: context}
	for range layers {
		m.Attn = append(m.Attn, userAttention{Q: nn.NewLinear(init, dim, dim), K: nn.NewLinear(init, dim, dim),
			V: nn.NewLinear(init, dim, dim), O: nn.NewLinear(init, dim, dim), heads: heads, headDim: dim / heads})
	}
	return m
}

func (m *userLM) Layers() int     { return len(m.Attn) }
func (m *userLM) ContextLen() int { return m.context }

func (m *userLM) ForwardCached(g *autograd.Graph, inputs *tensor.Tensor, cache *nn.KVCache) *tensor.Tensor {
	pos := 0
	if cache != nil {
		pos = cache.Len(0)
	}
	t := inputs.Dim(1)
	ids := make([]int32, t)
	for i := range ids {
		ids[i] = int32(pos + i)
	}
	p, err := tensor.FromInt32(g.Device(), ids, 1, t)
	if err != nil {
		g.Fail(err)
		return nil
	}
	defer p.Release()
	x := g.Add(m.Tok.Forward(g, inputs), m.Pos.Forward(g, p))
	for l := range m.Attn {
		x = g.Add(x, m.Attn[l].forward(g, x, cache, l))
	}
	return m.Head.Forward(g, x)
}

// TestGenerateUserAttention: a model whose attention is the user's own
// generates with the KV cache the tokens it generates without it.
func TestGenerateUserAttention(t *testing.T) {
	dev := cpu.New()
	m := newUserLM(48, 32, 4, 2, 24)
	for _, o := range []GenerateOptions{{Tokens: 15}, {Tokens: 15, Temperature: 1, TopK: 12, Seed: 5}} {
		t.Run(fmt.Sprintf("T=%g", o.Temperature), func(t *testing.T) {
			cached, err := Generate(dev, m, []int32{3, 9}, o)
			if err != nil {
				t.Fatal(err)
			}
			o.NoCache = true
			full, err := Generate(dev, m, []int32{3, 9}, o)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(cached, full) {
				t.Fatalf("with the cache %v, without %v", cached, full)
			}
			if slices.Equal(full, make([]int32, len(full))) || len(slices.Compact(slices.Clone(full))) < 3 {
				t.Fatalf("degenerate tokens %v: the test would not tell the cache apart", full)
			}
		})
	}
}

// TestKVCacheAppendErrors: the cache names a layer out of range, a
// recording graph and mismatched keys and values.
func TestKVCacheAppendErrors(t *testing.T) {
	dev := cpu.New()
	k, _ := tensor.FromFloat32(dev, make([]float32, 8), 1, 2, 2, 2)
	v3, _ := tensor.FromFloat32(dev, make([]float32, 8), 1, 2, 4)
	for _, c := range []struct {
		name    string
		noGrad  bool
		layer   int
		v       *tensor.Tensor
		wantErr string
	}{
		{"layer", true, 2, k, "layer 2 of a KV cache of 2 layers"},
		{"recording", false, 0, k, "recording off"},
		{"shapes", true, 0, v3, "want equal shapes"},
	} {
		g := autograd.New(dev)
		g.SetNoGrad(c.noGrad)
		cache := nn.NewKVCache(2)
		if ka, va := cache.Append(g, c.layer, k, c.v); ka != nil || va != nil || g.Err() == nil || !strings.Contains(g.Err().Error(), c.wantErr) {
			t.Errorf("%s: Append gave %v, %v, error %v; want an error naming %q", c.name, ka, va, g.Err(), c.wantErr)
		}
		g.Reset()
	}
}
