package data

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// The Arrow IPC checks run before a file reaches arrow-go, which reads an
// IPC message's flatbuffer without verifying it: it allocates from the
// vector lengths and file offsets it holds (a damaged schema's field count
// became make([]arrow.Field, 4294967295), a fatal out-of-memory error that
// no recover catches). checkArrowFile and checkArrowStream
// (arrowframe.go) walk the framing of a file (its footer, the blocks the
// footer lists and the stream they lie in) or of a stream, and the
// checks here take every flatbuffer table that arrow-go reads against
// Arrow's format/Schema.fbs, Message.fbs and File.fbs (the slot numbers
// are those of arrow-go's generated arrow/internal/flatbuf), through the
// bounds-checked reader of flatbuf.go: every offset, vtable, scalar,
// string and vector lies inside its buffer, tables nest at most
// maxArrowDepth deep and are visited at most once per 4 bytes of buffer
// (so that tables shared by many offsets cannot make arrow-go build
// exponentially many fields), and each message's body, each block and
// each buffer lie inside the file.

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
