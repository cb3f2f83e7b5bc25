package view

import (
	"fmt"
	"html"
	"net/http"
	"net/url"
	"path"
	"strings"
)

// Document is the answer of /api/runs/NAME/summary and /api/compare/NAME:
// a Markdown file of the run (or comparison) folder, and its HTML.
type Document struct {
	// Path is the file below the runs folder.
	Path     string `json:"path"`
	Markdown string `json:"markdown"`
	// HTML is the Markdown rendered by RenderMarkdown.
	HTML string `json:"html"`
}

// maxDocumentBytes bounds the Markdown files served.
const maxDocumentBytes = 1 << 20

// document serves dir/file (dir "" is the runs folder) as a Document.
func (s *Server) document(w http.ResponseWriter, dir, file string) {
	p := path.Join(dir, file)
	f, err := s.root.Open(p)
	if err != nil {
		// Missing, or a link out of the runs folder: not there either way.
		httpError(w, http.StatusNotFound, fmt.Errorf("%s: %w", p, rootError(err)))
		return
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil || !info.Mode().IsRegular() {
		httpError(w, http.StatusNotFound, fmt.Errorf("%s is not a file", p))
		return
	}
	if info.Size() > maxDocumentBytes {
		httpError(w, http.StatusNotFound, fmt.Errorf("%s is %d bytes, more than the %d served", p, info.Size(), maxDocumentBytes))
		return
	}
	buf := make([]byte, info.Size())
	n, _ := f.ReadAt(buf, 0)
	md := string(buf[:n])
	writeJSON(w, Document{Path: p, Markdown: md, HTML: RenderMarkdown(md, dir)})
}

// RenderMarkdown renders the Markdown that train writes (headings,
// paragraphs, tables, lists, block quotes, **bold**, `code`, images and
// links) as HTML; every other character is text, escaped. An image whose
// source is a plain relative path to a .png becomes an <img> of
// /files/DIR/SRC (DIR: the file's folder below the runs folder); any other
// image is its alt text, and a link is its text, so the page never loads
// anything from outside the server.
func RenderMarkdown(md, dir string) string {
	r := mdRenderer{dir: dir}
	lines := strings.Split(strings.ReplaceAll(md, "\r\n", "\n"), "\n")
	r.blocks(lines)
	return r.b.String()
}

type mdRenderer struct {
	dir string
	b   strings.Builder
}

func (r *mdRenderer) blocks(lines []string) {
	for i := 0; i < len(lines); {
		line := lines[i]
		t := strings.TrimSpace(line)
		switch {
		case t == "":
			i++
		case strings.HasPrefix(t, "#"):
			level := len(t) - len(strings.TrimLeft(t, "#"))
			if level <= 6 && strings.HasPrefix(t[level:], " ") {
				fmt.Fprintf(&r.b, "<h%d>%s</h%d>\n", level, r.inline(strings.TrimSpace(t[level:])), level)
				i++
				continue
			}
			i = r.paragraph(lines, i)
		case strings.HasPrefix(t, "|"):
			j := i
			for j < len(lines) && strings.HasPrefix(strings.TrimSpace(lines[j]), "|") {
				j++
			}
			r.table(lines[i:j])
			i = j
		case strings.HasPrefix(t, ">"):
			j := i
			var inner []string
			for j < len(lines) && strings.HasPrefix(strings.TrimSpace(lines[j]), ">") {
				inner = append(inner, strings.TrimPrefix(strings.TrimPrefix(strings.TrimSpace(lines[j]), ">"), " "))
				j++
			}
			r.b.WriteString("<blockquote>\n")
			r.blocks(inner)
			r.b.WriteString("</blockquote>\n")
			i = j
		case isListItem(t):
			r.b.WriteString("<ul>\n")
			for i < len(lines) && isListItem(strings.TrimSpace(lines[i])) {
				item := strings.TrimSpace(lines[i])[2:]
				i++
				// Continuation lines: indented, not a new item.
				for i < len(lines) && strings.HasPrefix(lines[i], " ") && strings.TrimSpace(lines[i]) != "" && !isListItem(strings.TrimSpace(lines[i])) {
					item += " " + strings.TrimSpace(lines[i])
					i++
				}
				fmt.Fprintf(&r.b, "<li>%s</li>\n", r.inline(item))
			}
			r.b.WriteString("</ul>\n")
		default:
			i = r.paragraph(lines, i)
		}
	}
}

func isListItem(t string) bool { return strings.HasPrefix(t, "- ") || strings.HasPrefix(t, "* ") }

// paragraph renders the lines from i up to a blank line or another block
// and returns the index after them.
func (r *mdRenderer) paragraph(lines []string, i int) int {
	var text []string
	for ; i < len(lines); i++ {
		t := strings.TrimSpace(lines[i])
		if t == "" || (len(text) > 0 && (strings.HasPrefix(t, "#") || strings.HasPrefix(t, "|") || strings.HasPrefix(t, ">") || isListItem(t))) {
			break
		}
		text = append(text, t)
	}
	fmt.Fprintf(&r.b, "<p>%s</p>\n", r.inline(strings.Join(text, "\n")))
	return i
}

// table renders rows of "| a | b |" cells; a second row of dashes makes
// the first a header.
func (r *mdRenderer) table(rows []string) {
	r.b.WriteString("<table>\n")
	head := len(rows) > 1 && isSeparatorRow(rows[1])
	for k, row := range rows {
		if head && k == 1 {
			continue
		}
		tag := "td"
		if head && k == 0 {
			tag = "th"
		}
		r.b.WriteString("<tr>")
		for _, c := range tableCells(row) {
			fmt.Fprintf(&r.b, "<%s>%s</%s>", tag, r.inline(c), tag)
		}
		r.b.WriteString("</tr>\n")
	}
	r.b.WriteString("</table>\n")
}

func isSeparatorRow(row string) bool {
	cells := tableCells(row)
	for _, c := range cells {
		if strings.Trim(c, "-: ") != "" || !strings.Contains(c, "-") {
			return false
		}
	}
	return len(cells) > 0
}

// tableCells splits "| a | b |" into its trimmed cells (nil for a line
// that is not a table row).
func tableCells(line string) []string {
	t := strings.TrimSpace(line)
	if !strings.HasPrefix(t, "|") {
		return nil
	}
	t = strings.TrimSuffix(strings.TrimPrefix(t, "|"), "|")
	cells := strings.Split(t, "|")
	for i := range cells {
		cells[i] = strings.TrimSpace(cells[i])
	}
	return cells
}

// inline renders code spans, images, links and bold; the rest is escaped
// text.
func (r *mdRenderer) inline(s string) string {
	var b strings.Builder
	for len(s) > 0 {
		switch {
		case s[0] == '`':
			if j := strings.IndexByte(s[1:], '`'); j >= 0 {
				b.WriteString("<code>" + html.EscapeString(s[1:1+j]) + "</code>")
				s = s[j+2:]
				continue
			}
		case strings.HasPrefix(s, "!["):
			if alt, src, rest, ok := linkParts(s[1:]); ok {
				b.WriteString(r.image(alt, src))
				s = rest
				continue
			}
		case s[0] == '[':
			if text, _, rest, ok := linkParts(s); ok {
				b.WriteString(r.inline(text))
				s = rest
				continue
			}
		case strings.HasPrefix(s, "**"):
			if j := strings.Index(s[2:], "**"); j > 0 {
				b.WriteString("<strong>" + r.inline(s[2:2+j]) + "</strong>")
				s = s[j+4:]
				continue
			}
		}
		// One character of text (up to the next special one).
		j := strings.IndexAny(s[1:], "`![*")
		if j < 0 {
			j = len(s) - 1
		}
		b.WriteString(html.EscapeString(s[:1+j]))
		s = s[1+j:]
	}
	return b.String()
}

// linkParts splits "[text](target)rest".
func linkParts(s string) (text, target, rest string, ok bool) {
	end := strings.Index(s, "](")
	if !strings.HasPrefix(s, "[") || end < 0 {
		return "", "", "", false
	}
	close := strings.IndexByte(s[end+2:], ')')
	if close < 0 {
		return "", "", "", false
	}
	return s[1:end], s[end+2 : end+2+close], s[end+3+close:], true
}

// image renders ![alt](src): an <img> of a local .png, else the alt text.
func (r *mdRenderer) image(alt, src string) string {
	p := path.Join(r.dir, src)
	if localName(src, false) != nil || path.Ext(src) != ".png" || localName(p, false) != nil {
		return html.EscapeString(alt)
	}
	var u strings.Builder
	u.WriteString("/files")
	for _, e := range strings.Split(p, "/") {
		u.WriteString("/" + url.PathEscape(e))
	}
	return fmt.Sprintf(`<img src="%s" alt="%s">`, html.EscapeString(u.String()), html.EscapeString(alt))
}
