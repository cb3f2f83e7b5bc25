package tokenizer

import (
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// longRunText mixes runs of one class around MaxPieceRunes characters long
// (letters, digits, spaces, multi-byte letters, invalid bytes) with short
// text between them.
func longRunText(r *rand.Rand) string {
	units := []string{"a", "7", " ", "\n", "é", "日", "\xff", "!", "ab"}
	var b strings.Builder
	for range 4 {
		u := units[r.IntN(len(units))]
		n := MaxPieceRunes - 3 + r.IntN(7)
		if r.IntN(2) == 0 {
			n = r.IntN(3*MaxPieceRunes) + 1
		}
		b.WriteString(strings.Repeat(u, n/utf8.RuneCountInString(u)+1))
		b.WriteString([]string{" word", "x", "\n\nNext", "'re", "  ", "12"}[r.IntN(6)])
	}
	return b.String()
}

// TestPiecesBounded: no piece holds more than MaxPieceRunes characters,
// the cut falls at the same characters before and after invalid bytes are
// replaced (so Encode of the raw and of the replaced text agree), and the
// text still decodes to itself.
func TestPiecesBounded(t *testing.T) {
	tok := gpt2(t)
	r := rand.New(rand.NewPCG(9, 10))
	for i := range 12 {
		s := longRunText(r)
		for p := 0; p < len(s); {
			e := nextPiece(s, p)
			if n := utf8.RuneCountInString(s[p:e]); n > MaxPieceRunes {
				t.Fatalf("case %d: piece at %d holds %d characters, the bound is %d", i, p, n, MaxPieceRunes)
			}
			p = e
		}
		ids := tok.Encode(s)
		if want := tok.Encode(replaceInvalid(s)); !slices.Equal(ids, want) {
			t.Fatalf("case %d: raw and replaced text differ at token %d", i, firstDiff(ids, want))
		}
		if utf8.ValidString(s) {
			if b, _ := tok.Decode(ids); string(b) != s {
				t.Fatalf("case %d: round trip differs", i)
			}
		}
	}
}

// TestSafeCutOfPrefix: the cut SafeCut finds in any prefix of a text,
// newline or piece end, splits the whole text without changing its
// tokens; so does every cut of SplitSafe on texts of long runs.
func TestSafeCutOfPrefix(t *testing.T) {
	tok := gpt2(t)
	r := rand.New(rand.NewPCG(11, 12))
	check := func(name, s string, q int) {
		t.Helper()
		if got, want := append(tok.Encode(s[:q]), tok.Encode(s[q:])...), tok.Encode(s); !slices.Equal(got, want) {
			t.Fatalf("%s: cut at %d (%q | %q) changes token %d", name, q, s[max(0, q-12):q], s[q:min(len(s), q+12)], firstDiff(got, want))
		}
	}
	for range 60 {
		s := randomText(r, 500+r.IntN(5000))
		for range 10 {
			k := 1 + r.IntN(len(s)-1)
			if q := pieceCut(s[:k], k); q > 0 {
				check("piece end", s, q)
			}
			if q := SafeCut(s[:k]); q > 0 {
				check("SafeCut", s, q)
			}
		}
	}
	for i := range 4 {
		s := longRunText(r)
		if got, want := tok.EncodeParallel(s, 100<<10), tok.Encode(s); !slices.Equal(got, want) {
			t.Fatalf("long runs %d: EncodeParallel differs at token %d", i, firstDiff(got, want))
		}
		if q := SafeCut(s); q == 0 {
			t.Fatalf("long runs %d: no safe cut in %d bytes", i, len(s))
		}
	}
}

// TestLongRunMemory: encoding 16 MB of "a" (one run) allocates little
// more than its tokens; with the whole run as one piece it took about 40
// bytes per byte (2.4 GB for 40 MB).
func TestLongRunMemory(t *testing.T) {
	tok := gpt2(t)
	text := strings.Repeat("a", 16<<20)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	ids := tok.Encode(text)
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > 64<<20 {
		t.Errorf("encoding 16 MB of \"a\" allocated %d MB, expected at most 64 MB", got>>20)
	}
	if b, _ := tok.Decode(ids); string(b) != text {
		t.Error("round trip differs")
	}
}
