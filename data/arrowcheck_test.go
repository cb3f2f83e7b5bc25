package data

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// arrowMeta returns the metadata flatbuffer of the message whose framing
// starts at p of the IPC bytes b (a slice of b, so writes to it damage b)
// and the offset of its body.
func arrowMeta(t *testing.T, b []byte, p int64) (meta []byte, body int64) {
	t.Helper()
	if binary.LittleEndian.Uint32(b[p:]) == 0xFFFFFFFF {
		p += 4
	}
	n := int64(binary.LittleEndian.Uint32(b[p:]))
	return b[p+4 : p+4+n], p + 4 + n
}

// nextMessage returns where the message after the one at p starts.
func nextMessage(t *testing.T, b []byte, p int64) int64 {
	meta, body := arrowMeta(t, b, p)
	return body + msgRoot(t, meta).i64(10)
}

// msgRoot returns the message table of the metadata.
func msgRoot(t *testing.T, meta []byte) fbTable {
	t.Helper()
	m, err := (&fbuf{b: meta, what: "metadata"}).root("message")
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// msgHeader returns the message's header table.
func msgHeader(t *testing.T, meta []byte) fbTable {
	t.Helper()
	h, ok, err := msgRoot(t, meta).sub(8, "header", 1)
	if !ok || err != nil {
		t.Fatalf("no header: %v", err)
	}
	return h
}

// target returns the position an offset slot of tab points to.
func target(t *testing.T, tab fbTable, slot int64) int64 {
	t.Helper()
	at, ok, err := tab.ref(slot, "slot")
	if !ok || err != nil {
		t.Fatalf("slot %d: %v", slot, err)
	}
	return at
}

// footerTable returns the footer of an IPC file's bytes.
func footerTable(t *testing.T, b []byte) fbTable {
	t.Helper()
	n := int64(binary.LittleEndian.Uint32(b[len(b)-10:]))
	f, err := (&fbuf{b: b[int64(len(b))-10-n : len(b)-10], what: "footer"}).root("footer")
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// nested is a null column of a list type nested depth deep.
func nested(depth int) arrow.Array {
	dt := arrow.DataType(arrow.PrimitiveTypes.Int32)
	for range depth {
		dt = arrow.ListOf(dt)
	}
	return array.MakeArrayOfNull(memory.DefaultAllocator, dt, 2)
}

// stringViewColumn holds the documents as string_view, nulls kept.
func stringViewColumn(docs []*string) arrow.Array {
	b := array.NewStringViewBuilder(memory.DefaultAllocator)
	for _, d := range docs {
		if d == nil {
			b.AppendNull()
		} else {
			b.Append(*d)
		}
	}
	return b.NewArray()
}

// writeArrowMixed writes a text column next to a dictionary-encoded one, a
// struct and a sparse union, in the IPC file or stream format: arrow-go
// reads every column of a batch, and the dictionary's own batches.
func writeArrowMixed(t testing.TB, path string, stream bool, docs []*string) {
	mem := memory.DefaultAllocator
	text := stringColumn(false, docs)
	n := text.Len()
	db := array.NewDictionaryBuilder(mem, &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.BinaryTypes.String}).(*array.BinaryDictionaryBuilder)
	for i := range n {
		if err := db.AppendString([]string{"a", "bb", "ccc"}[i%3]); err != nil {
			t.Fatal(err)
		}
	}
	dict := db.NewArray()
	st := array.NewStructBuilder(mem, arrow.StructOf(arrow.Field{Name: "x", Type: arrow.PrimitiveTypes.Int64}, arrow.Field{Name: "y", Type: arrow.BinaryTypes.LargeString, Nullable: true}))
	for i := range n {
		st.Append(true)
		st.FieldBuilder(0).(*array.Int64Builder).Append(int64(i))
		st.FieldBuilder(1).(*array.LargeStringBuilder).Append("y")
	}
	strct := st.NewArray()
	ub := array.NewEmptySparseUnionBuilder(mem)
	ib := array.NewInt32Builder(mem)
	ub.AppendChild(ib, "i")
	for i := range n {
		ub.Append(0)
		ib.Append(int32(i))
	}
	union := ub.NewArray()
	cols := []arrow.Array{text, dict, strct, union}
	fields := make([]arrow.Field, len(cols))
	for i, c := range cols {
		fields[i] = arrow.Field{Name: []string{"text", "dict", "struct", "union"}[i], Type: c.DataType(), Nullable: true}
	}
	schema := arrow.NewSchema(fields, nil)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var w interface {
		Write(arrow.RecordBatch) error
		Close() error
	}
	if stream {
		w = ipc.NewWriter(f, ipc.WithSchema(schema))
	} else if w, err = ipc.NewFileWriter(f, ipc.WithSchema(schema)); err != nil {
		t.Fatal(err)
	}
	if err := w.Write(array.NewRecordBatch(schema, cols, int64(n))); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestArrowMixedColumns reads the text column of files and streams whose
// other columns are dictionary-encoded, a struct and a union: the
// layout check counts their nodes and buffers as arrow-go reads them.
func TestArrowMixedColumns(t *testing.T) {
	dir := t.TempDir()
	for _, stream := range []bool{false, true} {
		p := filepath.Join(dir, "mixed.arrow")
		writeArrowMixed(t, p, stream, testDocs())
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := fuzzInput(t, dir, "in.arrow", "text", b); err != nil {
			t.Errorf("stream=%v: %v", stream, err)
		}
	}
}

// TestArrowDamaged ingests Arrow files and streams damaged in one field
// each: every one is an error that names the file and what is wrong;
// the undamaged ones (compressed too) are read.
func TestArrowDamaged(t *testing.T) {
	docs := testDocs()
	half := len(docs) / 2
	put32 := func(b []byte, v uint32) { binary.LittleEndian.PutUint32(b, v) }
	put64 := func(b []byte, v uint64) { binary.LittleEndian.PutUint64(b, v) }
	tests := []struct {
		name   string
		stream bool
		opts   []ipc.Option
		cols   []arrow.Array
		damage func(t *testing.T, b []byte) []byte
		want   string // "" for no error
		// schemaOnly writes the schema of cols[0] and no batch (arrow-go
		// writes no batch nested more than 64 deep).
		schemaOnly bool
	}{
		{name: "stream intact", stream: true},
		{name: "file intact"},
		{name: "stream lz4 intact", stream: true, opts: []ipc.Option{ipc.WithLZ4()}},
		{name: "file zstd intact", opts: []ipc.Option{ipc.WithZstd()}},
		{name: "stream huge fields vector", stream: true, damage: func(t *testing.T, b []byte) []byte {
			meta, _ := arrowMeta(t, b, 0)
			put32(meta[target(t, msgHeader(t, meta), 6):], 0xFFFFFFFF)
			return b
		}, want: "message 0: schema: vector of 4294967295 fields runs past the"},
		{name: "file footer huge fields vector", damage: func(t *testing.T, b []byte) []byte {
			f := footerTable(t, b)
			s, _, _ := f.sub(6, "schema", 1)
			put32(f.f.b[target(t, s, 6):], 0xFFFFFFFF)
			return b
		}, want: "footer: schema: vector of 4294967295 fields runs past the"},
		{name: "stream huge children vector", stream: true, cols: []arrow.Array{tokenListColumn(t, docs[:half])}, damage: func(t *testing.T, b []byte) []byte {
			meta, _ := arrowMeta(t, b, 0)
			h := msgHeader(t, meta)
			start, _, _ := h.vector(6, 4, "fields")
			f0, _ := h.f.table(start+int64(binary.LittleEndian.Uint32(meta[start:])), "field", 2)
			put32(meta[target(t, f0, 14):], 0xFFFFFFFF)
			return b
		}, want: "message 0: schema: field 0: vector of 4294967295 children runs past the"},
		{name: "stream header offset outside the metadata", stream: true, damage: func(t *testing.T, b []byte) []byte {
			meta, _ := arrowMeta(t, b, nextMessage(t, b, 0))
			m := msgRoot(t, meta)
			put32(meta[m.pos+m.field(8):], 0x7FFFFFF0)
			return b
		}, want: "message 1: header: offset at"},
		{name: "stream root offset outside the metadata", stream: true, damage: func(t *testing.T, b []byte) []byte {
			meta, _ := arrowMeta(t, b, 0)
			put32(meta, 0x10000)
			return b
		}, want: "message 0: message table of 4 bytes at 65536 runs past the"},
		{name: "stream vtable outside the metadata", stream: true, damage: func(t *testing.T, b []byte) []byte {
			meta, _ := arrowMeta(t, b, 0)
			put32(meta[msgRoot(t, meta).pos:], 0x80000000)
			return b
		}, want: "message 0: message vtable of 4 bytes at 2147483664 runs past the"},
		{name: "stream body length beyond the file", stream: true, damage: func(t *testing.T, b []byte) []byte {
			meta, _ := arrowMeta(t, b, nextMessage(t, b, 0))
			m := msgRoot(t, meta)
			put64(meta[m.pos+m.field(10):], 1<<40)
			return b
		}, want: "message 1: body of 1099511627776 bytes at"},
		{name: "stream buffer beyond the body", stream: true, damage: func(t *testing.T, b []byte) []byte {
			meta, _ := arrowMeta(t, b, nextMessage(t, b, 0))
			h := msgHeader(t, meta)
			start, _, _ := h.vector(8, 16, "buffers")
			put64(meta[start+16:], 1<<40)
			return b
		}, want: "message 1: record batch: buffer 1: "},
		{name: "stream compressed length beyond the cap", stream: true, opts: []ipc.Option{ipc.WithLZ4()}, damage: func(t *testing.T, b []byte) []byte {
			meta, body := arrowMeta(t, b, nextMessage(t, b, 0))
			h := msgHeader(t, meta)
			start, n, _ := h.vector(8, 16, "buffers")
			for i := range n {
				if binary.LittleEndian.Uint64(meta[start+16*i+8:]) > 8 {
					put64(b[body+int64(binary.LittleEndian.Uint64(meta[start+16*i:])):], 1<<50)
					return b
				}
			}
			t.Fatal("no compressed buffer")
			return nil
		}, want: "declared uncompressed length 1125899906842624 is beyond"},
		{name: "stream lz4 too few buffers", stream: true, opts: []ipc.Option{ipc.WithLZ4()}, damage: func(t *testing.T, b []byte) []byte {
			meta, _ := arrowMeta(t, b, nextMessage(t, b, 0))
			put32(meta[target(t, msgHeader(t, meta), 8):], 0)
			return b
		}, want: "message 1: record batch: 0 buffers, but the schema's fields need 3"},
		{name: "file too few nodes", damage: func(t *testing.T, b []byte) []byte {
			meta, _ := arrowMeta(t, b, nextMessage(t, b, 8))
			put32(meta[target(t, msgHeader(t, meta), 6):], 0)
			return b
		}, want: "message 1: record batch: 0 field nodes, but the schema's fields need 1"},
		{name: "stream string view intact", stream: true, cols: []arrow.Array{stringViewColumn(docs)}, want: "type: expected string"},
		{name: "stream string view huge variadic count", stream: true, cols: []arrow.Array{stringViewColumn(docs)}, damage: func(t *testing.T, b []byte) []byte {
			meta, _ := arrowMeta(t, b, nextMessage(t, b, 0))
			put64(meta[target(t, msgHeader(t, meta), 12)+4:], 1<<40)
			return b
		}, want: "message 1: record batch: variadic buffer count 0: 1099511627776 is not in [0, 3]"},
		{name: "file block body beyond the footer", damage: func(t *testing.T, b []byte) []byte {
			f := footerTable(t, b)
			start, _, _ := f.vector(10, 24, "blocks")
			put64(f.f.b[start+16:], 1<<40)
			return b
		}, want: "footer: record batch block 0: 160 bytes of metadata and 1099511627776 of body at 128 run outside the file's messages"},
		{name: "file footer length beyond the file", damage: func(t *testing.T, b []byte) []byte {
			put32(b[len(b)-10:], 0x7FFFFFFF)
			return b
		}, want: "footer length 2147483647 does not fit"},
		{name: "file cut", damage: func(t *testing.T, b []byte) []byte { return b[:len(b)-3] }, want: "does not end with the magic"},
		{name: "stream nested 65 deep", stream: true, cols: []arrow.Array{nested(65)}, schemaOnly: true, want: "nest more than 64 deep"},
		{name: "stream nested 60 deep", stream: true, cols: []arrow.Array{nested(60)}, want: "type: expected string"},
	}
	dir := t.TempDir()
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, "in.arrow")
			cols := tc.cols
			if cols == nil {
				cols = []arrow.Array{stringColumn(false, docs[:half]), stringColumn(false, docs[half:])}
			}
			if tc.schemaOnly {
				cols = nil
				schema := arrow.NewSchema([]arrow.Field{{Name: "text", Type: tc.cols[0].DataType()}}, nil)
				f, err := os.Create(p)
				if err != nil {
					t.Fatal(err)
				}
				if err := ipc.NewWriter(f, ipc.WithSchema(schema)).Close(); err != nil {
					t.Fatal(err)
				}
				f.Close()
			} else {
				writeArrowWith(t, p, tc.stream, "text", tc.opts, cols...)
			}
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if tc.damage != nil {
				b = tc.damage(t, b)
			}
			err = fuzzInput(t, dir, "case"+string(rune('a'+i))+".arrow", "text", b)
			t.Log(err)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("intact input: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("got error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// sharedChildren is a field flatbuffer of levels fields, each with two
// children that are the same next field: 2^levels fields to a reader that
// follows every offset, in 20 bytes a level.
func sharedChildren(levels int) (buf []byte, first int64) {
	le := binary.LittleEndian
	buf = make([]byte, 4, 20+20*levels+12)
	// One vtable for all: 16 bytes, tables of 8, children (slot 14) at 4.
	buf = le.AppendUint16(buf, 16)
	buf = le.AppendUint16(buf, 8)
	buf = append(buf, make([]byte, 10)...)
	buf = le.AppendUint16(buf, 4)
	for i := 0; i <= levels; i++ {
		p := len(buf)
		buf = le.AppendUint32(buf, uint32(p-4)) // soffset to the vtable at 4
		buf = le.AppendUint32(buf, 4)           // children vector just after
		if i == levels {
			buf = le.AppendUint32(buf, 0)
			break
		}
		buf = le.AppendUint32(buf, 2)
		buf = le.AppendUint32(buf, 8) // both to the next table, at p+20
		buf = le.AppendUint32(buf, 4)
	}
	return buf, 20
}

// TestArrowSharedTables: a DAG of fields sharing children is refused
// before it is walked (or built by arrow-go) exponentially, while the
// same bytes with one level are read.
func TestArrowSharedTables(t *testing.T) {
	for _, tc := range []struct {
		levels int
		want   string
	}{
		{1, ""},
		{40, "more tables reached"},
	} {
		buf, first := sharedChildren(tc.levels)
		f := &fbuf{b: buf, what: "metadata"}
		tab, err := f.table(first, "field", 1)
		if err != nil {
			t.Fatal(err)
		}
		s := &arrowSchema{dicts: map[int64]arrowLayout{}}
		l, err := checkField(tab, 1, s)
		switch {
		case tc.want == "" && (err != nil || l.nodes != 3):
			t.Errorf("%d levels: got %+v, %v; want 3 nodes", tc.levels, l, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%d levels: got %v, want an error containing %q", tc.levels, err, tc.want)
		}
	}
}
