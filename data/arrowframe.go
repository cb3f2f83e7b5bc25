package data

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// The framing of Arrow IPC data, checked before arrow-go reads it
// (arrowcheck.go says why): a stream's messages, a file's magic, footer
// and blocks, and each message's body and compressed buffers inside the
// file.

// checkBodyPrefixes checks each compressed buffer's declared uncompressed
// length (the int64 its bytes start with, -1 for a buffer left
// uncompressed) against maxCompressionRatio; body is the file offset of
// the message body.
func checkBodyPrefixes(r io.ReaderAt, body int64, bufs []arrowBuffer) error {
	var p [8]byte
	for i, b := range bufs {
		if _, err := r.ReadAt(p[:], body+b.offset); err != nil {
			return fmt.Errorf("compressed buffer %d: reading its uncompressed length: %w", i, err)
		}
		n := int64(binary.LittleEndian.Uint64(p[:]))
		if n == -1 {
			continue
		}
		if limit := maxCompressionRatio*(b.length-8) + compressionSlack; n < 0 || n > limit {
			return fmt.Errorf("compressed buffer %d: declared uncompressed length %d is beyond %d (%d times its %d compressed bytes, plus %d)", i, n, limit, maxCompressionRatio, b.length-8, compressionSlack)
		}
	}
	return nil
}

// readMessageAt checks the message whose metadata (without its prefix)
// is the length bytes at pos (against schema, as checkMessage), and whose body follows it and must end by
// end. It returns the message and the offset where its body ends.
func readMessageAt(r io.ReaderAt, pos, length, end int64, schema *arrowSchema) (arrowMessage, int64, error) {
	if length < 4 {
		return arrowMessage{}, 0, fmt.Errorf("metadata length %d is under 4 bytes", length)
	}
	if length > end-pos {
		return arrowMessage{}, 0, fmt.Errorf("metadata of %d bytes at %d runs past the end at %d", length, pos, end)
	}
	meta := make([]byte, length)
	if _, err := r.ReadAt(meta, pos); err != nil {
		return arrowMessage{}, 0, fmt.Errorf("reading metadata: %w", err)
	}
	msg, err := checkMessage(meta, schema)
	if err != nil {
		return msg, 0, err
	}
	body := pos + length
	if msg.bodyLength > end-body {
		return msg, 0, fmt.Errorf("body of %d bytes at %d runs past the end at %d", msg.bodyLength, body, end)
	}
	if err := checkBodyPrefixes(r, body, msg.compressed); err != nil {
		return msg, 0, err
	}
	return msg, body + msg.bodyLength, nil
}

// checkArrowStream walks the stream of messages in [pos, end) up to its
// end-of-stream marker or end, checking each (the batches against the
// stream's first schema).
func checkArrowStream(r io.ReaderAt, pos, end int64) error {
	var p [4]byte
	var schema *arrowSchema
	for i := 0; ; i++ {
		if pos == end {
			return nil // arrow-go reads a stream without its marker too
		}
		// The length, or a continuation marker and then the length.
		length := uint32(0xFFFFFFFF)
		for k := 0; k < 2 && length == 0xFFFFFFFF; k++ {
			if end-pos < 4 {
				return fmt.Errorf("message %d: %d bytes left at %d hold no message length", i, end-pos, pos)
			}
			if _, err := r.ReadAt(p[:], pos); err != nil {
				return fmt.Errorf("message %d: %w", i, err)
			}
			pos += 4
			length = binary.LittleEndian.Uint32(p[:])
		}
		if length == 0 {
			return nil // end of stream
		}
		msg, next, err := readMessageAt(r, pos, int64(int32(length)), end, schema)
		if err != nil {
			return fmt.Errorf("message %d: %w", i, err)
		}
		if schema == nil && msg.schema != nil {
			schema = msg.schema // arrow-go reads the first
		}
		pos = next
	}
}

// checkArrowFile checks a file in the random-access format of size bytes:
// the magic at both ends, the footer, the stream between and each block
// the footer lists.
func checkArrowFile(r io.ReaderAt, size int64) error {
	const magic = "ARROW1"
	if size < 8+4+6 {
		return fmt.Errorf("%d bytes are too few for an Arrow file's magic, footer and footer length", size)
	}
	var tail [10]byte
	if _, err := r.ReadAt(tail[:], size-10); err != nil {
		return err
	}
	if string(tail[4:]) != magic {
		return fmt.Errorf("the file does not end with the magic %q", magic)
	}
	footerLen := int64(int32(binary.LittleEndian.Uint32(tail[:])))
	footerAt := size - 10 - footerLen
	if footerLen <= 0 || footerAt < 8 {
		return fmt.Errorf("footer length %d does not fit between the magic bytes of the %d-byte file", footerLen, size)
	}
	footer := make([]byte, footerLen)
	if _, err := r.ReadAt(footer, footerAt); err != nil {
		return err
	}
	f := &fbuf{b: footer, what: "footer"}
	ft, err := f.root("footer")
	if err != nil {
		return fmt.Errorf("footer: %w", err)
	}
	if err := ft.scalars("footer version", 4, 2); err != nil {
		return fmt.Errorf("footer: %w", err)
	}
	st, ok, err := ft.sub(6, "schema", 1)
	if err == nil && !ok {
		err = errors.New("no schema")
	}
	if err != nil {
		return fmt.Errorf("footer: %w", err)
	}
	schema, err := checkSchema(st, 1)
	if err != nil {
		return fmt.Errorf("footer: schema: %w", err)
	}
	if err := checkKeyValues(ft, 12, 1); err != nil {
		return fmt.Errorf("footer: %w", err)
	}
	if err := checkArrowStream(r, 8, footerAt); err != nil {
		return err
	}
	for _, blocks := range []struct {
		slot int64
		name string
	}{{8, "dictionary block"}, {10, "record batch block"}} {
		start, n, err := ft.vector(blocks.slot, 24, blocks.name+"s")
		if err != nil {
			return fmt.Errorf("footer: %w", err)
		}
		for i := int64(0); i < n; i++ {
			if err := checkBlock(r, footer[start+24*i:], footerAt, schema); err != nil {
				return fmt.Errorf("footer: %s %d: %w", blocks.name, i, err)
			}
		}
	}
	return nil
}

// checkBlock checks a footer Block (offset int64, metaDataLength int32,
// padding, bodyLength int64) and the message it points to, which must end
// by end (the footer's offset), against the footer's schema, as arrow-go
// reads it: the metadata with
// its prefix, then a body of the block's body length.
func checkBlock(r io.ReaderAt, b []byte, end int64, schema *arrowSchema) error {
	off := int64(binary.LittleEndian.Uint64(b))
	meta := int64(int32(binary.LittleEndian.Uint32(b[8:])))
	body := int64(binary.LittleEndian.Uint64(b[16:]))
	if off < 8 || meta < 8 || body < 0 || off > end || meta > end-off || body > end-off-meta {
		return fmt.Errorf("%d bytes of metadata and %d of body at %d run outside the file's messages, which end at %d", meta, body, off, end)
	}
	var p [8]byte
	if _, err := r.ReadAt(p[:], off); err != nil {
		return err
	}
	prefix := int64(4)
	if binary.LittleEndian.Uint32(p[:]) == 0xFFFFFFFF {
		prefix = 8
	}
	length := int64(binary.LittleEndian.Uint32(p[prefix-4:]))
	if length != meta-prefix {
		return fmt.Errorf("metadata length %d at %d does not match the block's %d bytes less a %d-byte prefix", length, off, meta, prefix)
	}
	msg, _, err := readMessageAt(r, off+prefix, length, off+meta+body, schema)
	if err != nil {
		return err
	}
	if msg.bodyLength != body {
		return fmt.Errorf("message body length %d does not match the block's %d", msg.bodyLength, body)
	}
	return nil
}
