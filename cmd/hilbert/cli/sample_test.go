package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hilbert-ml/hilbert/autograd"
	"github.com/hilbert-ml/hilbert/tensor"
	"github.com/hilbert-ml/hilbert/tokenizer"
)

// tinyTextRun trains a one-block model for a few updates on a slice of
// Opticks (GPT-2 tokens) and returns the run's folder.
func tinyTextRun(t *testing.T) string {
	t.Helper()
	full := opticksText(t)
	dir := t.TempDir()
	text := filepath.Join(dir, "slice.txt")
	if err := os.WriteFile(text, full[:30_000], 0o644); err != nil {
		t.Fatal(err)
	}
	runs := filepath.Join(dir, "runs")
	var stdout, stderr bytes.Buffer
	args := []string{"train", "-name", "tiny", "-runs", runs, "-text", text, "-text-val-tokens", "500",
		"-layers", "1", "-dim", "64", "-context", "32", "-micro-batch", "2", "-batch-seqs", "4",
		"-steps", "3", "-val-every", "3", "-val-tokens", "300", "-diag-every", "3",
		"-panel-seqs", "2", "-panel-positions", "8", "-quiet"}
	if code := Run(args, &stdout, &stderr); code != 0 {
		t.Fatalf("train: exit %d\nstdout: %s\nstderr: %s", code, stdout.String(), stderr.String())
	}
	return filepath.Join(runs, "tiny")
}

func sample(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := Run(append([]string{"sample"}, args...), &stdout, &stderr)
	return stdout.String(), stderr.String(), code
}

// TestSample checks hilbert sample on a freshly trained run: a seed gives
// the same text twice and another seed other text; temperature 0 is the
// greedy continuation computed here without a KV cache, whatever the seed;
// and a missing run or checkpoint is a clear error.
func TestSample(t *testing.T) {
	run := tinyTextRun(t)
	const prompt = "Light is"
	base := []string{"-run", run, "-prompt", prompt, "-tokens", "12"}

	a, errA, codeA := sample(t, append(base, "-temperature", "1", "-seed", "7")...)
	b, _, codeB := sample(t, append(base, "-temperature", "1", "-seed", "7")...)
	c, _, _ := sample(t, append(base, "-temperature", "1", "-seed", "8")...)
	if codeA != 0 || codeB != 0 {
		t.Fatalf("sample: exit %d %d: %s", codeA, codeB, errA)
	}
	if !strings.HasPrefix(a, prompt) || len(a) <= len(prompt)+1 {
		t.Errorf("sample %q does not continue the prompt %q", a, prompt)
	}
	if a != b {
		t.Errorf("seed 7 twice: %q and %q", a, b)
	}
	if a == c {
		t.Errorf("seeds 7 and 8 gave the same text %q", a)
	}

	// Greedy, computed independently: the whole sequence through the
	// model for each token, argmax of the last row.
	ck, err := readRunCheckpoint(run)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	dev, m, err := ck.loadModel("cpu")
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.GPT2()
	if err != nil {
		t.Fatal(err)
	}
	seq := tok.Encode(prompt)
	np := len(seq)
	g := autograd.New(dev)
	g.SetNoGrad(true)
	for range 12 {
		ids, err := tensor.FromInt32(dev, seq, 1, len(seq))
		if err != nil {
			t.Fatal(err)
		}
		logits := m.ForwardCached(g, ids, nil)
		if err := g.Err(); err != nil {
			t.Fatal(err)
		}
		all := logits.Float32s()
		v := ck.Model.Sizes().Vocab
		last := all[(len(seq)-1)*v : len(seq)*v]
		best := 0
		for i, l := range last {
			if l > last[best] {
				best = i
			}
		}
		seq = append(seq, int32(best))
		ids.Release()
		g.Reset()
	}
	want := prompt + decodeTokens(tok, seq[np:]) + "\n"
	for _, seed := range []string{"1", "2"} {
		got, stderr, code := sample(t, append(base, "-temperature", "0", "-seed", seed)...)
		if code != 0 {
			t.Fatalf("greedy: exit %d: %s", code, stderr)
		}
		if got != want {
			t.Errorf("greedy, seed %s: %q, want %q", seed, got, want)
		}
	}

	// Errors name the problem.
	empty := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{}, "give -run (a run's folder) or -hf"},
		{[]string{"-run", filepath.Join(empty, "nope")}, "no such run folder"},
		{[]string{"-run", empty}, "no checkpoint"},
		{[]string{"-run", run, "-tokens", "40"}, "exceed the model's context of 32"},
		{[]string{"-run", run, "-tokens", "9223372036854775807"}, "-tokens 9223372036854775807 exceed the model's context of 32"},
		{[]string{"-run", run, "-top-p", "2"}, "-top-p"},
		{[]string{"-run", run, "-temperature", "-1"}, "-temperature"},
		{[]string{"-run", run, "-prompt", ""}, "-prompt: empty"},
	} {
		_, stderr, code := sample(t, c.args...)
		if code == 0 || !strings.Contains(stderr, c.want) {
			t.Errorf("sample %q: exit %d, stderr %q, want %q", c.args, code, stderr, c.want)
		}
	}
}

// TestSampleHuggingFace: hilbert sample -hf on the Hugging Face fixtures
// (written by scripts/hf from a Hugging Face-exact PyTorch model) prints
// PyTorch's 30 greedy tokens of the fixture's prompt, for GPT-2 and Llama;
// -hf and -run together, or a token past the vocabulary, are refused.
func TestSampleHuggingFace(t *testing.T) {
	for _, name := range []string{"gpt2", "llama"} {
		dir := filepath.Join("..", "..", "..", "models", "hf", "testdata", name)
		b, err := os.ReadFile(filepath.Join(dir, "golden.json"))
		if err != nil {
			t.Fatal(err)
		}
		var g struct{ Prompt, Greedy []int32 }
		if err := json.Unmarshal(b, &g); err != nil {
			t.Fatal(err)
		}
		var stdout, stderr bytes.Buffer
		args := []string{"sample", "-hf", dir, "-prompt-ids", formatIDs(g.Prompt), "-tokens", fmt.Sprint(len(g.Greedy)), "-temperature", "0"}
		if code := Run(args, &stdout, &stderr); code != 0 {
			t.Fatalf("%s: exit %d: %s", name, code, stderr.String())
		}
		if got, want := strings.TrimSpace(stdout.String()), formatIDs(g.Greedy); got != want {
			t.Errorf("%s: greedy tokens\n got %s\nwant %s (PyTorch)", name, got, want)
		}
	}
	dir := filepath.Join("..", "..", "..", "models", "hf", "testdata", "gpt2")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"sample", "-hf", dir, "-run", "x"}, "give -run"},
		{[]string{"sample", "-hf", dir, "-prompt-ids", "1,64", "-tokens", "1"}, "outside the model's vocabulary of 64"},
		{[]string{"sample", "-hf", dir, "-prompt-ids", "1,x"}, "-prompt-ids"},
		{[]string{"sample", "-hf", t.TempDir()}, "config.json"},
	} {
		var stdout, stderr bytes.Buffer
		if code := Run(tc.args, &stdout, &stderr); code == 0 || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%q: exit %d, stderr %q; want a failure naming %q", tc.args, code, stderr.String(), tc.want)
		}
	}
}
