package smallbpe

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/hilbert-ml/hilbert/tokenizer"
)

func TestTrainKnownMerges(t *testing.T) {
	for _, c := range []struct {
		name, text string
		vocab      int
		want       []Pair
	}{
		// Pieces "ab", " ab", " ab", " abc": (a,b) 4 times, then " "+ab 3, then " ab"+c.
		{"frequency", "ab ab ab abc", 259, []Pair{{'a', 'b'}, {' ', 256}, {257, 'c'}}},
		// Pieces "ab", " cd": every pair once; ties to the smaller left id.
		{"ties", "ab cd", 259, []Pair{{' ', 'c'}, {'a', 'b'}, {256, 'd'}}},
		// "aaaa": (a,a) counted 3 times; merged left to right into two 256s.
		{"overlap", "aaaa", 258, []Pair{{'a', 'a'}, {256, 256}}},
		{"no merges", "anything", 256, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, err := Train(c.vocab, c.text)
			if err != nil {
				t.Fatal(err)
			}
			if got := b.Merges(); !reflect.DeepEqual(got, c.want) {
				t.Errorf("merges %v, want %v", got, c.want)
			}
			if b.VocabSize() != c.vocab {
				t.Errorf("VocabSize %d, want %d", b.VocabSize(), c.vocab)
			}
		})
	}
}

func TestEncodeKnown(t *testing.T) {
	b, err := Train(259, "ab ab ab abc")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		text string
		want []int32
	}{
		{"ab", []int32{256}},
		{" abc", []int32{258}},
		{" ab ab", []int32{257, 257}},
		{"abc", []int32{256, 'c'}}, // no merge of 256 with c without the space
		{"  ab", []int32{' ', 257}},
		{"\nab", []int32{'\n', 256}},
		{"ba", []int32{'b', 'a'}},
		{"", nil},
	} {
		if got := b.Encode(c.text); !reflect.DeepEqual(got, c.want) {
			t.Errorf("Encode(%q) = %v, want %v", c.text, got, c.want)
		}
	}
	o, err := Train(258, "aaaa")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := o.Encode("aaaaa"), []int32{257, 'a'}; !reflect.DeepEqual(got, want) {
		t.Errorf("Encode(aaaaa) = %v, want %v", got, want)
	}
}

func TestPieces(t *testing.T) {
	for _, c := range []struct {
		text string
		want []string
	}{
		{"Hello world", []string{"Hello", " world"}},
		{"a  b", []string{"a", " ", " b"}},
		{"x\n\ny", []string{"x", "\n", "\n", "y"}},
		{"v12, ok!  ", []string{"v", "12", ",", " ok", "!", "  "}},
		{" café\xff\xfeé", []string{" café", "\xff\xfe", "é"}},
		{"don't", []string{"don", "'", "t"}}, // no contractions
		// A run is cut at tokenizer.MaxPieceRunes characters.
		{strings.Repeat("a", tokenizer.MaxPieceRunes+5), []string{strings.Repeat("a", tokenizer.MaxPieceRunes), "aaaaa"}},
	} {
		var got []string
		for p := 0; p < len(c.text); {
			q := nextPiece(c.text, p)
			got = append(got, c.text[p:q])
			p = q
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("pieces of %q: %q, want %q", c.text, got, c.want)
		}
	}
}

// sampleText is a few hundred kB of English: Newton's Opticks from the Go
// installation when present, else a generated text of Zipf-frequency
// random words.
func sampleText(t testing.TB) string {
	for _, root := range []string{os.Getenv("GOROOT"), runtime.GOROOT()} {
		if root == "" {
			continue
		}
		if b, err := os.ReadFile(filepath.Join(root, "src", "testdata", "Isaac.Newton-Opticks.txt")); err == nil {
			return string(b)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	words := make([]string, 3000)
	for i := range words {
		w := make([]byte, 2+r.IntN(8))
		for j := range w {
			w[j] = "etaoinshrdlucmfwypvbgkqjxz"[min(25, int(r.ExpFloat64()*6))]
		}
		words[i] = string(w)
	}
	z := rand.NewZipf(r, 1.1, 1, uint64(len(words)-1))
	var s strings.Builder
	for s.Len() < 300_000 {
		s.WriteString(words[z.Uint64()])
		s.WriteByte(" \n"[r.IntN(2)*r.IntN(2)])
	}
	return s.String()
}

func TestRoundTripAndCompression(t *testing.T) {
	text := sampleText(t)
	b, err := Train(1024, text)
	if err != nil {
		t.Fatal(err)
	}
	toks := b.Encode(text)
	t.Logf("%d bytes, %d tokens: %.3f tokens/byte", len(text), len(toks), float64(len(toks))/float64(len(text)))
	if ratio := float64(len(toks)) / float64(len(text)); ratio > 0.4 {
		t.Errorf("%d tokens for %d bytes: %.3f tokens/byte, want < 0.4", len(toks), len(text), ratio)
	}
	for _, tok := range toks {
		if tok < 0 || int(tok) >= 1024 {
			t.Fatalf("token %d outside [0, 1024)", tok)
		}
	}
	if back, err := b.Decode(toks); err != nil || string(back) != text {
		t.Fatalf("Decode(Encode(text)) differs (err %v)", err)
	}
	// Arbitrary bytes: invalid UTF-8, NUL, control bytes, pieces of the text.
	r := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 300; i++ {
		n := r.IntN(80)
		var s []byte
		for len(s) < n {
			switch r.IntN(3) {
			case 0:
				s = append(s, byte(r.IntN(256)))
			case 1:
				s = append(s, " \n\t"[r.IntN(3)])
			default:
				o := r.IntN(len(text) - 20)
				s = append(s, text[o:o+r.IntN(20)]...)
			}
		}
		got, err := b.Decode(b.Encode(string(s)))
		if err != nil || !bytes.Equal(got, s) {
			t.Fatalf("round trip of %q: %q, %v", s, got, err)
		}
	}
	// The cached encoder writes the same tokens as AppendDocument.
	enc := b.Encoder()
	docs := strings.Split(text[:50_000], "\n\n")
	var a, c []int32
	for _, d := range append(docs, "nul\x00byte", "nul\x00byte") {
		a = b.AppendDocument(a, d)
		c = enc(c, d)
	}
	if !reflect.DeepEqual(a, c) {
		t.Error("Encoder and AppendDocument differ")
	}
	if got, want := b.AppendDocument(nil, "the\x00 light"), append([]int32{EndOfText}, b.Encode("the light")...); !reflect.DeepEqual(got, want) {
		t.Errorf("AppendDocument(the NUL light) = %v, want %v", got, want)
	}
}

func TestDeterminism(t *testing.T) {
	text := sampleText(t)[:100_000]
	a, err := Train(600, text)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		c, err := Train(600, text)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(a.Merges(), c.Merges()) {
			t.Fatal("two trainings on the same text differ")
		}
	}
	// A prefix of the merges of a larger vocabulary is the smaller one.
	d, err := Train(400, text)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(d.Merges(), a.Merges()[:400-ByteTokens]) {
		t.Error("Train(400) is not the first 144 merges of Train(600)")
	}
}

func TestSaveLoad(t *testing.T) {
	b, err := Train(400, sampleText(t)[:100_000])
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "bpe.txt")
	if err := b.Save(path); err != nil {
		t.Fatal(err)
	}
	l, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if l.VocabSize() != 400 || !reflect.DeepEqual(l.Merges(), b.Merges()) {
		t.Errorf("loaded vocab %d, merges equal %v", l.VocabSize(), reflect.DeepEqual(l.Merges(), b.Merges()))
	}
	for id := int32(0); id < 400; id++ {
		if !bytes.Equal(l.TokenBytes(id), b.TokenBytes(id)) {
			t.Fatalf("token %d: %q, want %q", id, l.TokenBytes(id), b.TokenBytes(id))
		}
	}
}

func TestErrors(t *testing.T) {
	for _, v := range []int{0, 255, -1, MaxVocab + 1} {
		if _, err := Train(v, "text"); err == nil || !strings.Contains(err.Error(), "vocabulary") {
			t.Errorf("Train(%d): err %v", v, err)
		}
	}
	if _, err := Train(260, "ab ab ab abc"); err == nil || !strings.Contains(err.Error(), "no pair left") {
		t.Errorf("Train past the text's pairs: err %v", err)
	}
	dir := t.TempDir()
	for _, c := range []struct{ name, body, want string }{
		{"empty", "", "empty"},
		{"header", "gpt2 merges\n", "header"},
		{"vocab", "smallbpe merges v1 vocab 12\n", "header"},
		{"count", "smallbpe merges v1 vocab 258\n97 98\n", "1 merges for vocab 258"},
		{"syntax", "smallbpe merges v1 vocab 257\n97,98\n", "line 2"},
		{"future token", "smallbpe merges v1 vocab 257\n97 256\n", "merge 0"},
		{"repeat", "smallbpe merges v1 vocab 258\n97 98\n97 98\n", "repeats"},
	} {
		path := filepath.Join(dir, c.name)
		if err := os.WriteFile(path, []byte(c.body), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(path); err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: err %v, want one naming %q and the file", c.name, err, c.want)
		}
	}
	if _, err := Load(filepath.Join(dir, "missing")); err == nil {
		t.Error("missing file: no error")
	}
	b, _ := Train(257, "ab")
	for _, toks := range [][]int32{{257}, {-1}} {
		if _, err := b.Decode(toks); err == nil {
			t.Errorf("Decode(%v): no error", toks)
		}
	}
	if b.TokenBytes(257) != nil || b.TokenBytes(-1) != nil {
		t.Error("TokenBytes out of range: not nil")
	}
}
