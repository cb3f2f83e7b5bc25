package data

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/hilbert-ml/hilbert/tokenizer"

	"github.com/hilbert-ml/hilbert/internal/regfile"
)

// textChunk is how much text AddTextFile reads before encoding it (a
// variable for tests).
var textChunk = 8 << 20

// countingReader reports bytes read from the file to Progress.
type countingReader struct {
	r        io.Reader
	progress func(int64)
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if c.progress != nil && n > 0 {
		c.progress(int64(n))
	}
	return n, err
}

// maxBadBytes is how many NUL or invalid UTF-8 bytes the first n bytes of
// a text file may hold: a few stray bytes pass, a binary file does not.
func maxBadBytes(n int64) int64 { return 8 + n/1000 }

// magics are the starts of compressed files AddTextFile cannot read.
var magics = []struct {
	prefix []byte
	name   string
}{
	{[]byte{0x28, 0xb5, 0x2f, 0xfd}, "zstd"},
	{[]byte{0xfd, '7', 'z', 'X', 'Z', 0}, "xz"},
	{[]byte{'P', 'K', 3, 4}, "zip"},
}

// isBzip2 reports whether head (10 bytes or fewer) starts a bzip2 stream:
// "BZh", the block size '1'..'9', then a block's or the end's magic.
func isBzip2(head []byte) bool {
	if len(head) < 10 || string(head[:3]) != "BZh" || head[3] < '1' || head[3] > '9' {
		return false
	}
	m := string(head[4:10])
	return m == "\x31\x41\x59\x26\x53\x59" || m == "\x17\x72\x45\x38\x50\x90"
}

// OpenText opens a text file for reading: gzip-compressed files (told by
// their first two bytes, 1f 8b, whatever their name) are decompressed;
// zstd, xz, zip and bzip2 files are refused by name. progress, if not nil,
// is called with the bytes read from the file. Close the returned reader.
func OpenText(path string, progress func(int64)) (io.ReadCloser, error) {
	f, err := regfile.Open(path)
	if err != nil {
		return nil, fmt.Errorf("data: text: %w", err)
	}
	br := bufio.NewReaderSize(&countingReader{f, progress}, 1<<20)
	head, _ := br.Peek(10)
	if bytes.HasPrefix(head, []byte{0x1f, 0x8b}) {
		z, err := gzip.NewReader(br)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("data: text %s: gzip: %w", path, err)
		}
		return &textReader{Reader: &gzipReader{z: z}, close: func() error { return errors.Join(z.Close(), f.Close()) }}, nil
	}
	for _, m := range magics {
		if bytes.HasPrefix(head, m.prefix) {
			f.Close()
			return nil, fmt.Errorf("data: text %s: %s-compressed; decompress it first (only gzip is read)", path, m.name)
		}
	}
	if isBzip2(head) {
		f.Close()
		return nil, fmt.Errorf("data: text %s: bzip2-compressed; decompress it first (only gzip is read)", path)
	}
	return &textReader{Reader: br, close: f.Close}, nil
}

// ReadText reads a whole text file as OpenText opens it (plain or gzip; a
// truncated or damaged gzip stream is an error naming the file).
func ReadText(path string) (string, error) {
	r, err := OpenText(path, nil)
	if err != nil {
		return "", err
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		return "", fmt.Errorf("data: text %s: %w", path, err)
	}
	return string(b), nil
}

// gzipReader says what went wrong when a gzip stream fails: a stream cut
// short, even by only its 8-byte trailer, reads as io.ErrUnexpectedEOF (not
// as the end), and a damaged one as a checksum or flate error.
type gzipReader struct {
	z *gzip.Reader
	n int64 // decompressed bytes read
}

func (g *gzipReader) Read(p []byte) (int, error) {
	n, err := g.z.Read(p)
	g.n += int64(n)
	switch {
	case err == nil || err == io.EOF:
		return n, err
	case errors.Is(err, io.ErrUnexpectedEOF):
		return n, fmt.Errorf("gzip stream truncated after %d bytes of text (the file is incomplete; %w)", g.n, err)
	}
	return n, fmt.Errorf("gzip stream damaged after %d bytes of text: %w", g.n, err)
}

type textReader struct {
	io.Reader
	close func() error
}

func (r *textReader) Close() error { return r.close() }

// textChecker counts NUL and invalid UTF-8 bytes across the chunks of one
// file and refuses the file when they pass maxBadBytes.
type textChecker struct {
	path      string
	n, bad    int64
	firstBad  int64
	firstByte byte
}

func (c *textChecker) check(b []byte) error {
	for i := 0; i < len(b); {
		r, size := rune(b[i]), 1
		if r >= utf8.RuneSelf {
			r, size = utf8.DecodeRune(b[i:])
		}
		if r == 0 || r == utf8.RuneError && size == 1 {
			if c.bad == 0 {
				c.firstBad, c.firstByte = c.n+int64(i), b[i]
			}
			c.bad++
		}
		i += size
	}
	c.n += int64(len(b))
	if c.bad > maxBadBytes(c.n) {
		return fmt.Errorf("data: text %s: not UTF-8 text: %d NUL or invalid UTF-8 bytes in its first %d bytes (the first, 0x%02x, at byte %d); is it a binary file?",
			c.path, c.bad, c.n, c.firstByte, c.firstBad)
	}
	return nil
}

// incompleteTail returns how many bytes at the end of b must wait for the
// next chunk: a '\r' that may start "\r\n", or the start of a UTF-8
// sequence cut by the chunk's end.
func incompleteTail(b []byte) int {
	if n := len(b); n > 0 && b[n-1] == '\r' {
		return 1
	}
	for k := 1; k <= min(3, len(b)); k++ {
		c := b[len(b)-k]
		if c < utf8.RuneSelf {
			return 0
		}
		if utf8.RuneStart(c) {
			if utf8.FullRune(b[len(b)-k:]) {
				return 0
			}
			return k
		}
	}
	return 0
}

// readChunk fills b from r as io.ReadFull does, but only io.EOF is the
// end of the input (eof): io.ReadFull also reports a short last chunk as
// io.ErrUnexpectedEOF, the error a truncated gzip stream gives. Other
// errors are returned as they are.
func readChunk(r io.Reader, b []byte) (n int, eof bool, err error) {
	for n < len(b) {
		m, err := r.Read(b[n:])
		n += m
		if err == io.EOF {
			return n, true, nil
		}
		if err != nil {
			return n, false, err
		}
	}
	return n, false, nil
}

// isBlank reports whether b is only white space.
func isBlank(b []byte) bool { return len(bytes.TrimSpace(b)) == 0 }

// AddTextFile ingests a text file (see OpenText: plain or gzip UTF-8; a
// file with more than a few NUL or invalid UTF-8 bytes is refused as
// binary). Line ends "\r\n" become "\n", and the text is cut into one
// document per paragraph: at every blank line "\n\n", as strings.Split
// cuts, dropping paragraphs of white space only; each document is
// preceded by EndOfText. train -text and prepare both read text this way.
//
// It streams: complete paragraphs are encoded in parallel batches, and a
// paragraph longer than a chunk is encoded in pieces cut where the
// tokenizer's pieces cannot span (tokenizer.SafeCut), so the tokens equal
// those of each whole paragraph.
func (b *Builder) AddTextFile(ctx context.Context, path string) error {
	r, err := OpenText(path, b.cfg.Progress)
	if err != nil {
		return err
	}
	defer r.Close()
	chk := &textChecker{path: path}
	s := &textStream{b: b}
	raw := make([]byte, textChunk)
	var carry []byte // raw bytes held back: an incomplete UTF-8 or "\r\n" tail
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		copy(raw, carry)
		n, eof, rerr := readChunk(r, raw[len(carry):])
		chunk := raw[:len(carry)+n]
		if rerr != nil {
			return fmt.Errorf("data: text %s: %w", path, rerr)
		}
		keep := 0
		if !eof {
			keep = incompleteTail(chunk)
		}
		body := chunk[:len(chunk)-keep]
		if err := chk.check(body); err != nil {
			return err
		}
		s.pending = append(s.pending, bytes.ReplaceAll(body, []byte("\r\n"), []byte("\n"))...)
		carry = append(carry[:0], chunk[len(chunk)-keep:]...)
		if err := s.paragraphs(); err != nil {
			return err
		}
		if eof {
			return s.finish()
		}
		if err := s.flush(); err != nil {
			return err
		}
		if err := s.cutLong(); err != nil {
			return err
		}
	}
}

// textStream is AddTextFile's state from one chunk to the next.
type textStream struct {
	b       *Builder
	pending []byte   // normalized text not yet encoded
	paras   []string // complete paragraphs not yet written
	// inDoc: a document begun by a partial paragraph is open; toVal: it
	// goes to validation.
	inDoc, toVal bool
	// held are the tokens of the white space that begins a paragraph
	// longer than a chunk, heldBytes its length: written if the paragraph
	// turns out not to be blank, dropped with it if it is.
	held      []int32
	heldBytes int64
}

// begin begins the document of a partial paragraph, after the complete
// paragraphs collected so far, writing what is held.
func (s *textStream) begin() error {
	err := s.flush()
	if err != nil {
		return err
	}
	if s.toVal, err = s.b.beginDocument(); err != nil {
		return err
	}
	s.inDoc = true
	s.b.sum.TextBytes += s.heldBytes
	err = s.b.emit(s.held, s.toVal)
	s.held, s.heldBytes = s.held[:0], 0
	return err
}

// flush writes the complete paragraphs collected so far.
func (s *textStream) flush() error {
	err := s.b.flushParagraphs(s.paras)
	s.paras = s.paras[:0]
	return err
}

// paragraphs takes the complete paragraphs off pending: a paragraph that
// ends one begun in an earlier chunk closes its document, the others are
// collected for flush.
func (s *textStream) paragraphs() error {
	for {
		i := bytes.Index(s.pending, []byte("\n\n"))
		if i < 0 {
			return nil
		}
		para := s.pending[:i]
		s.pending = s.pending[i+2:]
		if err := s.paragraph(para); err != nil {
			return err
		}
	}
}

// paragraph takes one whole paragraph: it ends the open document or the
// held blank start, or it is collected for the next batch.
func (s *textStream) paragraph(para []byte) error {
	if s.heldBytes > 0 {
		// A paragraph that began with a long blank part.
		if isBlank(para) {
			s.held, s.heldBytes = s.held[:0], 0
			return nil
		}
		if err := s.begin(); err != nil {
			return err
		}
	}
	if s.inDoc {
		// The end of a paragraph begun in an earlier chunk.
		if err := s.flush(); err != nil {
			return err
		}
		s.inDoc = false
		return s.b.emitText(string(para), s.toVal)
	}
	if !isBlank(para) {
		s.paras = append(s.paras, string(para))
	}
	return nil
}

// finish writes what is left at the end of the file: the last paragraph,
// which no blank line ends.
func (s *textStream) finish() error {
	if err := s.paragraph(s.pending); err != nil {
		return err
	}
	return s.flush()
}

// cutLong handles a paragraph longer than a chunk: it encodes what can be
// cut off (there is always a cut but in a single piece, of at most
// tokenizer.MaxPieceRunes characters), so pending stays about a chunk long
// and each byte is copied a bounded number of times. The last byte stays,
// as it may be the first '\n' of "\n\n". A blank start is held until the
// paragraph shows whether it is blank.
func (s *textStream) cutLong() error {
	if len(s.pending) < textChunk {
		return nil
	}
	text := string(s.pending[:len(s.pending)-1])
	cut := tokenizer.SafeCut(text)
	if cut == 0 {
		return nil
	}
	switch {
	case s.inDoc:
	case isBlank(s.pending[:cut]):
		s.held = s.b.tok.AppendEncode(s.held, text[:cut])
		s.heldBytes += int64(cut)
	default:
		if err := s.begin(); err != nil {
			return err
		}
	}
	if s.inDoc {
		if err := s.b.emitText(text[:cut], s.toVal); err != nil {
			return err
		}
	}
	s.pending = append(s.pending[:0], s.pending[cut:]...)
	return nil
}

// flushParagraphs writes complete paragraphs as documents, encoded in
// parallel.
func (b *Builder) flushParagraphs(paras []string) error {
	if len(paras) == 0 {
		return nil
	}
	return b.AddTexts(paras)
}

// emitText encodes part of the current document and writes it.
func (b *Builder) emitText(text string, toVal bool) error {
	b.sum.TextBytes += int64(len(text))
	return b.emit(b.tok.EncodeParallel(text, 512<<10), toVal)
}
