// Package bytelevel is the smallest tokenizer: one token per byte of the
// UTF-8 text, a vocabulary of 256. Token 0 (the NUL byte, which text does
// not contain) is the end-of-text token that precedes every document, as
// GPT-2's 50256 does; NUL bytes in the input are dropped so that it stays
// unambiguous.
//
// It exists for studies that need a small vocabulary V (the exact
// diameter oracle of optim/geometry/oracle stores one vector per token
// pair); the GPT-2 tokenizer of package tokenizer stays the default
// everywhere else.
package bytelevel

import "fmt"

const (
	// VocabSize is the number of token ids: the 256 byte values.
	VocabSize = 256
	// EndOfText precedes every document (the NUL byte).
	EndOfText int32 = 0
)

// Encode returns the bytes of text as token ids, NUL bytes dropped.
func Encode(text string) []int32 { return AppendEncode(make([]int32, 0, len(text)), text) }

// AppendEncode appends the tokens of text to dst.
func AppendEncode(dst []int32, text string) []int32 {
	for i := 0; i < len(text); i++ {
		if b := text[i]; b != 0 {
			dst = append(dst, int32(b))
		}
	}
	return dst
}

// AppendDocument appends EndOfText and the tokens of doc to dst.
func AppendDocument(dst []int32, doc string) []int32 {
	return AppendEncode(append(dst, EndOfText), doc)
}

// Decode returns the bytes of tokens, EndOfText written as a newline. A
// token outside [0, 256) is an error.
func Decode(tokens []int32) ([]byte, error) {
	out := make([]byte, 0, len(tokens))
	for i, t := range tokens {
		switch {
		case t == EndOfText:
			out = append(out, '\n')
		case t > 0 && t < VocabSize:
			out = append(out, byte(t))
		default:
			return nil, fmt.Errorf("bytelevel: token %d at %d outside [0, %d)", t, i, VocabSize)
		}
	}
	return out, nil
}
