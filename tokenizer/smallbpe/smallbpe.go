// Package smallbpe trains and applies a small byte-level BPE: the 256 byte
// values are tokens 0..255 and every merge of two adjacent tokens adds one,
// up to a chosen vocabulary size (1,024 for the exact diameter oracle,
// whose cost grows with the square of the vocabulary).
//
// Text is split into pieces by a GPT-2-style pre-tokenizer (an optional
// leading space and a run of letters, of digits or of other non-space
// characters; runs of whitespace), merges never cross a piece boundary, and
// training merges the most frequent adjacent pair over the pieces of the
// text repeatedly, ties broken by the smaller left then right token id.
// Encoding applies the merges by rank, so it reproduces the training
// segmentation; Decode(Encode(b)) == b for any bytes, valid UTF-8 or not.
//
// As in package bytelevel, token 0 (the NUL byte) doubles as the
// end-of-text token: AppendDocument writes it before each document and
// drops NUL bytes from the document.
//
// The GPT-2 tokenizer of package tokenizer stays the default everywhere
// else.
package smallbpe

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/hilbert-ml/hilbert/internal/atomicfile"
	"github.com/hilbert-ml/hilbert/internal/regfile"
	"github.com/hilbert-ml/hilbert/tokenizer"
)

const (
	// ByteTokens is the number of byte tokens, the smallest vocabulary.
	ByteTokens = 256
	// MaxVocab is the largest vocabulary Train accepts.
	MaxVocab = 1 << 20
	// EndOfText precedes every document written by AppendDocument (the
	// NUL byte's token).
	EndOfText int32 = 0
)

// Pair is a merge: the adjacent tokens Left, Right become one token.
type Pair struct{ Left, Right int32 }

// BPE is a trained byte-level BPE. Merge i (rank i) makes token 256 + i.
// Its methods are safe for concurrent use.
type BPE struct {
	merges []Pair
	rank   map[Pair]int32 // merge -> rank
	bytes  [][]byte       // token -> its bytes
}

// New builds a BPE from its merges, checking that merge i joins tokens
// below 256 + i.
func New(merges []Pair) (*BPE, error) {
	if len(merges) > MaxVocab-ByteTokens {
		return nil, fmt.Errorf("smallbpe: %d merges: more than %d", len(merges), MaxVocab-ByteTokens)
	}
	b := &BPE{merges: append([]Pair(nil), merges...), rank: make(map[Pair]int32, len(merges)),
		bytes: make([][]byte, ByteTokens+len(merges))}
	for i := range ByteTokens {
		b.bytes[i] = []byte{byte(i)}
	}
	for i, m := range merges {
		id := int32(ByteTokens + i)
		if m.Left < 0 || m.Left >= id || m.Right < 0 || m.Right >= id {
			return nil, fmt.Errorf("smallbpe: merge %d (%d, %d): tokens must lie in [0, %d)", i, m.Left, m.Right, id)
		}
		if _, dup := b.rank[m]; dup {
			return nil, fmt.Errorf("smallbpe: merge %d (%d, %d) repeats an earlier merge", i, m.Left, m.Right)
		}
		b.rank[m] = int32(i)
		b.bytes[id] = append(append([]byte(nil), b.bytes[m.Left]...), b.bytes[m.Right]...)
	}
	return b, nil
}

// VocabSize returns the number of token ids, 256 plus the merges.
func (b *BPE) VocabSize() int { return len(b.bytes) }

// Merges returns a copy of the merges in rank order.
func (b *BPE) Merges() []Pair { return append([]Pair(nil), b.merges...) }

// TokenBytes returns the bytes of token id (nil when out of range). The
// slice must not be modified.
func (b *BPE) TokenBytes(id int32) []byte {
	if id < 0 || int(id) >= len(b.bytes) {
		return nil
	}
	return b.bytes[id]
}

// Encode returns the tokens of text; every byte, NUL included, is kept.
func (b *BPE) Encode(text string) []int32 { return b.AppendEncode(nil, text) }

// AppendEncode appends the tokens of text to dst.
func (b *BPE) AppendEncode(dst []int32, text string) []int32 {
	return b.appendEncode(dst, text, nil)
}

// AppendDocument appends EndOfText and the tokens of doc, NUL bytes
// dropped, to dst.
func (b *BPE) AppendDocument(dst []int32, doc string) []int32 {
	return b.AppendEncode(append(dst, EndOfText), strings.ReplaceAll(doc, "\x00", ""))
}

// Encoder returns a function like AppendDocument that caches the tokens of
// each piece it has seen, for encoding a large text. It is not safe for
// concurrent use.
func (b *BPE) Encoder() func(dst []int32, doc string) []int32 {
	cache := make(map[string][]int32)
	return func(dst []int32, doc string) []int32 {
		return b.appendEncode(append(dst, EndOfText), strings.ReplaceAll(doc, "\x00", ""), cache)
	}
}

// appendEncode appends the tokens of text to dst, each piece's taken from
// cache when it holds them and, when cache is set, kept there after they
// are merged.
func (b *BPE) appendEncode(dst []int32, text string, cache map[string][]int32) []int32 {
	for p := 0; p < len(text); {
		q := nextPiece(text, p)
		piece := text[p:q]
		if toks, ok := cache[piece]; ok {
			dst = append(dst, toks...)
		} else {
			n := len(dst)
			dst = b.mergePiece(dst, piece)
			if cache != nil {
				cache[strings.Clone(piece)] = slices.Clone(dst[n:])
			}
		}
		p = q
	}
	return dst
}

// mergePiece appends the tokens of one piece: its bytes, then repeatedly
// every occurrence (left to right) of the adjacent pair of lowest rank.
// The lowest rank present grows with every round (a pair holding the token
// of merge r has a rank above r), so a piece of n bytes costs at most
// O(n min(n, merges)).
func (b *BPE) mergePiece(dst []int32, piece string) []int32 {
	start := len(dst)
	for i := 0; i < len(piece); i++ {
		dst = append(dst, int32(piece[i]))
	}
	w := dst[start:]
	for len(w) > 1 {
		best, at := int32(-1), -1
		for i := 0; i+1 < len(w); i++ {
			if r, ok := b.rank[Pair{w[i], w[i+1]}]; ok && (best < 0 || r < best) {
				best, at = r, i
			}
		}
		if at < 0 {
			break
		}
		w = mergeAll(w, b.merges[best], int32(ByteTokens)+best, at)
	}
	return dst[:start+len(w)]
}

// mergeAll replaces, in place, every occurrence of p at or after index from
// (the first one) by id, left to right, and returns the shortened slice.
func mergeAll(w []int32, p Pair, id int32, from int) []int32 {
	j := from
	for i := from; i < len(w); {
		if i+1 < len(w) && w[i] == p.Left && w[i+1] == p.Right {
			w[j] = id
			i += 2
		} else {
			w[j] = w[i]
			i++
		}
		j++
	}
	return w[:j]
}

// Decode returns the bytes of tokens; a token outside [0, VocabSize()) is
// an error. Decode(Encode(s)) == s for every s.
func (b *BPE) Decode(tokens []int32) ([]byte, error) {
	out := make([]byte, 0, 2*len(tokens))
	for i, t := range tokens {
		if t < 0 || int(t) >= len(b.bytes) {
			return nil, fmt.Errorf("smallbpe: token %d at %d outside [0, %d)", t, i, len(b.bytes))
		}
		out = append(out, b.bytes[t]...)
	}
	return out, nil
}

// fileHeader is the first line of a merges file.
const fileHeader = "smallbpe merges v1"

// Save writes the merges as text: a header line "smallbpe merges v1 vocab
// N", then one line "left right" (token ids) per merge in rank order.
func (b *BPE) Save(path string) error {
	var s strings.Builder
	fmt.Fprintf(&s, "%s vocab %d\n", fileHeader, b.VocabSize())
	for _, m := range b.merges {
		fmt.Fprintf(&s, "%d %d\n", m.Left, m.Right)
	}
	if err := atomicfile.WriteFile(path, []byte(s.String())); err != nil {
		return fmt.Errorf("smallbpe: %w", err)
	}
	return nil
}

// Load reads a merges file written by Save.
func Load(path string) (*BPE, error) {
	fh, err := regfile.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	b, err := Read(fh)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return b, nil
}

// Read reads merges in Save's format from r.
func Read(r io.Reader) (*BPE, error) {
	sc := bufio.NewScanner(r)
	if !sc.Scan() {
		if err := sc.Err(); err != nil {
			return nil, err
		}
		return nil, errors.New("smallbpe: empty merges file")
	}
	head, vs, ok := strings.Cut(sc.Text(), " vocab ")
	vocab, err := strconv.Atoi(vs)
	if !ok || head != fileHeader || err != nil || vocab < ByteTokens || vocab > MaxVocab {
		return nil, fmt.Errorf("smallbpe: header %q: want %q followed by \" vocab N\", %d <= N <= %d", sc.Text(), fileHeader, ByteTokens, MaxVocab)
	}
	merges := make([]Pair, 0, vocab-ByteTokens)
	for line := 2; sc.Scan(); line++ {
		ls, rs, ok := strings.Cut(sc.Text(), " ")
		l, err1 := strconv.ParseInt(ls, 10, 32)
		r, err2 := strconv.ParseInt(rs, 10, 32)
		if !ok || err1 != nil || err2 != nil {
			return nil, fmt.Errorf("smallbpe: line %d %q: want two token ids", line, sc.Text())
		}
		merges = append(merges, Pair{int32(l), int32(r)})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(merges) != vocab-ByteTokens {
		return nil, fmt.Errorf("smallbpe: %d merges for vocab %d: want %d", len(merges), vocab, vocab-ByteTokens)
	}
	return New(merges)
}

// nextPiece returns the end of the piece starting at s[p], p < len(s):
// GPT-2's pre-tokenizer without the contractions (tokenizer.NextPiece).
func nextPiece(s string, p int) int { return tokenizer.NextPiece(s, p, false) }
