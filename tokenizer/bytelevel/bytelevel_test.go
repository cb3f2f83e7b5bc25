package bytelevel

import (
	"bytes"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	text := "Hello, world — é\n\tend"
	toks := Encode(text)
	if len(toks) != len(text) {
		t.Fatalf("%d tokens for %d bytes", len(toks), len(text))
	}
	for _, tok := range toks {
		if tok <= 0 || tok >= VocabSize {
			t.Fatalf("token %d outside (0, 256)", tok)
		}
	}
	back, err := Decode(toks)
	if err != nil || string(back) != text {
		t.Fatalf("Decode = %q, %v; want %q", back, err, text)
	}
}

func TestDocuments(t *testing.T) {
	var toks []int32
	toks = AppendDocument(toks, "ab")
	toks = AppendDocument(toks, "c\x00d") // NUL dropped
	want := []int32{0, 'a', 'b', 0, 'c', 'd'}
	if len(toks) != len(want) {
		t.Fatalf("tokens %v, want %v", toks, want)
	}
	for i := range want {
		if toks[i] != want[i] {
			t.Fatalf("tokens %v, want %v", toks, want)
		}
	}
	back, err := Decode(toks)
	if err != nil || !bytes.Equal(back, []byte("\nab\ncd")) {
		t.Fatalf("Decode = %q, %v", back, err)
	}
	if _, err := Decode([]int32{256}); err == nil {
		t.Error("token 256: no error")
	}
	if _, err := Decode([]int32{-1}); err == nil {
		t.Error("token -1: no error")
	}
}
