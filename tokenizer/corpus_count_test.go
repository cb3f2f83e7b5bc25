package tokenizer

import (
	"slices"
	"testing"
	"time"

	"github.com/hilbert-ml/hilbert/internal/testcorpus"
)

// TestCorpusTokenCounts checks the exact r50k_base token counts published in
// ../shared/corpus/README.md, and compares token for token with tiktoken-go.
// The comparison covers every byte (about 14 s on one core, nearly all of it
// in tiktoken-go); with -short it covers the first 300 kB of each file.
func TestCorpusTokenCounts(t *testing.T) {
	tok := gpt2(t)
	tests := []struct {
		file  string
		bytes int
		count int // 0: not published exactly
	}{
		{"austen.txt.gz", 4025029, 993328},
		{"kjv.txt.gz", 4298239, 1141844},
		{"tdavid.txt.gz", 11748163, 2786039},
		{"web.txt.gz", 5035036, 0}, // README: ~1.28 M
	}
	refBytes := 1 << 40
	if testing.Short() {
		refBytes = 300_000
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			text := testcorpus.Text(t, tc.file)
			if len(text) != tc.bytes {
				t.Fatalf("%s: size: expected %d, got %d", tc.file, tc.bytes, len(text))
			}
			start := time.Now()
			ids := tok.EncodeParallel(text, 0)
			t.Logf("%s: %d tokens in %v", tc.file, len(ids), time.Since(start))
			if tc.count != 0 && len(ids) != tc.count {
				t.Errorf("%s: token count: expected %d, got %d", tc.file, tc.count, len(ids))
			}
			if tc.count == 0 && (len(ids) < 1_275_000 || len(ids) > 1_285_000) {
				t.Errorf("%s: token count: expected ~1.28 M, got %d", tc.file, len(ids))
			}
			slice := text
			if len(text) > refBytes {
				slice = text[:SafeCut(text[:refBytes])]
			}
			got, want := tok.Encode(slice), refTokens(t, slice)
			if !slices.Equal(got, want) {
				i := firstDiff(got, want)
				t.Errorf("%s: first %d bytes: token %d: expected %v, got %v", tc.file, len(slice), i, want[i:min(i+5, len(want))], got[i:min(i+5, len(got))])
			}
			if !slices.Equal(got, ids[:len(got)]) {
				t.Errorf("%s: Encode of a prefix differs from EncodeParallel of the whole", tc.file)
			}
		})
	}
	t.Run("opticks", func(t *testing.T) {
		text := opticks(t)
		got, want := tok.Encode(text), refTokens(t, text)
		if len(got) != 147297 {
			t.Errorf("Opticks: token count: expected 147297, got %d", len(got))
		}
		if !slices.Equal(got, want) {
			t.Errorf("Opticks: differs from tiktoken-go at token %d", firstDiff(got, want))
		}
	})
}
