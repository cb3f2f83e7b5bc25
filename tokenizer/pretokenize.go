package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// Character classes of GPT-2's pre-tokenizer pattern
//
//	's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//
// with \s as in unicode.IsSpace (Unicode White_Space, the same set as Rust's
// regex and tiktoken), \p{L} as unicode.IsLetter and \p{N} as unicode.IsNumber.
const (
	classOther uint8 = iota
	classLetter
	classNumber
	classSpace
)

var asciiClass = func() (t [utf8.RuneSelf]uint8) {
	for r := rune(0); r < utf8.RuneSelf; r++ {
		t[r] = classOfSlow(r)
	}
	return t
}()

func classOfSlow(r rune) uint8 {
	switch {
	case unicode.IsLetter(r):
		return classLetter
	case unicode.IsNumber(r):
		return classNumber
	case unicode.IsSpace(r):
		return classSpace
	}
	return classOther
}

// classAt returns the class and width of the rune starting at s[i]. The text
// must be valid UTF-8 (Encode replaces invalid bytes first).
func classAt(s string, i int) (uint8, int) {
	if c := s[i]; c < utf8.RuneSelf {
		return asciiClass[c], 1
	}
	r, w := utf8.DecodeRuneInString(s[i:])
	return classOfSlow(r), w
}

// scanClass returns the end of the run of class c starting at i.
func scanClass(s string, i int, c uint8) int {
	for i < len(s) {
		if b := s[i]; b < utf8.RuneSelf {
			if asciiClass[b] != c {
				return i
			}
			i++
			continue
		}
		cc, w := classAt(s, i)
		if cc != c {
			return i
		}
		i += w
	}
	return i
}

// nextPiece returns the end of the pre-tokenizer piece that starts at s[p],
// p < len(s). It implements the pattern above by hand: each alternative is
// tried in order at p, and the only backtracking the regex would need
// (\s+(?!\S) giving back one character) is resolved by looking at the end of
// the whitespace run, so the cost is linear in the piece length.
func nextPiece(s string, p int) int {
	b := s[p]
	if b == '\'' && p+1 < len(s) {
		switch s[p+1] {
		case 's', 't', 'm', 'd':
			return p + 2
		case 'r', 'v':
			if p+2 < len(s) && s[p+2] == 'e' {
				return p + 3
			}
		case 'l':
			if p+2 < len(s) && s[p+2] == 'l' {
				return p + 3
			}
		}
	}
	if b == ' ' && p+1 < len(s) {
		// " ?X+" with the optional space taken.
		if c1, w1 := classAt(s, p+1); c1 != classSpace {
			return scanClass(s, p+1+w1, c1)
		}
	}
	c0, w0 := classAt(s, p)
	if c0 != classSpace {
		return scanClass(s, p+w0, c0)
	}
	// Whitespace: \s+(?!\S) then \s+.
	e := scanClass(s, p+w0, classSpace)
	if e == len(s) {
		return e
	}
	// Give back the last whitespace character, if that leaves any.
	q := e - 1
	for q > p && !utf8.RuneStart(s[q]) {
		q--
	}
	if q > p {
		return q
	}
	return e
}

// SafeCut returns the largest index q, 0 < q < len(s), such that encoding
// s[:q] and s[q:] separately gives the same tokens as encoding s, or 0 if it
// finds none. It cuts just before a '\n', '\r' or '\t' that is followed by a
// non-whitespace character: in the whole text that character is a piece of
// its own (the whitespace before it, if any, is one piece, just as when it
// ends a text), and the pieces after it do not depend on the text before it.
func SafeCut(s string) int { return safeCut(s, 1, len(s)) }

// isCut reports whether q is a safe cut of s.
func isCut(s string, q int) bool {
	if q <= 0 || q+1 >= len(s) {
		return false
	}
	switch s[q] {
	case '\n', '\r', '\t':
		c, _ := classAt(s, q+1)
		return c != classSpace
	}
	return false
}

// safeCut returns the largest safe cut q with from <= q < to, or 0.
func safeCut(s string, from, to int) int {
	for q := to - 1; q >= from && q > 0; q-- {
		if isCut(s, q) {
			return q
		}
	}
	return 0
}

// firstSafeCut returns the smallest safe cut q with from <= q < len(s), or 0.
func firstSafeCut(s string, from int) int {
	for q := max(from, 1); q < len(s); q++ {
		if isCut(s, q) {
			return q
		}
	}
	return 0
}
