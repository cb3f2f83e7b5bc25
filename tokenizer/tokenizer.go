// Package tokenizer implements byte-level BPE tokenizers: GPT-2's, byte-exact
// with tiktoken's r50k_base (GPT2), and those of Hugging Face tokenizer.json
// files (LoadJSON: GPT-2's, and the Llama 3 / Qwen2 / SmolLM style with its
// own pre-tokenizer pattern and special tokens, token-equal to tiktoken's
// cl100k_base and o200k_base). Encode is tiktoken's encode_ordinary,
// EncodeWithSpecial also turns special tokens ("<|endoftext|>" into
// EndOfText) into their ids, and Decode returns the bytes a token sequence
// stands for.
//
// The ranks come from the r50k_base.tiktoken file embedded by
// github.com/pkoukk/tiktoken-go-loader and are checked against tiktoken's own
// SHA-256 when first loaded. The pre-tokenizer follows GPT-2's pattern by hand,
// without a backtracking regex, and merging is O(n log n) per piece, so
// pathological inputs (a run of 200,000 spaces, a 1 MB word) stay fast; a
// piece holds at most MaxPieceRunes characters, so memory is bounded per
// piece (runs longer than that are the one place tokens differ from
// tiktoken's).
//
// Text is read as tiktoken reads a Python str: each byte that is not part of
// valid UTF-8 counts as U+FFFD (as Go's []rune conversion does). For valid
// UTF-8, Decode(Encode(s)) == s.
//
// The package knows nothing of tensors or devices and must not import them;
// token ids are int32, ready to hand to a model.
package tokenizer

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"
)

const (
	// EndOfText is the id of GPT-2's "<|endoftext|>" token, which separates
	// documents.
	EndOfText = 50256
	// EndOfTextString is the text of the EndOfText special token.
	EndOfTextString = "<|endoftext|>"
	// VocabSize is the number of GPT-2 token ids, 0..50256.
	VocabSize = 50257
)

// Tokenizer encodes text to token ids and back: GPT-2's (GPT2) or a
// byte-level BPE read from a Hugging Face tokenizer.json (LoadJSON). It is
// immutable after construction and safe for concurrent use.
type Tokenizer struct {
	v *vocab
	// pre is the pre-tokenizer of a tokenizer.json pattern; nil is
	// GPT-2's, scanned by hand (nextPiece).
	pre *regexPre
	// specials are the special tokens EncodeWithSpecial recognises,
	// longest first.
	specials []special
}

// special is one special token: its text and id.
type special struct {
	text string
	id   int32
}

var mergers = sync.Pool{New: func() any { return new(merger) }}

// VocabSize returns the number of token ids, special tokens included
// (GPT-2: VocabSize).
func (t *Tokenizer) VocabSize() int { return len(t.v.decoder) }

// Encode returns the tokens of text without special tokens, exactly as
// tiktoken's encode_ordinary with r50k_base: "<|endoftext|>" in text is
// encoded as ordinary characters.
func (t *Tokenizer) Encode(text string) []int32 {
	return t.AppendEncode(make([]int32, 0, len(text)/4+1), text)
}

// AppendEncode appends the tokens of text (as Encode) to dst and returns the
// extended slice. It allocates nothing beyond growing dst.
func (t *Tokenizer) AppendEncode(dst []int32, text string) []int32 {
	if !utf8.ValidString(text) {
		text = replaceInvalid(text)
	}
	m := mergers.Get().(*merger)
	if t.pre != nil {
		dst = t.pre.appendPieces(t.v, m, dst, text)
	} else {
		for p := 0; p < len(text); {
			e := nextPiece(text, p)
			dst = t.v.appendPiece(m, dst, text[p:e])
			p = e
		}
	}
	mergers.Put(m)
	return dst
}

// EncodeWithSpecial encodes text like Encode but turns each occurrence of
// a special token ("<|endoftext|>" into EndOfText for GPT-2) into its id,
// as tiktoken's encode(text, allowed_special="all") does: the earliest
// occurrence first, the longest of those starting there.
func (t *Tokenizer) EncodeWithSpecial(text string) []int32 {
	dst := make([]int32, 0, len(text)/4+1)
	for {
		at, which := -1, -1
		for k, sp := range t.specials {
			if i := strings.Index(text, sp.text); i >= 0 && (at < 0 || i < at) {
				at, which = i, k
			}
		}
		if at < 0 {
			return t.AppendEncode(dst, text)
		}
		sp := t.specials[which]
		dst = t.AppendEncode(dst, text[:at])
		dst = append(dst, sp.id)
		text = text[at+len(sp.text):]
	}
}

// Decode returns the bytes the tokens stand for (a special token decodes
// to its text, EndOfText to "<|endoftext|>"). It fails on an id outside
// [0, VocabSize()).
func (t *Tokenizer) Decode(tokens []int32) ([]byte, error) {
	return t.AppendDecode(nil, tokens)
}

// AppendDecode appends the bytes of tokens to dst, as Decode.
func (t *Tokenizer) AppendDecode(dst []byte, tokens []int32) ([]byte, error) {
	for i, id := range tokens {
		if id < 0 || int(id) >= len(t.v.decoder) {
			return dst, fmt.Errorf("tokenizer: decode: token %d: id: expected [0,%d), got %d", i, len(t.v.decoder), id)
		}
		dst = append(dst, t.v.decoder[id]...)
	}
	return dst, nil
}

// TokenBytes returns the bytes of one token id, or nil if id is out of range.
// The returned slice must not be modified.
func (t *Tokenizer) TokenBytes(id int32) []byte {
	if id < 0 || int(id) >= len(t.v.decoder) {
		return nil
	}
	return t.v.decoder[id]
}

// EncodeBatch encodes many documents (as Encode) in parallel on up to
// GOMAXPROCS goroutines; out[i] holds the tokens of texts[i].
func (t *Tokenizer) EncodeBatch(texts []string) [][]int32 {
	out := make([][]int32, len(texts))
	parallel(len(texts), func(i int) { out[i] = t.Encode(texts[i]) })
	return out
}

// EncodeParallel encodes one large text (as Encode) by cutting it at safe
// points (see SafeCut) into chunks of about chunk bytes that are encoded in
// parallel. The result equals Encode(text). chunk <= 0 means 1 MiB. The
// safe points are GPT-2's pattern's; a tokenizer.json tokenizer with its
// own pattern encodes the text whole.
func (t *Tokenizer) EncodeParallel(text string, chunk int) []int32 {
	if t.pre != nil {
		return t.Encode(text)
	}
	chunks := SplitSafe(text, chunk)
	if len(chunks) == 1 {
		return t.Encode(text)
	}
	return slices.Concat(t.EncodeBatch(chunks)...)
}

// SplitSafe cuts text into consecutive chunks of about size bytes (1 MiB if
// size <= 0) at points found as by SafeCut, so that encoding the chunks one
// by one and concatenating equals encoding text: a line end in the second
// half of the window, else the last piece end in it (pieceCut). A chunk
// grows past size only when no piece ends in its window.
func SplitSafe(text string, size int) []string {
	if size <= 0 {
		size = 1 << 20
	}
	var out []string
	for len(text) > size {
		q := safeCut(text, size/2+1, size)
		if q == 0 {
			q = pieceCut(text, size)
		}
		if q == 0 {
			q = firstSafeCut(text, size)
			if q == 0 {
				break
			}
		}
		out = append(out, text[:q])
		text = text[q:]
	}
	return append(out, text)
}

// replaceInvalid replaces each byte that is not part of valid UTF-8 with
// U+FFFD, as Go's []rune conversion (and so tiktoken-go) does.
func replaceInvalid(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); {
		r, w := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && w == 1 {
			b.WriteString("\uFFFD")
		} else {
			b.WriteString(s[i : i+w])
		}
		i += w
	}
	return b.String()
}

// parallel runs f(0..n-1) on up to GOMAXPROCS goroutines.
func parallel(n int, f func(i int)) {
	workers := min(runtime.GOMAXPROCS(0), n)
	if workers <= 1 {
		for i := 0; i < n; i++ {
			f(i)
		}
		return
	}
	var wg sync.WaitGroup
	var next atomic.Int64 // the next index to take
	for range workers {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				f(i)
			}
		})
	}
	wg.Wait()
}
