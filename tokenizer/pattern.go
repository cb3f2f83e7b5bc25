package tokenizer

import (
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

// The pre-tokenizer of a tokenizer.json's Split pattern (Llama 3, Qwen2,
// SmolLM), beside GPT-2's hand-written one (pretokenize.go).

// whiteSpace is Unicode's White_Space, which \s means to tiktoken (Rust's
// regex) and unicode.IsSpace, written for Go's regexp, whose \s is ASCII.
const whiteSpace = `\t\n\v\f\r \x{85}\x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}`

// regexPre splits text with a tokenizer.json pattern as tiktoken's
// find_iter does. Go's regexp picks among alternatives as a backtracking
// engine does but has no look-ahead; the one the patterns use,
// `\s+(?!\S)|\s+` (white space not followed by a non-space, else any), is
// compiled as `\s+` and cut back by one character when followed by text.
type regexPre struct {
	pattern string // as tokenizer.json gives it
	re      *regexp.Regexp
	look    int // the submatch of the look-ahead alternative, -1 for none
}

// compilePattern translates pattern for Go's regexp: each top-level
// alternative becomes a capturing group, \s and \S Unicode's white space.
func compilePattern(pattern string) (*regexPre, error) {
	alts, err := splitAlternatives(pattern)
	if err != nil {
		return nil, err
	}
	r := &regexPre{pattern: pattern, look: -1}
	var sb strings.Builder
	for i, a := range alts {
		if a == `\s+(?!\S)` {
			if i+1 >= len(alts) || alts[i+1] != `\s+` {
				return nil, fmt.Errorf("pattern %q: \\s+(?!\\S) must be followed by the alternative \\s+", pattern)
			}
			r.look, a = i+1, `\s+`
		}
		if strings.Contains(a, "(?=") || strings.Contains(a, "(?!") || strings.Contains(a, "(?<") {
			return nil, fmt.Errorf("pattern %q: look-around in %q is not supported", pattern, a)
		}
		g, err := unicodeSpaces(a)
		if err != nil {
			return nil, fmt.Errorf("pattern %q: %w", pattern, err)
		}
		if i > 0 {
			sb.WriteByte('|')
		}
		sb.WriteString("(" + g + ")")
	}
	if r.re, err = regexp.Compile(sb.String()); err != nil {
		return nil, fmt.Errorf("pattern %q: %w", pattern, err)
	}
	return r, nil
}

// splitAlternatives splits pattern at its top-level |.
func splitAlternatives(pattern string) ([]string, error) {
	var alts []string
	depth, class, start := 0, false, 0
	for i := 0; i < len(pattern); i++ {
		switch c := pattern[i]; {
		case c == '\\':
			i++
		case class:
			class = c != ']'
		case c == '[':
			class = true
			if i+1 < len(pattern) && pattern[i+1] == '^' {
				i++
			}
			if i+1 < len(pattern) && pattern[i+1] == ']' {
				i++ // a literal ] first in the class
			}
		case c == '(':
			depth++
		case c == ')':
			depth--
		case c == '|' && depth == 0:
			alts = append(alts, pattern[start:i])
			start = i + 1
		}
	}
	if depth != 0 || class {
		return nil, fmt.Errorf("pattern %q: unbalanced ( or [", pattern)
	}
	return append(alts, pattern[start:]), nil
}

// unicodeSpaces rewrites \s (and \S outside a class) as Unicode's white
// space.
func unicodeSpaces(a string) (string, error) {
	var sb strings.Builder
	class := false
	for i := 0; i < len(a); i++ {
		c := a[i]
		switch {
		case c == '\\' && i+1 < len(a):
			switch a[i+1] {
			case 's':
				if class {
					sb.WriteString(whiteSpace)
				} else {
					sb.WriteString("[" + whiteSpace + "]")
				}
			case 'S':
				if class {
					return "", fmt.Errorf("\\S inside a character class is not supported")
				}
				sb.WriteString("[^" + whiteSpace + "]")
			default:
				sb.WriteString(a[i : i+2])
			}
			i++
			continue
		case c == '[' && !class:
			class = true
		case c == ']' && class:
			class = false
		}
		sb.WriteByte(c)
	}
	return sb.String(), nil
}

// appendPieces appends the tokens of text's pieces to dst: each match in
// turn, text between matches dropped (as find_iter does; the patterns
// tokenizers use match everything).
func (r *regexPre) appendPieces(v *vocab, m *merger, dst []int32, text string) []int32 {
	for p := 0; p < len(text); {
		loc := r.re.FindStringSubmatchIndex(text[p:])
		if loc == nil {
			break
		}
		s, e := p+loc[0], p+loc[1]
		if r.look >= 0 && loc[2*r.look] >= 0 && e < len(text) {
			// \s+(?!\S): give the last space back to the text that
			// follows, unless it is the only one (then \s+ takes it).
			_, w := utf8.DecodeLastRuneInString(text[s:e])
			if e-w > s {
				e -= w
			}
		}
		if e == s { // an empty match: step over one character
			_, w := utf8.DecodeRuneInString(text[s:])
			p = s + w
			continue
		}
		dst = v.appendPiece(m, dst, text[s:e])
		p = e
	}
	return dst
}
