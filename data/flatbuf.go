package data

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// A flatbuffer read with every bound checked, for the Arrow IPC checks
// (arrowcheck.go): fbuf.root and fbuf.table verify a table and its vtable
// before any field is read, and fbTable's accessors check each scalar,
// reference, string and vector against the buffer.

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
