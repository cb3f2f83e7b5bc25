package tokenizer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// LoadJSON reads a Hugging Face tokenizer.json of a byte-level BPE: model
// type BPE over GPT-2's byte-to-unicode alphabet, a ByteLevel
// pre-tokenizer (GPT-2's pattern) or a Split on a regex pattern followed
// by a ByteLevel one without its own (Llama 3, Qwen2, SmolLM), a ByteLevel
// decoder or none, and added tokens as special tokens. Merging is
// tiktoken's (the lowest-ranked mergeable pair first, a piece found whole
// in the vocabulary taken as it is), which is Hugging Face's BPE for
// vocabularies whose merges come in id order; the merges are checked to.
// Anything else (another model type, byte fallback, a normalizer, a
// pre-tokenizer or pattern construct it does not implement) is an error
// naming the file and the field.
func LoadJSON(path string) (*Tokenizer, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	return ParseJSON(path, b)
}

// hfJSON is the part of tokenizer.json this package reads.
type hfJSON struct {
	AddedTokens []struct {
		ID      int32  `json:"id"`
		Content string `json:"content"`
	} `json:"added_tokens"`
	Normalizer   json.RawMessage `json:"normalizer"`
	PreTokenizer json.RawMessage `json:"pre_tokenizer"`
	Decoder      json.RawMessage `json:"decoder"`
	Model        struct {
		Type         string            `json:"type"`
		Vocab        map[string]int32  `json:"vocab"`
		Merges       []json.RawMessage `json:"merges"`
		ByteFallback bool              `json:"byte_fallback"`
		Prefix       *string           `json:"continuing_subword_prefix"`
		Suffix       *string           `json:"end_of_word_suffix"`
	} `json:"model"`
}

// preTok is a pre-tokenizer object of tokenizer.json.
type preTok struct {
	Type           string          `json:"type"`
	AddPrefixSpace bool            `json:"add_prefix_space"`
	UseRegex       *bool           `json:"use_regex"`
	Pretokenizers  []preTok        `json:"pretokenizers"`
	Pattern        json.RawMessage `json:"pattern"`
	Behavior       string          `json:"behavior"`
	Invert         bool            `json:"invert"`
}

// ParseJSON is LoadJSON of the bytes of tokenizer.json, named name in
// errors.
func ParseJSON(name string, b []byte) (*Tokenizer, error) {
	var j hfJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return nil, fmt.Errorf("tokenizer: %s: %w", name, err)
	}
	fail := func(field, format string, args ...any) (*Tokenizer, error) {
		return nil, fmt.Errorf("tokenizer: %s: %s: %s", name, field, fmt.Sprintf(format, args...))
	}
	switch m := j.Model; {
	case m.Type != "BPE":
		return fail("model.type", "%q: only byte-level BPE is supported", m.Type)
	case m.ByteFallback:
		return fail("model.byte_fallback", "true (a SentencePiece-style BPE): not supported")
	case m.Prefix != nil && *m.Prefix != "" || m.Suffix != nil && *m.Suffix != "":
		return fail("model", "continuing_subword_prefix / end_of_word_suffix: not supported")
	}
	if n := string(bytes.TrimSpace(j.Normalizer)); n != "" && n != "null" {
		return fail("normalizer", "%s: not supported", n)
	}
	if d := string(bytes.TrimSpace(j.Decoder)); d != "" && d != "null" {
		var dec struct{ Type string }
		if json.Unmarshal(j.Decoder, &dec) != nil || dec.Type != "ByteLevel" {
			return fail("decoder", "%s: only ByteLevel is supported", d)
		}
	}
	pre, err := parsePre(j.PreTokenizer)
	if err != nil {
		return fail("pre_tokenizer", "%v", err)
	}
	v, specials, err := jsonVocab(&j)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %s: %w", name, err)
	}
	return &Tokenizer{v: v, pre: pre, specials: specials}, nil
}

// parsePre returns the pre-tokenizer: nil for ByteLevel with GPT-2's
// pattern, a regexPre for Split(Regex) then ByteLevel(use_regex false).
func parsePre(raw json.RawMessage) (*regexPre, error) {
	var p preTok
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, err
	}
	byteLevel := func(p preTok, regex bool) error {
		switch {
		case p.Type != "ByteLevel":
			return fmt.Errorf("type %q where ByteLevel was expected", p.Type)
		case p.AddPrefixSpace:
			return fmt.Errorf("ByteLevel add_prefix_space true: not supported")
		case (p.UseRegex == nil || *p.UseRegex) != regex:
			return fmt.Errorf("ByteLevel use_regex %v: not supported here", !regex)
		}
		return nil
	}
	if p.Type == "ByteLevel" {
		return nil, byteLevel(p, true)
	}
	if p.Type != "Sequence" || len(p.Pretokenizers) != 2 || p.Pretokenizers[0].Type != "Split" {
		return nil, fmt.Errorf("type %q: only ByteLevel, or a Sequence of Split(Regex) and ByteLevel, is supported", p.Type)
	}
	split := p.Pretokenizers[0]
	var pat struct{ Regex *string }
	if json.Unmarshal(split.Pattern, &pat) != nil || pat.Regex == nil {
		return nil, fmt.Errorf("Split pattern %s: want {\"Regex\": ...}", split.Pattern)
	}
	if split.Behavior != "Isolated" || split.Invert {
		return nil, fmt.Errorf("Split behavior %q invert %v: only Isolated, not inverted, is supported", split.Behavior, split.Invert)
	}
	if err := byteLevel(p.Pretokenizers[1], false); err != nil {
		return nil, err
	}
	return compilePattern(*pat.Regex)
}

// jsonVocab builds the vocabulary: model.vocab decoded from the
// byte-to-unicode alphabet, every byte a token, ids 0..n-1 without gaps
// (added tokens may extend them), merges in id order.
func jsonVocab(j *hfJSON) (*vocab, []special, error) {
	dec := unicodeToByte()
	n := len(j.Model.Vocab)
	for _, a := range j.AddedTokens {
		n = max(n, int(a.ID)+1)
	}
	v := &vocab{ranks: make(map[string]int32, len(j.Model.Vocab)), decoder: make([][]byte, n)}
	for i := range v.byteTok {
		v.byteTok[i] = -1
	}
	for s, id := range j.Model.Vocab {
		if id < 0 || int(id) >= n || v.decoder[id] != nil {
			return nil, nil, fmt.Errorf("model.vocab: token %q: id %d: expected a unique id in [0,%d)", s, id, n)
		}
		b, ok := fromByteLevel(dec, s)
		if !ok {
			return nil, nil, fmt.Errorf("model.vocab: token %q is not in the byte-level alphabet", s)
		}
		v.ranks[string(b)] = id
		v.decoder[id] = b
		if len(b) == 1 {
			v.byteTok[b[0]] = id
		}
	}
	var specials []special
	for _, a := range j.AddedTokens {
		if a.Content == "" || a.ID < 0 {
			return nil, nil, fmt.Errorf("added_tokens: token %q id %d", a.Content, a.ID)
		}
		if old := v.decoder[a.ID]; old != nil && string(old) != a.Content {
			return nil, nil, fmt.Errorf("added_tokens: %q has id %d, which the vocabulary gives %q", a.Content, a.ID, old)
		}
		delete(v.ranks, a.Content) // a special token is never merged into
		v.decoder[a.ID] = []byte(a.Content)
		specials = append(specials, special{a.Content, a.ID})
	}
	sort.SliceStable(specials, func(a, b int) bool { return len(specials[a].text) > len(specials[b].text) })
	for id, b := range v.decoder {
		if b == nil {
			return nil, nil, fmt.Errorf("model.vocab: no token has id %d (of %d)", id, n)
		}
	}
	for b, id := range v.byteTok {
		if id < 0 {
			return nil, nil, fmt.Errorf("model.vocab: byte 0x%02x has no token", b)
		}
	}
	last := int32(-1)
	for i, raw := range j.Model.Merges {
		a, b, err := mergePair(raw)
		if err != nil {
			return nil, nil, fmt.Errorf("model.merges[%d]: %w", i, err)
		}
		ab, okA := fromByteLevel(dec, a)
		bb, okB := fromByteLevel(dec, b)
		id, ok := v.ranks[string(ab)+string(bb)]
		if !okA || !okB || !ok {
			return nil, nil, fmt.Errorf("model.merges[%d]: %q + %q is not in the vocabulary", i, a, b)
		}
		if id <= last {
			return nil, nil, fmt.Errorf("model.merges[%d]: %q + %q makes id %d after id %d: merges out of id order are not supported", i, a, b, id, last)
		}
		last = id
	}
	return v, specials, nil
}

// mergePair reads a merge written as ["a", "b"] or "a b".
func mergePair(raw json.RawMessage) (string, string, error) {
	var pair []string
	if json.Unmarshal(raw, &pair) == nil && len(pair) == 2 {
		return pair[0], pair[1], nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if a, b, ok := strings.Cut(s, " "); ok && !strings.Contains(b, " ") {
			return a, b, nil
		}
	}
	return "", "", fmt.Errorf("%s: want [\"a\", \"b\"] or \"a b\"", raw)
}

// byteToUnicode is GPT-2's bytes_to_unicode: printable bytes stand for
// themselves, the other 68 for the code points 256 up, in byte order.
func byteToUnicode() [256]rune {
	var m [256]rune
	next := rune(256)
	for b := range 256 {
		if b >= '!' && b <= '~' || b >= 0xa1 && b <= 0xac || b >= 0xae {
			m[b] = rune(b)
		} else {
			m[b] = next
			next++
		}
	}
	return m
}

func unicodeToByte() map[rune]byte {
	m := map[rune]byte{}
	for b, r := range byteToUnicode() {
		m[r] = byte(b)
	}
	return m
}

// fromByteLevel returns the bytes a byte-level vocabulary string stands
// for.
func fromByteLevel(dec map[rune]byte, s string) ([]byte, bool) {
	out := make([]byte, 0, len(s))
	for _, r := range s {
		b, ok := dec[r]
		if !ok {
			return nil, false
		}
		out = append(out, b)
	}
	return out, true
}

// WriteJSON writes t as a Hugging Face tokenizer.json that LoadJSON (and
// Hugging Face's tokenizers) read back to the same tokens: the
// vocabulary in the byte-level alphabet, the merges found by running BPE
// on each token with the ranks below its own (as transformers converts a
// tiktoken vocabulary), the special tokens as added tokens, and GPT-2's
// ByteLevel pre-tokenizer or a Split on t's pattern.
func (t *Tokenizer) WriteJSON(w io.Writer) error {
	enc := byteToUnicode()
	str := func(b []byte) string {
		var sb strings.Builder
		for _, c := range b {
			sb.WriteRune(enc[c])
		}
		return sb.String()
	}
	isSpecial := map[int32]bool{}
	type added struct {
		ID         int32  `json:"id"`
		Content    string `json:"content"`
		SingleWord bool   `json:"single_word"`
		LStrip     bool   `json:"lstrip"`
		RStrip     bool   `json:"rstrip"`
		Normalized bool   `json:"normalized"`
		Special    bool   `json:"special"`
	}
	var adds []added
	for _, sp := range t.specials {
		isSpecial[sp.id] = true
		adds = append(adds, added{ID: sp.id, Content: sp.text, Special: true})
	}
	sort.Slice(adds, func(a, b int) bool { return adds[a].ID < adds[b].ID })
	vocab := map[string]int32{}
	var merges [][2]string
	var m merger
	for id, b := range t.v.decoder {
		if isSpecial[int32(id)] {
			continue
		}
		vocab[str(b)] = int32(id)
		if len(b) > 1 {
			parts := t.v.splitBelow(&m, string(b), int32(id))
			if len(parts) != 2 {
				return fmt.Errorf("tokenizer: WriteJSON: token %d (%q) is not the merge of two tokens of lower rank", id, b)
			}
			merges = append(merges, [2]string{str([]byte(parts[0])), str([]byte(parts[1]))})
		}
	}
	var pre any = map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true}
	if t.pre != nil {
		pre = map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Split", "pattern": map[string]string{"Regex": t.pre.pattern}, "behavior": "Isolated", "invert": false},
			map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false},
		}}
	}
	out := map[string]any{
		"version": "1.0", "truncation": nil, "padding": nil, "added_tokens": adds, "normalizer": nil,
		"pre_tokenizer": pre, "post_processor": nil,
		"decoder": map[string]any{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
		"model": map[string]any{"type": "BPE", "dropout": nil, "unk_token": nil, "continuing_subword_prefix": nil,
			"end_of_word_suffix": nil, "fuse_unk": false, "byte_fallback": false, "ignore_merges": true,
			"vocab": vocab, "merges": merges},
	}
	b, err := json.Marshal(out)
	if err != nil {
		return fmt.Errorf("tokenizer: WriteJSON: %w", err)
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// splitBelow merges the bytes of s as BPE does with only the ranks below
// limit and returns the parts left.
func (v *vocab) splitBelow(m *merger, s string, limit int32) []string {
	parts := m.parts[:0]
	for i := range len(s) {
		parts = append(parts, part{start: int32(i)})
	}
	parts = append(parts, part{start: int32(len(s))})
	for {
		best, bi := limit, -1
		for i := 0; i+2 < len(parts); i++ {
			if r, ok := v.ranks[s[parts[i].start:parts[i+2].start]]; ok && r < best {
				best, bi = r, i
			}
		}
		if bi < 0 {
			break
		}
		parts = append(parts[:bi+1], parts[bi+2:]...)
	}
	out := make([]string, len(parts)-1)
	for i := range out {
		out[i] = s[parts[i].start:parts[i+1].start]
	}
	m.parts = parts[:0]
	return out
}
