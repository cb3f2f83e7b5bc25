package fineweb

import (
	"bufio"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/hilbert-ml/hilbert/tokenizer"
)

// textChunk is how much text AddTextFile reads before encoding it.
const textChunk = 8 << 20

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

// AddTextFile ingests a UTF-8 text file (gzip if it ends in .gz) as one
// document. It streams: the text is read in chunks cut at points where the
// tokenizer's pieces cannot span (tokenizer.SafeCut), so the tokens equal
// those of the whole text, and each chunk is encoded on all cores.
func (b *Builder) AddTextFile(ctx context.Context, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("fineweb: text: %w", err)
	}
	defer f.Close()
	var r io.Reader = bufio.NewReaderSize(&countingReader{f, b.cfg.Progress}, 1<<20)
	if strings.HasSuffix(path, ".gz") {
		z, err := gzip.NewReader(r)
		if err != nil {
			return fmt.Errorf("fineweb: text %s: %w", path, err)
		}
		defer z.Close()
		r = z
	}
	toVal, err := b.beginDocument()
	if err != nil {
		return err
	}
	buf := make([]byte, 0, textChunk)
	var ids []int32
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)] // no safe cut yet: grow
		}
		n, rerr := io.ReadFull(r, buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		eof := rerr == io.EOF || rerr == io.ErrUnexpectedEOF
		if rerr != nil && !eof {
			return fmt.Errorf("fineweb: text %s: %w", path, rerr)
		}
		text := string(buf)
		cut := len(text)
		if !eof {
			if cut = tokenizer.SafeCut(text); cut == 0 {
				continue
			}
		}
		ids = append(ids[:0], b.tok.EncodeParallel(text[:cut], 512<<10)...)
		b.sum.TextBytes += int64(cut)
		if err := b.emit(ids, toVal); err != nil {
			return err
		}
		if eof {
			return nil
		}
		buf = append(buf[:0], text[cut:]...)
	}
}
