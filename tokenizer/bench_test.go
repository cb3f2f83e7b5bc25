package tokenizer

import (
	"strings"
	"testing"

	"github.com/hilbert-ml/hilbert/internal/testcorpus"
)

// Benchmarks on Austen (4 MB of English). Compare the three in one run:
//
//	go test ./tokenizer -run '^$' -bench . -benchtime 3x
func BenchmarkEncode(b *testing.B) {
	tok := gpt2(b)
	text := testcorpus.Text(b, "austen.txt.gz")
	b.SetBytes(int64(len(text)))
	dst := make([]int32, 0, len(text)/3)
	b.ResetTimer()
	for b.Loop() {
		dst = tok.AppendEncode(dst[:0], text)
	}
}

// BenchmarkEncodeParallel encodes the same text cut into chunks on all cores.
func BenchmarkEncodeParallel(b *testing.B) {
	tok := gpt2(b)
	text := testcorpus.Text(b, "austen.txt.gz")
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		tok.EncodeParallel(text, 256<<10)
	}
}

// BenchmarkTiktokenGo is github.com/pkoukk/tiktoken-go's EncodeOrdinary on the
// same text, for comparison.
func BenchmarkTiktokenGo(b *testing.B) {
	ref := reference(b)
	text := testcorpus.Text(b, "austen.txt.gz")
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		ref.EncodeOrdinary(text)
	}
}

// BenchmarkEncodeLongRun encodes one run of 8 MB of "a" (see
// MaxPieceRunes); -benchmem shows the memory it takes.
func BenchmarkEncodeLongRun(b *testing.B) {
	tok := gpt2(b)
	text := strings.Repeat("a", 8<<20)
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		tok.Encode(text)
	}
}
