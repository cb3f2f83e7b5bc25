package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/device/profile"
	"github.com/hilbert-ml/hilbert/models"
	"github.com/hilbert-ml/hilbert/models/registry"
)

// benchGenerateFlags are bench generate's settings.
type benchGenerateFlags struct {
	benchModelChoice
	devName               string
	batch, prompt, tokens int
	reps, profileTop      int
}

// generateTimes are the timestamps of one generation: the time to the
// first token (the prompt's forward and its pick, "prefill") and the mean
// time of each later token.
type generateTimes struct {
	first, perToken time.Duration
}

// generateBench is a built model with its prompts, ready to time.
type generateBench struct {
	f       benchGenerateFlags
	dev     device.Device
	prof    *profile.Device // nil without -profile
	m       registry.Model
	size    registry.Sizes
	prompts [][]int32
}

// runBenchGenerate is the "generate" bench target: greedy models.Generate
// (GenerateBatch for a batch) with the KV cache on random prompts, timed
// as prefill (the time to the first token) and decode (each later token);
// "bench parity" compares it with PyTorch's own KV-cache loop.
func runBenchGenerate(args []string, stdout, stderr io.Writer) error {
	var f benchGenerateFlags
	fs := newFlagSet("bench generate", "", stderr)
	f.benchModelChoice.flags(fs, "gpt2", "gpt2")
	fs.IntVar(&f.batch, "batch", 1, "prompts generated together")
	fs.IntVar(&f.prompt, "prompt", 64, "tokens per prompt")
	fs.IntVar(&f.tokens, "tokens", 32, "new tokens per prompt (at least 2)")
	fs.IntVar(&f.reps, "reps", 3, "timed generations (after one warm-up); the medians are reported")
	fs.StringVar(&f.devName, "device", "cpu", "cpu, cuda or cuda:N")
	fs.IntVar(&f.profileTop, "profile", 0, "after the timed generations, profile one more (each kernel call timed to completion) and print the N costliest operations of its prefill and of its decode steps to stderr")
	if stop, err := parseCommand(fs, args); stop {
		return err
	}
	b, err := buildGenerateBench(fs.Name(), f)
	if err != nil {
		return err
	}
	if _, err := b.once(nil); err != nil { // warm up
		return err
	}
	var firsts, pers []time.Duration
	for range f.reps {
		t, err := b.once(nil)
		if err != nil {
			return err
		}
		firsts, pers = append(firsts, t.first), append(pers, t.perToken)
	}
	first, per := medianDuration(firsts), medianDuration(pers)
	out := map[string]any{
		"target": "generate", "model": f.family, "preset": f.preset, "layers": b.size.Layers, "dim": b.size.Dim,
		"batch": f.batch, "prompt": f.prompt, "tokens": f.tokens, "reps": f.reps,
		"prefill_ms": ms(first), "prefill_tokens_per_s": float64(f.batch*f.prompt) / first.Seconds(),
		"ms_per_token": ms(per), "decode_tokens_per_s": float64(f.batch) / per.Seconds(),
		"tokens_per_s": float64(f.batch*f.tokens) / (first + per*time.Duration(f.tokens-1)).Seconds(),
		"threads":      cpu.Threads(), "device": b.dev.Name(),
	}
	if b.prof != nil {
		if err := b.profileDecode(stderr); err != nil {
			return err
		}
	}
	return json.NewEncoder(stdout).Encode(out)
}

// buildGenerateBench checks the flags and builds the model (on a profiled
// device with -profile) and random prompts.
func buildGenerateBench(cmd string, f benchGenerateFlags) (*generateBench, error) {
	if f.batch < 1 || f.prompt < 1 || f.tokens < 2 || f.reps < 1 {
		return nil, usageErr(cmd, fmt.Errorf("-batch %d, -prompt %d, -tokens %d, -reps %d: want batch, prompt, reps >= 1 and tokens >= 2", f.batch, f.prompt, f.tokens, f.reps))
	}
	fam, cfg, err := f.config(cmd)
	if err != nil {
		return nil, err
	}
	b := &generateBench{f: f, size: registry.SizesOf(cfg)}
	if f.prompt+f.tokens > b.size.Context {
		return nil, usageErr(cmd, fmt.Errorf("-prompt %d and -tokens %d exceed the context of %d", f.prompt, f.tokens, b.size.Context))
	}
	if b.dev, err = openDevice(f.devName); err != nil {
		return nil, err
	}
	if f.profileTop > 0 {
		b.prof = profile.Wrap(b.dev)
		b.dev = b.prof
	}
	if b.m, err = fam.Build(b.dev, cfg, registry.BuildOptions{Seed: 1}); err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(1, 2))
	b.prompts = make([][]int32, f.batch)
	for r := range b.prompts {
		b.prompts[r] = make([]int32, f.prompt)
		for i := range b.prompts[r] {
			b.prompts[r][i] = int32(rng.IntN(b.size.Vocab))
		}
	}
	return b, nil
}

// once runs one generation and times it; onFirst, when set, runs right
// after the first token.
func (b *generateBench) once(onFirst func()) (generateTimes, error) {
	var first, last time.Time
	opt := models.GenerateOptions{Tokens: b.f.tokens, Stream: func(step int, _ []int32) {
		switch step {
		case 0:
			first = time.Now()
			if onFirst != nil {
				onFirst()
			}
		case b.f.tokens - 1:
			last = time.Now()
		}
	}}
	start := time.Now()
	if _, err := models.GenerateBatch(b.dev, b.m, b.prompts, opt); err != nil {
		return generateTimes{}, err
	}
	return generateTimes{first: first.Sub(start), perToken: last.Sub(first) / time.Duration(b.f.tokens-1)}, nil
}

// profileDecode runs one more generation with every call timed and
// prints the costliest of the prefill (the prompt up to the first token)
// and, apart, of the decode steps.
func (b *generateBench) profileDecode(stderr io.Writer) error {
	prof, f := b.prof, b.f
	var prefill bytes.Buffer
	var prefillCalls time.Duration
	prof.Reset()
	prof.Record(true)
	t, err := b.once(func() {
		prof.Record(false)
		_, prefillCalls = attentionShare(prof.Ops())
		err := prof.WriteTable(&prefill, f.profileTop)
		prof.Reset()
		prof.Record(err == nil)
	})
	prof.Record(false)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "profile of the prefill (%s, batch %d, a %d-token prompt; calls synchronized): %.1f ms to the first token, of which device calls %.1f ms\n%s",
		f.preset, f.batch, f.prompt, ms(t.first), ms(prefillCalls), prefill.String())
	steps := f.tokens - 1
	_, decodeCalls := attentionShare(prof.Ops())
	fmt.Fprintf(stderr, "profile of %d decode steps (calls synchronized): %.2f ms a token, of which device calls %.2f ms (the rest: graph, sampling, host)\n",
		steps, ms(t.perToken), ms(decodeCalls)/float64(steps))
	return prof.WriteTable(stderr, f.profileTop)
}

func medianDuration(ts []time.Duration) time.Duration {
	s := slices.Clone(ts)
	slices.Sort(s)
	return s[len(s)/2]
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }
