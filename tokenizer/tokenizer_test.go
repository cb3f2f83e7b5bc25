package tokenizer

import (
	"crypto/sha256"
	"encoding/hex"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	tiktoken "github.com/pkoukk/tiktoken-go"
	tiktoken_loader "github.com/pkoukk/tiktoken-go-loader"
	"github.com/pkoukk/tiktoken-go-loader/assets"
)

var (
	refOnce sync.Once
	refEnc  *tiktoken.Tiktoken
	refErr  error
)

// reference returns tiktoken-go's r50k_base, loaded offline.
func reference(t testing.TB) *tiktoken.Tiktoken {
	t.Helper()
	refOnce.Do(func() {
		tiktoken.SetBpeLoader(tiktoken_loader.NewOfflineLoader())
		refEnc, refErr = tiktoken.GetEncoding("r50k_base")
	})
	if refErr != nil {
		t.Fatal(refErr)
	}
	return refEnc
}

func gpt2(t testing.TB) *Tokenizer {
	t.Helper()
	tok, err := GPT2()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func refTokens(t testing.TB, s string) []int32 {
	ids := reference(t).EncodeOrdinary(s)
	out := make([]int32, len(ids))
	for i, id := range ids {
		out[i] = int32(id)
	}
	return out
}

// firstDiff describes where two token sequences part.
func firstDiff(a, b []int32) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func TestR50KHash(t *testing.T) {
	raw, err := assets.Assets.ReadFile(R50KAsset)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(raw)
	if got := hex.EncodeToString(sum[:]); got != R50KSHA256 {
		t.Fatalf("sha256 of embedded %s: expected %s, got %s", R50KAsset, R50KSHA256, got)
	}
	if _, err := parseTiktoken("tampered", append(raw[:len(raw):len(raw)], '\n'), R50KSHA256); err == nil {
		t.Fatal("tampered rank file accepted")
	}
}

// edgeCases are texts where GPT-2's pattern has corners.
var edgeCases = []string{
	"", " ", "  ", "a", " a", "  a", "\n", "\n\n", "\n\nThe", "a\n\n\nb", " \n a", "\t\tx", "x  ",
	"Hello, world!", "I'm you're we've they'll he'd it's 'S 'T'm'''s", "don't'll", "''s", "!'s",
	"12345678901234567890", " 123abc 4.5e10", "1,000,000.00", "Ⅷ ½ ٣٤٥ ૪",
	"<|endoftext|>", "a<|endoftext|>b", "hello\r\nworld\r\n\r\n", "\r\r\n\n",
	"a\u00a0b\u00a0\u00a0c", "x\u0085y\u0085\u0085", "line\u2028sep\u2029para", "\ufeffBOM\ufeff",
	"del\u007fx\u007f", "\x00\x01\x02\x1b[31mred\x1b[0m\x1f\x1c", "tab\there\v\f",
	"Привет мир", "Γειά σου", "مرحبا بالعالم", "שלום עולם", "你好，世界。", "こんにちは世界", "안녕하세요",
	"नमस्ते दुनिया", "สวัสดีชาวโลก", "ሰላም", "ᚠᛇᚻ", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "é vs é", "Zalgo: Z̤͔ͧ̑̓ä͖̭̈̇lͮ̒ͫǧ̗͚̚o̙̔ͮ̇͐̇",
	"👍🏽 👨‍👩‍👧‍👦 🏳️‍🌈 🇫🇷🇩🇪 ❤️‍🔥", "emoji👍word", " 👍", "\u200d\u200c\u200b",
	"\u3000ideographic\u3000\u3000space", "\u2003em\u2003\u2003x", "\u1680ogham", "\u180e mongolian",
	"invalid \xff\xfe bytes", "\xc3", "trunc \xe2\x82", "\xed\xa0\x80 surrogate", "\xf4\x90\x80\x80 too big",
	"overlong \xc0\xaf", "mixed\xffé\x80",
	strings.Repeat(" ", 1000) + "x", strings.Repeat(" ", 999), strings.Repeat("\n", 500) + "y",
	strings.Repeat(" \n", 300), strings.Repeat("ab", 400), strings.Repeat("🙂", 300),
	strings.Repeat("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", 20),
	strings.Repeat("0123456789", 100), strings.Repeat("!?", 200),
}

func TestEncodeMatchesTiktokenGo(t *testing.T) {
	tok := gpt2(t)
	for _, s := range edgeCases {
		got, want := tok.Encode(s), refTokens(t, s)
		if !slices.Equal(got, want) {
			i := firstDiff(got, want)
			t.Errorf("Encode(%.60q): token %d: expected %v, got %v", s, i, want[i:min(i+5, len(want))], got[i:min(i+5, len(got))])
		}
	}
}

// randomText draws runes from a mix of classes the pattern treats
// differently, plus invalid bytes.
func randomText(r *rand.Rand, n int) string {
	pools := []string{
		"abcxyzABCXYZ", "0123456789", " ", "    ", "\n", "\r\n", "\t", "'", "'s't're've'm'll'd",
		".,!?;:-()[]{}\"<>|", "éüßøñ", "Ωλπ", "Жщы", "中文字", "ひらがな", "١٢٣", "½Ⅷ", "\u00a0\u0085\u2028\u3000\u2003",
		"\ufeff\u007f\u200d\u0301", "👍🏽👨‍👩‍👧", "\x00\x1b", "\xff", "\xe2\x82",
	}
	var b strings.Builder
	for b.Len() < n {
		p := pools[r.IntN(len(pools))]
		if utf8.ValidString(p) {
			rs := []rune(p)
			b.WriteRune(rs[r.IntN(len(rs))])
			if r.IntN(3) == 0 { // whole words and runs too
				b.WriteString(p)
			}
		} else {
			b.WriteString(p)
		}
	}
	return b.String()
}

func TestEncodeRandomMatchesTiktokenGo(t *testing.T) {
	tok := gpt2(t)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 400 {
		s := randomText(r, 1+r.IntN(300))
		got, want := tok.Encode(s), refTokens(t, s)
		if !slices.Equal(got, want) {
			j := firstDiff(got, want)
			t.Fatalf("case %d %q: token %d: expected %v, got %v", i, s, j, want[j:], got[j:])
		}
	}
}

func TestDecodeRoundTrip(t *testing.T) {
	tok := gpt2(t)
	r := rand.New(rand.NewPCG(3, 4))
	texts := append([]string{}, edgeCases...)
	for range 200 {
		texts = append(texts, randomText(r, 200))
	}
	for _, s := range texts {
		b, err := tok.Decode(tok.Encode(s))
		if err != nil {
			t.Fatal(err)
		}
		want := s
		if !utf8.ValidString(s) {
			want = string([]rune(s)) // invalid bytes read as U+FFFD
		}
		if string(b) != want {
			t.Errorf("Decode(Encode(%.40q)) = %.40q", s, b)
		}
	}
	if _, err := tok.Decode([]int32{1, VocabSize}); err == nil {
		t.Error("Decode accepted id VocabSize")
	}
	if _, err := tok.Decode([]int32{-1}); err == nil {
		t.Error("Decode accepted id -1")
	}
}

func TestEncodeWithSpecial(t *testing.T) {
	tok := gpt2(t)
	tests := []struct {
		in   string
		want []int32
	}{
		{"<|endoftext|>", []int32{EndOfText}},
		{"a<|endoftext|>b", append(append(tok.Encode("a"), EndOfText), tok.Encode("b")...)},
		{"<|endoftext|><|endoftext|>", []int32{EndOfText, EndOfText}},
		{"<|endoftext|", tok.Encode("<|endoftext|")},
	}
	for _, tc := range tests {
		if got := tok.EncodeWithSpecial(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("EncodeWithSpecial(%q) = %v, expected %v", tc.in, got, tc.want)
		}
		ref, _ := reference(t).Encode(tc.in, []string{"all"}, nil), 0
		if got := tok.EncodeWithSpecial(tc.in); !slices.Equal(got, toInt32(ref)) {
			t.Errorf("EncodeWithSpecial(%q) = %v, tiktoken-go %v", tc.in, got, ref)
		}
	}
	if got := tok.Encode("<|endoftext|>"); len(got) == 1 {
		t.Error("Encode turned <|endoftext|> into a special token")
	}
}

func toInt32(a []int) []int32 {
	out := make([]int32, len(a))
	for i, v := range a {
		out[i] = int32(v)
	}
	return out
}

// TestMergeHeapMatchesSmall checks the O(n log n) merge against tiktoken's
// quadratic one on long pieces.
func TestMergeHeapMatchesSmall(t *testing.T) {
	tok := gpt2(t)
	r := rand.New(rand.NewPCG(5, 6))
	m := new(merger)
	alphabets := []string{"ab", "abc", "etaoinshrdlu", "aeiou", " ", "0123456789", "ñé"}
	for i := range 300 {
		a := alphabets[r.IntN(len(alphabets))]
		var b strings.Builder
		for b.Len() < 2+r.IntN(400) {
			b.WriteByte(a[r.IntN(len(a))])
		}
		s := b.String()
		want := tok.v.mergeSmall(m, nil, s)
		got := tok.v.mergeHeap(m, nil, s)
		if !slices.Equal(got, want) {
			t.Fatalf("case %d %q: heap %v, quadratic %v", i, s, got, want)
		}
	}
}

func TestPathologicalInputIsFast(t *testing.T) {
	tok := gpt2(t)
	tests := []struct {
		name string
		text string
	}{
		{"200000 spaces", strings.Repeat(" ", 200000)},
		{"200000 spaces then word", strings.Repeat(" ", 200000) + "word"},
		{"1MB word", strings.Repeat("a", 1<<20)},
		{"1MB mixed word", strings.Repeat("abcdefghij", 1<<17)},
		{"1MB digits", strings.Repeat("7", 1<<20)},
		{"1MB newlines", strings.Repeat("\n", 1<<20)},
	}
	for _, tc := range tests {
		start := time.Now()
		ids := tok.Encode(tc.text)
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%s: took %v", tc.name, d)
		}
		b, _ := tok.Decode(ids)
		if string(b) != tc.text {
			t.Errorf("%s: round trip differs", tc.name)
		}
	}
	// Compare with tiktoken-go on a size it handles quickly.
	s := strings.Repeat(" ", 20000) + "x" + strings.Repeat("a", 5000)
	if got, want := tok.Encode(s), refTokens(t, s); !slices.Equal(got, want) {
		t.Errorf("long run: differs from tiktoken-go at token %d", firstDiff(got, want))
	}
}

func TestSplitSafeAndEncodeParallel(t *testing.T) {
	tok := gpt2(t)
	r := rand.New(rand.NewPCG(7, 8))
	for i := range 50 {
		s := randomText(r, 2000+r.IntN(20000))
		size := 16 + r.IntN(3000)
		chunks := SplitSafe(s, size)
		if strings.Join(chunks, "") != s {
			t.Fatalf("case %d: chunks do not join to the text", i)
		}
		if got, want := tok.EncodeParallel(s, size), tok.Encode(s); !slices.Equal(got, want) {
			t.Fatalf("case %d (size %d, %d chunks): EncodeParallel differs at token %d", i, size, len(chunks), firstDiff(got, want))
		}
	}
	batch := []string{"a b", "", "c\nd", "é"}
	for i, ids := range tok.EncodeBatch(batch) {
		if !slices.Equal(ids, tok.Encode(batch[i])) {
			t.Errorf("EncodeBatch[%d] differs", i)
		}
	}
}

// FuzzEncode compares with tiktoken-go and checks the round trip. Run for
// longer with (a short -fuzzminimizetime: the default minimizes each new
// input for up to 60 s, during which a short run makes no progress):
//
//	go test ./tokenizer -run '^$' -fuzz FuzzEncode -fuzztime 5m -fuzzminimizetime 10s
func FuzzEncode(f *testing.F) {
	for _, s := range edgeCases {
		if len(s) < 200 {
			f.Add(s)
		}
	}
	tok := gpt2(f)
	f.Fuzz(func(t *testing.T, s string) {
		got := tok.Encode(s)
		if want := refTokens(t, s); !slices.Equal(got, want) {
			t.Fatalf("%q: expected %v, got %v", s, want, got)
		}
		if utf8.ValidString(s) {
			b, err := tok.Decode(got)
			if err != nil || string(b) != s {
				t.Fatalf("%q: round trip gave %q, %v", s, b, err)
			}
		}
	})
}
