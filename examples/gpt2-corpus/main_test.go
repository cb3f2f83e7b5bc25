package main

import (
	"bytes"
	"compress/gzip"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/models"
	"github.com/hilbert-ml/hilbert/tokenizer/bytelevel"
)

// corpus is the offline corpus (relative to this folder) or, without it,
// the Opticks text every Go installation ships.
func corpus(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat("../../../shared/corpus"); err == nil {
		return "../../../shared/corpus"
	}
	root, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Skip("no corpus and no go env GOROOT:", err)
	}
	return filepath.Join(strings.TrimSpace(string(root)), "src", "testdata", "Isaac.Newton-Opticks.txt")
}

// TestGPT2CorpusLearns trains a tiny byte-level GPT-2 briefly on a slice
// of the corpus: the validation loss starts near ln 256 (uniform bytes)
// and falls by a third, and the sample is that many valid bytes.
func TestGPT2CorpusLearns(t *testing.T) {
	o := options{
		corpus: corpus(t), maxBytes: 200_000,
		model: models.GPT2Config{Layers: 1, Dim: 32, Heads: 2, Vocab: bytelevel.VocabSize, Context: 32, InitStd: 0.02},
		batch: 8, steps: 60, lr: 1e-2, seed: 1, logEvery: 20,
		prompt: "The ", tokens: 20, temp: 0.8, out: io.Discard,
	}
	r, err := run(cpu.New(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("val %.4f -> %.4f, sample %q", r.FirstVal, r.LastVal, r.Sample)
	if math.Abs(r.FirstVal-math.Log(256)) > 0.3 {
		t.Errorf("initial val loss %.4f, want near ln 256 = %.4f", r.FirstVal, math.Log(256))
	}
	if !(r.LastVal < 0.67*r.FirstVal) {
		t.Errorf("val loss %.4f -> %.4f: did not fall by a third", r.FirstVal, r.LastVal)
	}
	if len(r.Sample) != 20 {
		t.Errorf("sample %q: %d bytes, want 20", r.Sample, len(r.Sample))
	}
	// Bad input names the problem.
	o.tokens = 40
	if _, err := run(cpu.New(), o); err == nil || !strings.Contains(err.Error(), "-context 32") {
		t.Errorf("prompt + tokens past the context: %v", err)
	}
	o.corpus = t.TempDir()
	if _, err := run(cpu.New(), o); err == nil || !strings.Contains(err.Error(), "no *.txt") {
		t.Errorf("empty corpus folder: %v", err)
	}
}

// TestReadCorpusGzip: a gzip corpus is read by its bytes (whatever its
// name), and one cut short is an error, not a shorter text.
func TestReadCorpusGzip(t *testing.T) {
	dir := t.TempDir()
	text := strings.Repeat("Light is refracted. ", 4000)
	var z bytes.Buffer
	w := gzip.NewWriter(&z)
	w.Write([]byte(text))
	w.Close()
	whole, cut := filepath.Join(dir, "whole.txt"), filepath.Join(dir, "cut.txt.gz")
	if err := os.WriteFile(whole, z.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cut, z.Bytes()[:z.Len()-4], 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := readCorpus(whole, 1<<30)
	if err != nil || string(got) != text {
		t.Fatalf("gzip named .txt: %d bytes, %v; want the %d bytes of text", len(got), err, len(text))
	}
	if got, err := readCorpus(cut, 1<<30); err == nil || !strings.Contains(err.Error(), "truncated") {
		t.Fatalf("truncated gzip: %d bytes, error %v; want a truncation error", len(got), err)
	}
}
