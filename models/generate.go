package models

import (
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/hilbert-ml/hilbert/autograd"
	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/nn"
	"github.com/hilbert-ml/hilbert/tensor"
)

// LM is a language model Generate samples from: GPT2 and Transformer.
type LM interface {
	// ForwardCached returns the logits [B, T, Vocab] of inputs [B, T]
	// placed after the positions in cache (nil: none), appending their
	// keys and values to it.
	ForwardCached(g *autograd.Graph, inputs *tensor.Tensor, cache *nn.KVCache) *tensor.Tensor
	// Layers is the number of attention layers (the cache's size).
	Layers() int
	// ContextLen is the longest sequence the model takes.
	ContextLen() int
}

// LastForwarder is an LM that also gives the logits of each sequence's
// last position alone, which is all Generate needs: a prompt's other
// positions then cost no head product (at GPT-2 124M's vocabulary, about
// a third of a prompt's work). GPT2, Transformer and Llama have it;
// Generate uses it when m does.
type LastForwarder interface {
	// ForwardCachedLast is ForwardCached's logits of the last position of
	// each sequence: [B, Vocab], the same numbers.
	ForwardCachedLast(g *autograd.Graph, inputs *tensor.Tensor, cache *nn.KVCache) *tensor.Tensor
}

// GenerateOptions configures Generate.
type GenerateOptions struct {
	// Tokens is the number of tokens to generate.
	Tokens int
	// Temperature divides the logits; 0 is greedy decoding (argmax).
	Temperature float64
	// TopK keeps the K most likely tokens (0: all).
	TopK int
	// TopP keeps the smallest set of most likely tokens whose probability
	// reaches P (nucleus sampling; 0 or 1: all).
	TopP float64
	// Seed keys the draws: step i uses Philox word i of the seed
	// (device.RandomWord), so a seed gives the same text on any backend.
	Seed uint64
	// NoCache recomputes the whole sequence for every new token instead
	// of using a KV cache (the reference the cache is tested against).
	NoCache bool
	// Stream, when set, is called after each step with the step's index
	// and the tokens it chose, one per prompt (the slice is reused by the
	// next step).
	Stream func(step int, tokens []int32)
}

// Generate continues prompt (token ids, at least one) by opt.Tokens
// tokens sampled from m on dev and returns the new tokens. With the KV
// cache (the default) the prompt runs once and each new token costs one
// position. The prompt and the new tokens together must fit the model's
// context. The model runs in eval mode (nn.Evaluate: dropout off) and
// each of its modules is back in its own mode when Generate returns.
func Generate(dev device.Device, m LM, prompt []int32, opt GenerateOptions) ([]int32, error) {
	out, err := generate(dev, m, [][]int32{prompt}, opt, "Generate")
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

// GenerateBatch is Generate for several prompts of one length at once,
// run as one batch: row r of the result continues prompts[r] with the
// tokens Generate gives it with seed opt.Seed+r. A batch shares each
// step's matrix products, so it costs much less than one Generate per
// prompt.
func GenerateBatch(dev device.Device, m LM, prompts [][]int32, opt GenerateOptions) ([][]int32, error) {
	return generate(dev, m, prompts, opt, "GenerateBatch")
}

// generate runs Generate and GenerateBatch; fn names the caller in errors.
func generate(dev device.Device, m LM, prompts [][]int32, opt GenerateOptions, fn string) ([][]int32, error) {
	if err := checkGenerate(m, prompts, opt); err != nil {
		return nil, fmt.Errorf("models: %s: %w", fn, err)
	}
	n := len(prompts[0])
	defer nn.Evaluate(m)()
	g := autograd.New(dev)
	g.SetNoGrad(true)
	defer g.Reset()
	var cache *nn.KVCache
	if !opt.NoCache {
		cache = nn.NewKVCache(m.Layers())
		defer cache.Release()
	}
	rows := len(prompts)
	seqs := make([][]int32, rows)
	for r, p := range prompts {
		seqs[r] = append(make([]int32, 0, n+opt.Tokens), p...)
	}
	picked := make([]int32, rows)
	in := make([]int32, 0, rows*(n+opt.Tokens))
	var s sampler
	for step := range opt.Tokens {
		// The whole sequences, or with the cache after the first step the
		// last token of each.
		in = in[:0]
		t := len(seqs[0])
		if cache != nil && step > 0 {
			t = 1
		}
		for _, q := range seqs {
			in = append(in, q[len(q)-t:]...)
		}
		ids, err := tensor.FromInt32(dev, in, rows, t)
		if err != nil {
			return nil, fmt.Errorf("models: %s: %w", fn, err)
		}
		var last *tensor.Tensor
		if lf, ok := m.(LastForwarder); ok {
			last = lf.ForwardCachedLast(g, ids, cache)
		} else if logits := m.ForwardCached(g, ids, cache); g.Err() == nil {
			last = g.Reshape(g.Slice(logits, 1, t-1, t), rows, logits.Dim(2))
		}
		if err := g.Err(); err != nil {
			ids.Release()
			return nil, fmt.Errorf("models: %s: %w", fn, err)
		}
		v := last.Dim(1)
		all := last.Float32s()
		for r := range seqs {
			o := opt
			o.Seed += uint64(r)
			picked[r] = s.pick(all[r*v:(r+1)*v], o, uint64(step))
			seqs[r] = append(seqs[r], picked[r])
		}
		ids.Release()
		g.Reset()
		if opt.Stream != nil {
			opt.Stream(step, picked)
		}
	}
	out := make([][]int32, rows)
	for r, q := range seqs {
		out[r] = q[n:]
	}
	return out, nil
}

// checkGenerate checks the prompts (one length, at least one token) and
// opt against m's context.
func checkGenerate(m LM, prompts [][]int32, opt GenerateOptions) error {
	if len(prompts) == 0 {
		return errors.New("no prompts")
	}
	n := len(prompts[0])
	for r, p := range prompts {
		if len(p) != n {
			return fmt.Errorf("prompt %d has %d tokens, prompt 0 %d: want prompts of one length", r, len(p), n)
		}
	}
	switch {
	case n == 0:
		return errors.New("empty prompt")
	case opt.Tokens < 0 || opt.Temperature < 0 || opt.TopK < 0 || opt.TopP < 0 || opt.TopP > 1 || math.IsNaN(opt.Temperature) || math.IsNaN(opt.TopP):
		return fmt.Errorf("tokens %d, temperature %g, top-k %d, top-p %g: want tokens, temperature, top-k >= 0 and top-p in [0, 1]",
			opt.Tokens, opt.Temperature, opt.TopK, opt.TopP)
	case n+opt.Tokens > m.ContextLen():
		return fmt.Errorf("a prompt of %d tokens and %d new ones exceed the context of %d", n, opt.Tokens, m.ContextLen())
	}
	return nil
}

// sampler draws a token from one row of logits; its buffers are reused
// across steps.
type sampler struct {
	p   []float64
	idx []int
}

// pick returns the token for logits under opt at step.
func (s *sampler) pick(logits []float32, opt GenerateOptions, step uint64) int32 {
	if opt.Temperature == 0 {
		best := 0
		for i, l := range logits {
			if l > logits[best] {
				best = i
			}
		}
		return int32(best)
	}
	n := len(logits)
	if cap(s.p) < n {
		s.p, s.idx = make([]float64, n), make([]int, n)
	}
	p, idx := s.p[:n], s.idx[:n]
	top := math.Inf(-1)
	for _, l := range logits {
		top = max(top, float64(l))
	}
	for i, l := range logits {
		idx[i] = i
		p[i] = math.Exp((float64(l) - top) / opt.Temperature)
	}
	// Most likely first; ties by token id, so the order is deterministic.
	sort.Slice(idx, func(a, b int) bool {
		if p[idx[a]] != p[idx[b]] {
			return p[idx[a]] > p[idx[b]]
		}
		return idx[a] < idx[b]
	})
	keep := n
	if opt.TopK > 0 && opt.TopK < keep {
		keep = opt.TopK
	}
	total := 0.0
	for _, i := range idx[:keep] {
		total += p[i]
	}
	if opt.TopP > 0 && opt.TopP < 1 {
		cum := 0.0
		for j, i := range idx[:keep] {
			cum += p[i]
			if cum >= opt.TopP*total {
				keep = j + 1
				break
			}
		}
		total = cum
	}
	u := (float64(device.RandomWord(opt.Seed, step)) + 0.5) / (1 << 32) * total
	cum := 0.0
	for _, i := range idx[:keep] {
		cum += p[i]
		if u < cum {
			return int32(i)
		}
	}
	return int32(idx[keep-1])
}
