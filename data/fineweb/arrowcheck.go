package fineweb

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// The Arrow IPC checks below run before a file reaches arrow-go, which
// reads an IPC message's flatbuffer without verifying it: it allocates
// from the vector lengths and file offsets it holds (a damaged schema's
// field count became make([]arrow.Field, 4294967295), a fatal
// out-of-memory error that no recover catches). checkArrow walks the
// framing of a stream, or of a file (its footer, the blocks the footer
// lists and the stream they lie in), and checks every flatbuffer table
// that arrow-go reads against Arrow's format/Schema.fbs, Message.fbs and
// File.fbs (the slot numbers are those of arrow-go's generated
// arrow/internal/flatbuf): every offset, vtable, scalar, string and vector
// lies inside its buffer, tables nest at most maxArrowDepth deep and are
// visited at most once per 4 bytes of buffer (so that tables shared by
// many offsets cannot make arrow-go build exponentially many fields), and
// each message's body, each block and each buffer lie inside the file.

const (
	// maxArrowDepth bounds the nesting of tables (a field's children).
	maxArrowDepth = 64
	// maxCompressionRatio and compressionSlack bound the uncompressed
	// length that a compressed (LZ4 frame or ZSTD) buffer may declare:
	// at most maxCompressionRatio times its compressed bytes, plus
	// compressionSlack. arrow-go allocates the declared length before it
	// decompresses, so a damaged prefix would otherwise ask for up to
	// 8 EiB; with the cap, a batch needs at most about 1024 times its
	// body in memory. Real data compresses far less than 1024:1.
	maxCompressionRatio = 1024
	compressionSlack    = 1 << 20
)

// Message header types (Message.fbs's MessageHeader union).
const (
	headerSchema          = 1
	headerDictionaryBatch = 2
	headerRecordBatch     = 3
)

// arrowLayout counts what arrow-go's array loader reads of a record
// batch for a field (or a schema's fields): field nodes, buffers (those
// of metadata version V5; pre-V5 unions and run-end encoded arrays have a
// validity bitmap more, preV5), and the variadic buffer counts of binary
// and string views, each of which adds that many buffers. arrow-go reads
// the nodes and buffers vectors by index without comparing the index to
// the vector's length (the generated flatbuffer accessors do not), so a
// batch holding fewer than its schema needs makes it read the bytes after
// the vector as buffers: a compressed one's garbage offset then gave a
// garbage uncompressed length to allocate (found by FuzzArrow).
type arrowLayout struct {
	nodes, buffers, preV5, views int64
}

func (l *arrowLayout) add(o arrowLayout) {
	l.nodes += o.nodes
	l.buffers += o.buffers
	l.preV5 += o.preV5
	l.views += o.views
}

// arrowSchema is the layout of a schema's fields and of the value type of
// each of its dictionaries, by id.
type arrowSchema struct {
	fields arrowLayout
	dicts  map[int64]arrowLayout
}

// errArrowBuffer is wrapped by every error about a flatbuffer's bounds.
var errArrowBuffer = errors.New("damaged flatbuffer")

// fbuf is one flatbuffer under check: a message's metadata or the footer.
type fbuf struct {
	b      []byte
	what   string // "metadata" or "footer", for errors
	visits int    // tables visited so far
}

// fbTable is a verified table: its position, vtable and inline size.
type fbTable struct {
	f      *fbuf
	pos    int64
	vt     int64
	vtLen  int64
	objLen int64
}

func (f *fbuf) errorf(format string, args ...any) error {
	return fmt.Errorf("%s (%w)", fmt.Sprintf(format, args...), errArrowBuffer)
}

func (f *fbuf) past(what string, at, n int64) error {
	return f.errorf("%s of %d bytes at %d runs past the %d-byte %s", what, n, at, len(f.b), f.what)
}

// root returns the root table, found through the uoffset at byte 0.
func (f *fbuf) root(name string) (fbTable, error) {
	if len(f.b) < 4 {
		return fbTable{}, f.errorf("%s: %d-byte %s holds no root offset", name, len(f.b), f.what)
	}
	return f.table(int64(binary.LittleEndian.Uint32(f.b)), name, 0)
}

// table checks the table at pos: its soffset, its vtable and its inline
// bytes lie inside the buffer, and every field the vtable declares lies
// inside the table.
func (f *fbuf) table(pos int64, name string, depth int) (fbTable, error) {
	if depth > maxArrowDepth {
		return fbTable{}, f.errorf("%s: tables nest more than %d deep", name, maxArrowDepth)
	}
	f.visits++
	if f.visits > len(f.b)/4+1 {
		return fbTable{}, f.errorf("%s: more tables reached (%d) than the %d-byte %s can hold without sharing them", name, f.visits, len(f.b), f.what)
	}
	n := int64(len(f.b))
	if pos < 0 || pos+4 > n {
		return fbTable{}, f.past(name+" table", pos, 4)
	}
	vt := pos - int64(int32(binary.LittleEndian.Uint32(f.b[pos:])))
	if vt < 0 || vt+4 > n {
		return fbTable{}, f.past(name+" vtable", vt, 4)
	}
	vtLen := int64(binary.LittleEndian.Uint16(f.b[vt:]))
	objLen := int64(binary.LittleEndian.Uint16(f.b[vt+2:]))
	if vtLen < 4 || vtLen%2 != 0 {
		return fbTable{}, f.errorf("%s: vtable at %d: size %d is not an even number of at least 4 bytes", name, vt, vtLen)
	}
	if vt+vtLen > n {
		return fbTable{}, f.past(name+" vtable", vt, vtLen)
	}
	if objLen < 4 {
		return fbTable{}, f.errorf("%s: table at %d: inline size %d is under 4 bytes", name, pos, objLen)
	}
	if pos+objLen > n {
		return fbTable{}, f.past(name+" table", pos, objLen)
	}
	t := fbTable{f: f, pos: pos, vt: vt, vtLen: vtLen, objLen: objLen}
	for s := int64(4); s < vtLen; s += 2 {
		if off := int64(binary.LittleEndian.Uint16(f.b[vt+s:])); off != 0 && (off < 4 || off >= objLen) {
			return fbTable{}, f.errorf("%s: field slot %d: offset %d lies outside the table's %d bytes", name, s, off, objLen)
		}
	}
	return t, nil
}

// field returns the offset of slot s (a vtable byte offset, as in the
// generated code) in the table, or 0 where the field is absent.
func (t fbTable) field(s int64) int64 {
	if s+2 > t.vtLen {
		return 0
	}
	return int64(binary.LittleEndian.Uint16(t.f.b[t.vt+s:]))
}

// scalar checks that the size-byte scalar of slot s lies inside the table.
func (t fbTable) scalar(s, size int64, name string) error {
	if off := t.field(s); off != 0 && off+size > t.objLen {
		return t.f.errorf("%s: %d-byte field at %d runs past its %d-byte table", name, size, off, t.objLen)
	}
	return nil
}

// u8 and i64 read a checked scalar (the default where absent).
func (t fbTable) u8(s int64) byte {
	if off := t.field(s); off != 0 {
		return t.f.b[t.pos+off]
	}
	return 0
}

func (t fbTable) i64(s int64) int64 {
	if off := t.field(s); off != 0 {
		return int64(binary.LittleEndian.Uint64(t.f.b[t.pos+off:]))
	}
	return 0
}

// ref follows the uoffset of slot s; ok is false where the field is absent.
func (t fbTable) ref(s int64, name string) (target int64, ok bool, err error) {
	off := t.field(s)
	if off == 0 {
		return 0, false, nil
	}
	if off+4 > t.objLen {
		return 0, false, t.f.errorf("%s: offset field at %d runs past its %d-byte table", name, off, t.objLen)
	}
	at := t.pos + off
	target = at + int64(binary.LittleEndian.Uint32(t.f.b[at:]))
	if target >= int64(len(t.f.b)) {
		return 0, false, t.f.errorf("%s: offset at %d points to %d, past the %d-byte %s", name, at, target, len(t.f.b), t.f.what)
	}
	return target, true, nil
}

// sub checks the table that slot s points to.
func (t fbTable) sub(s int64, name string, depth int) (fbTable, bool, error) {
	target, ok, err := t.ref(s, name)
	if !ok || err != nil {
		return fbTable{}, false, err
	}
	sub, err := t.f.table(target, name, depth)
	return sub, err == nil, err
}

// vector checks the vector of slot s with elements of elem bytes and
// returns the position of its first element and its length.
func (t fbTable) vector(s, elem int64, name string) (start, n int64, err error) {
	target, ok, err := t.ref(s, name)
	if !ok || err != nil {
		return 0, 0, err
	}
	size := int64(len(t.f.b))
	if target+4 > size {
		return 0, 0, t.f.past(name+" length", target, 4)
	}
	n = int64(binary.LittleEndian.Uint32(t.f.b[target:]))
	if target+4+n*elem > size {
		return 0, 0, t.f.errorf("vector of %d %s runs past the %d-byte %s", n, name, size, t.f.what)
	}
	return target + 4, n, nil
}

// str checks the string of slot s.
func (t fbTable) str(s int64, name string) error {
	_, _, err := t.vector(s, 1, name+" bytes")
	return err
}

// tables checks the vector of tables of slot s (named many, each one)
// and calls fn on each.
func (t fbTable) tables(s int64, one, many string, depth int, fn func(i int64, e fbTable) error) error {
	start, n, err := t.vector(s, 4, many)
	if err != nil {
		return err
	}
	for i := int64(0); i < n; i++ {
		at := start + 4*i
		e, err := t.f.table(at+int64(binary.LittleEndian.Uint32(t.f.b[at:])), one, depth)
		if err == nil && fn != nil {
			err = fn(i, e)
		}
		if err != nil {
			return fmt.Errorf("%s %d: %w", one, i, err)
		}
	}
	return nil
}

// scalars checks several scalar slots: pairs of slot and size.
func (t fbTable) scalars(name string, slotSizes ...int64) error {
	for i := 0; i+1 < len(slotSizes); i += 2 {
		if err := t.scalar(slotSizes[i], slotSizes[i+1], name); err != nil {
			return err
		}
	}
	return nil
}

// checkKeyValues checks a custom_metadata vector of KeyValue tables.
func checkKeyValues(t fbTable, s int64, depth int) error {
	return t.tables(s, "custom_metadata key-value", "custom_metadata key-values", depth, func(_ int64, kv fbTable) error {
		if err := kv.str(4, "key"); err != nil {
			return err
		}
		return kv.str(6, "value")
	})
}

// checkSchema checks a Schema table (Schema.fbs) and returns its layout.
func checkSchema(t fbTable, depth int) (*arrowSchema, error) {
	if err := t.scalars("schema endianness", 4, 2); err != nil {
		return nil, err
	}
	s := &arrowSchema{dicts: map[int64]arrowLayout{}}
	if err := t.tables(6, "field", "fields", depth+1, func(_ int64, f fbTable) error {
		l, err := checkField(f, depth+1, s)
		s.fields.add(l)
		return err
	}); err != nil {
		return nil, err
	}
	if err := checkKeyValues(t, 8, depth+1); err != nil {
		return nil, err
	}
	_, _, err := t.vector(10, 8, "features")
	return s, err
}

// typeScalars gives the scalar slots (slot, size pairs) of each Type
// union member that has any; Timestamp's timezone and Union's typeIds are
// checked apart.
var typeScalars = map[byte][]int64{
	2:  {4, 4, 6, 1},       // Int: bitWidth, is_signed
	3:  {4, 2},             // FloatingPoint: precision
	7:  {4, 4, 6, 4, 8, 4}, // Decimal: precision, scale, bitWidth
	8:  {4, 2},             // Date: unit
	9:  {4, 2, 6, 4},       // Time: unit, bitWidth
	10: {4, 2},             // Timestamp: unit
	11: {4, 2},             // Interval: unit
	14: {4, 2},             // Union: mode
	15: {4, 4},             // FixedSizeBinary: byteWidth
	16: {4, 4},             // FixedSizeList: listSize
	17: {4, 1},             // Map: keysSorted
	18: {4, 2},             // Duration: unit
}

// maxArrowType is the largest member of Schema.fbs's Type union
// (LargeListView).
const maxArrowType = 26

// checkField checks a Field table, its type, dictionary encoding and,
// recursively, its children, and returns its layout in a record batch;
// a dictionary's value layout is added to s.dicts.
func checkField(t fbTable, depth int, s *arrowSchema) (arrowLayout, error) {
	var l arrowLayout
	if err := t.str(4, "name"); err != nil {
		return l, err
	}
	if err := t.scalars("field", 6, 1, 8, 1); err != nil {
		return l, err
	}
	typ := t.u8(8)
	if typ > maxArrowType {
		return l, fmt.Errorf("type %d is not a member of Arrow's Type union", typ)
	}
	unionMode, err := checkFieldType(t, typ, depth)
	if err != nil {
		return l, err
	}
	l = typeLayout(typ, unionMode)
	dictionary, dictID, err := checkDictionary(t, depth)
	if err != nil {
		return l, err
	}
	if err := t.tables(14, "child", "children", depth+1, func(_ int64, c fbTable) error {
		cl, err := checkField(c, depth+1, s)
		l.add(cl)
		return err
	}); err != nil {
		return l, err
	}
	if err := checkKeyValues(t, 16, depth+1); err != nil {
		return l, err
	}
	if dictionary {
		// The batch holds the indices; a dictionary batch holds the values.
		if _, dup := s.dicts[dictID]; dup {
			return l, fmt.Errorf("dictionary id %d is used twice", dictID)
		}
		s.dicts[dictID] = l
		l = arrowLayout{nodes: 1, buffers: 2}
	}
	return l, nil
}

// checkFieldType checks a Field's type table (of Type union member typ)
// and returns a union's mode (0 for any other type).
func checkFieldType(t fbTable, typ uint8, depth int) (unionMode int16, err error) {
	ty, ok, err := t.sub(10, "type", depth+1)
	if err != nil || !ok {
		return 0, err
	}
	if err := ty.scalars("type", typeScalars[typ]...); err != nil {
		return 0, err
	}
	switch typ {
	case 10:
		if err := ty.str(6, "timezone"); err != nil {
			return 0, err
		}
	case 14:
		if off := ty.field(4); off != 0 {
			unionMode = int16(binary.LittleEndian.Uint16(ty.f.b[ty.pos+off:]))
		}
		if _, _, err := ty.vector(6, 4, "union typeIds"); err != nil {
			return 0, err
		}
	}
	return unionMode, nil
}

// typeLayout is the nodes and buffers a field of Type union member typ
// takes in a record batch, its children not counted.
func typeLayout(typ uint8, unionMode int16) arrowLayout {
	l := arrowLayout{nodes: 1}
	switch typ {
	case 1: // Null: no buffers
	case 4, 5, 19, 20, 25, 26: // (large) binary, utf8, list view: validity, offsets, data or sizes
		l.buffers = 3
	case 13, 16: // struct, fixed-size list: validity
		l.buffers = 1
	case 14: // union: type ids, dense offsets; a validity bitmap before V5
		l.buffers, l.preV5 = 1, 1
		if unionMode == 1 {
			l.buffers++
		}
	case 22: // run-end encoded: none; a validity bitmap before V5
		l.preV5 = 1
	case 23, 24: // binary and utf8 views: validity, views, variadic data
		l.buffers, l.views = 2, 1
	case 0: // no type: arrow-go refuses it; counted as the most
		l.buffers = 3
	default: // primitives, fixed-size binary, list, map: validity and one more
		l.buffers = 2
	}
	return l
}

// checkDictionary checks a Field's dictionary encoding, if it has one,
// and returns its id.
func checkDictionary(t fbTable, depth int) (dictionary bool, id int64, err error) {
	d, ok, err := t.sub(12, "dictionary", depth+1)
	if err != nil || !ok {
		return false, 0, err
	}
	if err := d.scalars("dictionary", 4, 8, 8, 1, 10, 2); err != nil {
		return false, 0, err
	}
	if it, ok, err := d.sub(6, "dictionary indexType", depth+2); err != nil {
		return false, 0, err
	} else if ok {
		if err := it.scalars("dictionary indexType", 4, 4, 6, 1); err != nil {
			return false, 0, err
		}
	}
	return true, d.i64(4), nil
}

// arrowBuffer is a RecordBatch buffer: its offset and length in the body.
type arrowBuffer struct{ offset, length int64 }

// checkRecordBatch checks a RecordBatch table, that it holds the nodes,
// buffers and variadic buffer counts its fields' layout l needs (v5: a
// message of metadata version V5 or later) and that its buffers lie
// inside the body of bodyLength bytes; it returns the buffers when the
// batch is compressed, for their uncompressed lengths to be checked.
func checkRecordBatch(t fbTable, bodyLength int64, l arrowLayout, v5 bool, depth int) (compressed []arrowBuffer, err error) {
	if err := t.scalars("record batch length", 4, 8); err != nil {
		return nil, err
	}
	_, nodes, err := t.vector(6, 16, "nodes")
	if err != nil {
		return nil, err
	}
	start, n, err := t.vector(8, 16, "buffers")
	if err != nil {
		return nil, err
	}
	vstart, views, err := t.vector(12, 8, "variadicBufferCounts")
	if err != nil {
		return nil, err
	}
	if nodes < l.nodes {
		return nil, fmt.Errorf("%d field nodes, but the schema's fields need %d", nodes, l.nodes)
	}
	if views < l.views {
		return nil, fmt.Errorf("%d variadic buffer counts, but the schema's view fields need %d", views, l.views)
	}
	need := l.buffers
	if !v5 {
		need += l.preV5
	}
	for i := int64(0); i < l.views; i++ {
		v := int64(binary.LittleEndian.Uint64(t.f.b[vstart+8*i:]))
		if v < 0 || v > n {
			return nil, fmt.Errorf("variadic buffer count %d: %d is not in [0, %d], the batch's buffers", i, v, n)
		}
		need += v
	}
	if n < need {
		return nil, fmt.Errorf("%d buffers, but the schema's fields need %d", n, need)
	}
	c, isCompressed, err := t.sub(10, "compression", depth+1)
	if err != nil {
		return nil, err
	}
	if isCompressed {
		if err := c.scalars("compression", 4, 1, 6, 1); err != nil {
			return nil, err
		}
	}
	for i := int64(0); i < n; i++ {
		at := start + 16*i
		off := int64(binary.LittleEndian.Uint64(t.f.b[at:]))
		length := int64(binary.LittleEndian.Uint64(t.f.b[at+8:]))
		if off < 0 || length < 0 || off > bodyLength || length > bodyLength-off {
			return nil, fmt.Errorf("buffer %d: %d bytes at %d run past the %d-byte body", i, length, off, bodyLength)
		}
		if isCompressed && length > 0 {
			if length < 8 {
				return nil, fmt.Errorf("buffer %d: compressed buffer of %d bytes has no 8-byte uncompressed length", i, length)
			}
			compressed = append(compressed, arrowBuffer{off, length})
		}
	}
	return compressed, nil
}

// arrowMessage is what checkMessage learns of a message.
type arrowMessage struct {
	header     byte
	bodyLength int64
	compressed []arrowBuffer
	schema     *arrowSchema // of a schema message
}

// checkMessage checks a message's metadata flatbuffer (Message.fbs); a
// record or dictionary batch against schema, the layout of the stream's
// schema (nil before it).
func checkMessage(meta []byte, schema *arrowSchema) (arrowMessage, error) {
	f := &fbuf{b: meta, what: "metadata"}
	m, err := f.root("message")
	if err != nil {
		return arrowMessage{}, err
	}
	if err := m.scalars("message", 4, 2, 6, 1, 10, 8); err != nil {
		return arrowMessage{}, err
	}
	msg := arrowMessage{header: m.u8(6), bodyLength: m.i64(10)}
	var version int16
	if off := m.field(4); off != 0 {
		version = int16(binary.LittleEndian.Uint16(meta[m.pos+off:]))
	}
	v5 := version >= 4 // MetadataVersion V5
	if msg.bodyLength < 0 {
		return msg, fmt.Errorf("body length %d is negative", msg.bodyLength)
	}
	if err := checkKeyValues(m, 12, 1); err != nil {
		return msg, err
	}
	h, ok, err := m.sub(8, "header", 1)
	if err != nil {
		return msg, err
	}
	if !ok {
		return msg, fmt.Errorf("message of header type %d has no header table", msg.header)
	}
	if schema == nil && (msg.header == headerRecordBatch || msg.header == headerDictionaryBatch) {
		return msg, fmt.Errorf("message of header type %d comes before the schema", msg.header)
	}
	switch msg.header {
	case headerSchema:
		if msg.schema, err = checkSchema(h, 1); err != nil {
			return msg, fmt.Errorf("schema: %w", err)
		}
	case headerRecordBatch:
		if msg.compressed, err = checkRecordBatch(h, msg.bodyLength, schema.fields, v5, 1); err != nil {
			return msg, fmt.Errorf("record batch: %w", err)
		}
	case headerDictionaryBatch:
		if err = h.scalars("dictionary batch", 4, 8, 8, 1); err != nil {
			return msg, err
		}
		id := h.i64(4)
		l, known := schema.dicts[id]
		if !known {
			return msg, fmt.Errorf("dictionary batch: id %d is not a dictionary of the schema", id)
		}
		data, ok, err := h.sub(6, "dictionary data", 2)
		if err == nil && !ok {
			err = errors.New("no record batch")
		}
		if err == nil {
			msg.compressed, err = checkRecordBatch(data, msg.bodyLength, l, v5, 2)
		}
		if err != nil {
			return msg, fmt.Errorf("dictionary batch %d: %w", id, err)
		}
	default:
		// Tensor and SparseTensor messages are not part of a table;
		// NONE is no message.
		return msg, fmt.Errorf("message header type %d is not a schema, dictionary batch or record batch", msg.header)
	}
	return msg, nil
}

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
		if end-pos < 4 {
			return fmt.Errorf("message %d: %d bytes left at %d hold no message length", i, end-pos, pos)
		}
		if _, err := r.ReadAt(p[:], pos); err != nil {
			return fmt.Errorf("message %d: %w", i, err)
		}
		pos += 4
		length := binary.LittleEndian.Uint32(p[:])
		if length == 0xFFFFFFFF { // continuation marker, then the length
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
