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

// classAt returns the class and width of the rune starting at s[i]; an
// invalid UTF-8 byte is one byte of class other, as U+FFFD is.
func classAt(s string, i int) (uint8, int) {
	if c := s[i]; c < utf8.RuneSelf {
		return asciiClass[c], 1
	}
	r, w := utf8.DecodeRuneInString(s[i:])
	return classOfSlow(r), w
}

// MaxPieceRunes bounds the pieces of the pre-tokenizer: a run of one class
// (letters, digits, other characters or white space) longer than this many
// characters is cut into pieces of MaxPieceRunes characters from its start,
// the last one holding the rest. Without the bound one piece could be the
// whole text (40 MB of "a" took 2.4 GB to merge); with it merging takes at
// most about 40 bytes per byte of a piece, some 10 MB. Text whose runs are
// all shorter, all text but pathological input, is tokenized exactly as
// tiktoken does; longer runs differ from tiktoken's tokens but still decode
// to the text. The bound counts characters, an invalid byte as one (as
// Encode replaces it by U+FFFD), so it cuts the same before and after that
// replacement.
const MaxPieceRunes = 1 << 16

// scanClass returns the end of the run of class c starting at i, scanning
// at most n more characters, and whether the run goes on beyond them.
func scanClass(s string, i int, c uint8, n int) (end int, more bool) {
	for ; i < len(s); n-- {
		var cc uint8
		w := 1
		if b := s[i]; b < utf8.RuneSelf {
			cc = asciiClass[b]
		} else {
			cc, w = classAt(s, i)
		}
		if cc != c {
			return i, false
		}
		if n == 0 {
			return i, true
		}
		i += w
	}
	return i, false
}

// nextPiece is NextPiece with GPT-2's contractions: the pieces this
// package's tokenizer merges.
func nextPiece(s string, p int) int { return NextPiece(s, p, true) }

// NextPiece returns the end of the pre-tokenizer piece that starts at s[p],
// p < len(s), of GPT-2's pattern (see the class constants), or, with
// contractions false, of that pattern without its contractions
// ('s|'t|'re|'ve|'m|'ll|'d): the pieces of tokenizer/smallbpe. It
// implements the pattern by hand: each alternative is tried in order at p,
// and the only backtracking the regex would need (\s+(?!\S) giving back
// one character) is resolved by looking at the end of the whitespace run,
// so the cost is linear in the piece length. A piece holds at most
// MaxPieceRunes characters. An invalid UTF-8 byte is one character of
// class "other" (as U+FFFD, which Encode puts in its place, is). The piece
// depends only on s[p:], and only on what lies within one character past
// its end (past the end of its white space run for white space).
func NextPiece(s string, p int, contractions bool) int {
	b := s[p]
	if contractions && b == '\'' && p+1 < len(s) {
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
			e, _ := scanClass(s, p+1+w1, c1, MaxPieceRunes-2)
			return e
		}
	}
	c0, w0 := classAt(s, p)
	if c0 != classSpace {
		e, _ := scanClass(s, p+w0, c0, MaxPieceRunes-1)
		return e
	}
	// Whitespace: \s+(?!\S) then \s+.
	e, more := scanClass(s, p+w0, classSpace, MaxPieceRunes-1)
	if more || e == len(s) {
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

// SafeCut returns an index q, 0 < q < len(s), such that encoding s[:q]
// and s[q:] separately gives the same tokens as encoding s, or any text
// that s begins, or 0 if s is a single piece. It prefers the largest q
// just before a '\n', '\r' or '\t' that is followed by a non-whitespace
// character: in the whole text that character is a piece of its own (the
// whitespace before it, if any, is one piece, just as when it ends a text),
// and the pieces after it do not depend on the text before it. Where there
// is none (one long line) it returns the start of the last pre-tokenizer
// piece of s, found by walking the pieces (linear in len(s)).
func SafeCut(s string) int {
	if q := safeCut(s, 1, len(s)); q > 0 {
		return q
	}
	return pieceCut(s, len(s)-1)
}

// pieceCut returns the largest end of a piece of s that is at most to, lies
// at least pieceLookahead bytes before the end of s and is not givenBack, or
// 0 if there is none. Such an end is a safe cut of s and of every text that
// s begins: a piece depends only on the text from its start to a few bytes
// past its end (one character, the "re" of "'re", or the character after
// its white space run; see nextPiece), so the pieces before it are those of
// the longer text and, but for a given-back character, of the text cut
// there; those after it do not depend on what precedes it. The cost is
// linear in to.
func pieceCut(s string, to int) int {
	q := 0
	for p := 0; p < len(s); {
		e := nextPiece(s, p)
		if e > to || e+pieceLookahead > len(s) {
			break
		}
		if !givenBack(s, e) {
			q = e
		}
		p = e
	}
	return q
}

// givenBack reports whether e ends a white space character that is
// followed by a non-space one, 0 < e < len(s). Such a character is a piece
// of its own only because \s+(?!\S) gave it back from the run before it,
// and a text cut after it would keep it in that run, so e is no safe cut.
func givenBack(s string, e int) bool {
	r, _ := utf8.DecodeLastRuneInString(s[:e])
	if classOfSlow(r) != classSpace {
		return false
	}
	c, _ := classAt(s, e)
	return c != classSpace
}

// pieceLookahead is how far past a piece's end nextPiece may look: two
// bytes after a "'", or one character (up to 4 bytes) after the end of a
// run that may have given back a white space character of up to 3 bytes.
const pieceLookahead = 8

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
