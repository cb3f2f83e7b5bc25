package models

import (
	"testing"

	"github.com/hilbert-ml/hilbert/device/cpu"
)

// BenchmarkGenerate compares generation with and without the KV cache:
// a 4-layer GPT-2 of width 256 continues a 16-token prompt by 112 tokens
// (the cache's saving grows with the sequence).
func BenchmarkGenerate(b *testing.B) {
	dev := cpu.New()
	m, err := NewGPT2(dev, GPT2Config{Layers: 4, Dim: 256, Heads: 4, Vocab: 512, Context: 128, InitStd: 0.02}, 1)
	if err != nil {
		b.Fatal(err)
	}
	prompt := make([]int32, 16)
	for i := range prompt {
		prompt[i] = int32(i * 31 % 512)
	}
	for _, c := range []struct {
		name    string
		noCache bool
	}{{"cache", false}, {"nocache", true}} {
		b.Run(c.name, func(b *testing.B) {
			opt := GenerateOptions{Tokens: 112, Temperature: 1, TopK: 50, Seed: 1, NoCache: c.noCache}
			for b.Loop() {
				if _, err := Generate(dev, m, prompt, opt); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(opt.Tokens*b.N)/b.Elapsed().Seconds(), "tokens/s")
		})
	}
}
