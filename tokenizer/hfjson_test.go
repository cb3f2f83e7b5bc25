package tokenizer

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// stream is one text of testdata/tiktoken_streams.json with tiktoken's
// tokens (scripts/hf/make_tokenizers.js).
type stream struct {
	Text              string
	Ordinary, Special []int32
}

func readStreams(t *testing.T, dir string) map[string][]stream {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "tiktoken_streams.json"))
	if err != nil {
		t.Fatal(err)
	}
	var s map[string][]stream
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestJSONMatchesTiktoken: tokenizer.json files written from tiktoken's
// cl100k_base and o200k_base ranks (their first 2048, with the real
// patterns and special tokens) encode the fixture texts (every script,
// emoji sequences, contractions in both cases, white-space runs of every
// kind, digits, code, special tokens, U+FFFD, long runs) to tiktoken's
// token streams, ordinary and with special tokens, and decode back. With
// HILBERT_TOKENIZER_FULL set to a directory written by
// make_tokenizers.js --full, the whole vocabularies are checked too.
func TestJSONMatchesTiktoken(t *testing.T) {
	dirs := []string{"testdata"}
	if d := os.Getenv("HILBERT_TOKENIZER_FULL"); d != "" {
		dirs = append(dirs, d)
	}
	for _, dir := range dirs {
		streams := readStreams(t, dir)
		for _, name := range []string{"cl100k", "o200k"} {
			tok, err := LoadJSON(filepath.Join(dir, name, "tokenizer.json"))
			if err != nil {
				t.Fatal(err)
			}
			if len(streams[name]) < 10 {
				t.Fatalf("%s: %d streams", name, len(streams[name]))
			}
			n := 0
			for _, s := range streams[name] {
				short := s.Text[:min(len(s.Text), 60)]
				if got := tok.Encode(s.Text); !slices.Equal(got, s.Ordinary) {
					i := firstDiff(got, s.Ordinary)
					t.Errorf("%s %s Encode(%q...): token %d of %d is %v, tiktoken's %v", dir, name, short, i, len(s.Ordinary), got[i:min(i+5, len(got))], s.Ordinary[i:min(i+5, len(s.Ordinary))])
				}
				got := tok.EncodeWithSpecial(s.Text)
				if !slices.Equal(got, s.Special) {
					i := firstDiff(got, s.Special)
					t.Errorf("%s %s EncodeWithSpecial(%q...): token %d of %d differs", dir, name, short, i, len(s.Special))
				}
				if back, err := tok.Decode(got); err != nil || string(back) != s.Text {
					t.Errorf("%s %s Decode(EncodeWithSpecial(%q...)) differs, %v", dir, name, short, err)
				}
				n += len(s.Special)
			}
			t.Logf("%s %s: %d vocabulary ids, %d texts, %d tokens equal to tiktoken's", dir, name, tok.VocabSize(), len(streams[name]), n)
		}
	}
}

// TestGPT2JSON: GPT-2's tokenizer written as tokenizer.json (WriteJSON:
// GPT-2's vocabulary in the byte-level alphabet, 50000 merges, the
// ByteLevel pre-tokenizer) loads back to a tokenizer equal to the
// built-in r50k one: the ids Hugging Face's gpt2 vocabulary has, and the
// same tokens on every fixture text and a corpus sample.
func TestGPT2JSON(t *testing.T) {
	gpt2, err := GPT2()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := gpt2.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var j struct {
		Model struct {
			Vocab  map[string]int32
			Merges [][2]string
		}
	}
	if err := json.Unmarshal(buf.Bytes(), &j); err != nil {
		t.Fatal(err)
	}
	// Known entries of Hugging Face's gpt2 vocab.json and merges.txt.
	if j.Model.Vocab["Ġthe"] != 262 || j.Model.Vocab["!"] != 0 || j.Model.Vocab["Ġ"] != 220 || len(j.Model.Merges) != 50000 ||
		j.Model.Merges[0] != [2]string{"Ġ", "t"} {
		t.Errorf("vocab Ġthe %d, ! %d, Ġ %d; %d merges, first %v", j.Model.Vocab["Ġthe"], j.Model.Vocab["!"], j.Model.Vocab["Ġ"], len(j.Model.Merges), j.Model.Merges[0])
	}
	tok, err := ParseJSON("gpt2 tokenizer.json", buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if tok.VocabSize() != VocabSize {
		t.Errorf("vocab size %d, want %d", tok.VocabSize(), VocabSize)
	}
	texts := []string{strings.Repeat("The quick brown fox jumps over the lazy dog. ", 20)}
	for _, s := range readStreams(t, "testdata")["cl100k"] {
		texts = append(texts, s.Text)
	}
	for _, text := range texts {
		if a, b := tok.EncodeWithSpecial(text), gpt2.EncodeWithSpecial(text); !slices.Equal(a, b) {
			t.Errorf("EncodeWithSpecial(%q)\n tokenizer.json %v\n built-in       %v", text, a, b)
		}
	}
}

// TestJSONErrors: a tokenizer.json this package cannot reproduce is an
// error naming the field.
func TestJSONErrors(t *testing.T) {
	base, err := os.ReadFile("testdata/cl100k/tokenizer.json")
	if err != nil {
		t.Fatal(err)
	}
	edit := func(f func(map[string]any)) []byte {
		var m map[string]any
		json.Unmarshal(base, &m)
		f(m)
		b, _ := json.Marshal(m)
		return b
	}
	model := func(m map[string]any) map[string]any { return m["model"].(map[string]any) }
	cases := []struct {
		name string
		json []byte
		want string
	}{
		{"wordpiece", edit(func(m map[string]any) { model(m)["type"] = "WordPiece" }), `model.type: "WordPiece": only byte-level BPE`},
		{"byte fallback", edit(func(m map[string]any) { model(m)["byte_fallback"] = true }), "model.byte_fallback: true"},
		{"normalizer", edit(func(m map[string]any) { m["normalizer"] = map[string]any{"type": "NFC"} }), `normalizer: {"type":"NFC"}: not supported`},
		{"metaspace", edit(func(m map[string]any) { m["pre_tokenizer"] = map[string]any{"type": "Metaspace"} }), `pre_tokenizer: type "Metaspace"`},
		{"lookbehind", edit(func(m map[string]any) {
			m["pre_tokenizer"].(map[string]any)["pretokenizers"].([]any)[0].(map[string]any)["pattern"] = map[string]any{"Regex": `(?<=a)b|\s+`}
		}), "look-around"},
		{"merges order", edit(func(m map[string]any) {
			ms := model(m)["merges"].([]any)
			ms[0], ms[1] = ms[1], ms[0]
		}), "merges out of id order are not supported"},
		{"missing byte", edit(func(m map[string]any) { delete(model(m)["vocab"].(map[string]any), "Ā") }), "no token has id"},
		{"bad alphabet", edit(func(m map[string]any) {
			v := model(m)["vocab"].(map[string]any)
			delete(v, "!")
			v["日本"] = 0
		}), `token "日本" is not in the byte-level alphabet`},
	}
	for _, c := range cases {
		_, err := ParseJSON("tok.json", c.json)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "tok.json") {
			t.Errorf("%s: error %v, want one naming tok.json and %q", c.name, err, c.want)
		}
	}
}
