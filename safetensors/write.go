package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"maps"
	"strings"

	"github.com/hilbert-ml/hilbert/internal/atomicfile"
)

// Tensor is one named tensor held in memory, for Save.
type Tensor struct {
	Name  string
	DType DType
	Shape []int
	// Data holds the little-endian elements; its length must be
	// numel(Shape) * DType.Size().
	Data []byte
}

// Save writes tensors, in the given order, and metadata to path
// atomically. It is Create, one WriteTensor per tensor, and Commit.
func Save(path string, tensors []Tensor, metadata map[string]string) error {
	infos := make([]Info, len(tensors))
	for i, t := range tensors {
		infos[i] = Info{Name: t.Name, DType: t.DType, Shape: t.Shape}
	}
	w, err := Create(path, infos, metadata)
	if err != nil {
		return err
	}
	for _, t := range tensors {
		if err := w.WriteTensor(t.Name, t.Data); err != nil {
			w.Abort()
			return err
		}
	}
	return w.Commit()
}

// Writer streams tensors into a new safetensors file without holding them
// all in memory. The target appears only when Commit succeeds.
type Writer struct {
	path   string
	f      *atomicfile.File // nil after Commit or Abort
	infos  []Info
	sums   []uint32 // CRC-32C of each tensor written
	sumsAt int64    // file offset of the checksum placeholder
	next   int
	err    error
}

// Create validates infos (unique non-empty names, known dtypes,
// non-negative shapes; Begin and End are ignored and assigned in order),
// opens a temporary file next to path and writes the header. Tensors must
// then be written with WriteTensor in the order of infos.
func Create(path string, infos []Info, metadata map[string]string) (*Writer, error) {
	laid := make([]Info, len(infos))
	seen := make(map[string]bool, len(infos))
	var off int64
	for i, in := range infos {
		if in.Name == "" || in.Name == metadataKey {
			return nil, fmt.Errorf("safetensors: %s: tensor %d has the reserved or empty name %q", path, i, in.Name)
		}
		if seen[in.Name] {
			return nil, fmt.Errorf("safetensors: %s: tensor %q appears twice", path, in.Name)
		}
		seen[in.Name] = true
		if in.DType.Size() == 0 {
			return nil, fmt.Errorf("safetensors: %s: tensor %q: unknown dtype %q", path, in.Name, in.DType)
		}
		n, ok := byteSize(in.DType, in.Shape)
		if !ok {
			return nil, fmt.Errorf("safetensors: %s: tensor %q: invalid shape %s", path, in.Name, shapeString(in.Shape))
		}
		laid[i] = Info{Name: in.Name, DType: in.DType, Shape: append([]int{}, in.Shape...), Begin: off, End: off + n}
		off += n
	}
	if _, ok := metadata[ChecksumKey]; ok {
		return nil, fmt.Errorf("safetensors: %s: metadata key %q is reserved for the tensors' checksums", path, ChecksumKey)
	}
	header, sumsAt, err := encodeHeader(laid, metadata)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %s: %w", path, err)
	}
	f, err := atomicfile.Create(path)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	w := &Writer{path: path, f: f, infos: laid, sums: make([]uint32, len(laid)), sumsAt: 8 + int64(sumsAt)}
	var lenBuf [8]byte
	binary.LittleEndian.PutUint64(lenBuf[:], uint64(len(header)))
	if _, err := f.Write(lenBuf[:]); err != nil {
		w.Abort()
		return nil, fmt.Errorf("safetensors: writing %s: %w", path, err)
	}
	if _, err := f.Write(header); err != nil {
		w.Abort()
		return nil, fmt.Errorf("safetensors: writing %s: %w", path, err)
	}
	return w, nil
}

// encodeHeader writes the JSON header in the order of infos, padded with
// spaces to a multiple of 8 bytes (as the reference writer does, so the
// data section is aligned). The metadata holds ChecksumKey with a
// placeholder of the final length, whose offset in the header it returns
// (Commit writes the checksums there).
func encodeHeader(infos []Info, metadata map[string]string) ([]byte, int, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	meta := make(map[string]string, len(metadata)+1)
	maps.Copy(meta, metadata)
	placeholder := formatSums(make([]uint32, len(infos)))
	meta[ChecksumKey] = placeholder
	m, err := json.Marshal(meta)
	if err != nil {
		return nil, 0, err
	}
	b.WriteString(`"` + metadataKey + `":`)
	b.Write(m)
	// Quotes inside metadata values are escaped, so this is the key.
	at := bytes.Index(b.Bytes(), []byte(`"`+ChecksumKey+`":"`+placeholder+`"`)) + len(ChecksumKey) + 4
	first := false
	for _, in := range infos {
		if !first {
			b.WriteByte(',')
		}
		first = false
		name, _ := json.Marshal(in.Name)
		shape := in.Shape
		if shape == nil {
			shape = []int{}
		}
		entry, err := json.Marshal(struct {
			DType   DType    `json:"dtype"`
			Shape   []int    `json:"shape"`
			Offsets [2]int64 `json:"data_offsets"`
		}{in.DType, shape, [2]int64{in.Begin, in.End}})
		if err != nil {
			return nil, 0, err
		}
		b.Write(name)
		b.WriteByte(':')
		b.Write(entry)
	}
	b.WriteByte('}')
	for b.Len()%8 != 0 {
		b.WriteByte(' ')
	}
	return b.Bytes(), at, nil
}

// formatSums writes checksums as ChecksumKey's value.
func formatSums(sums []uint32) string {
	var sb strings.Builder
	for i, s := range sums {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, "%08x", s)
	}
	return sb.String()
}

// WriteTensor writes the data of the next tensor; name must be the next
// name given to Create and data must have its exact byte size.
func (w *Writer) WriteTensor(name string, data []byte) error {
	if w.err != nil {
		return w.err
	}
	if w.next >= len(w.infos) {
		w.err = fmt.Errorf("safetensors: %s: tensor %q written after the last declared tensor", w.path, name)
		return w.err
	}
	in := w.infos[w.next]
	if name != in.Name {
		w.err = fmt.Errorf("safetensors: %s: tensor %q written where %q was declared", w.path, name, in.Name)
		return w.err
	}
	if int64(len(data)) != in.End-in.Begin {
		w.err = fmt.Errorf("safetensors: %s: tensor %q: %d bytes for %s %s (want %d)", w.path, name, len(data), in.DType, shapeString(in.Shape), in.End-in.Begin)
		return w.err
	}
	if _, err := w.f.Write(data); err != nil {
		w.err = fmt.Errorf("safetensors: writing tensor %q to %s: %w", name, w.path, err)
		return w.err
	}
	w.sums[w.next] = crc32.Checksum(data, castagnoli)
	w.next++
	return nil
}

// Commit checks that every declared tensor was written and commits the
// file (internal/atomicfile: fsync, rename over the target, fsync of the
// directory). On error the temporary file is removed and the target is
// untouched.
func (w *Writer) Commit() error {
	if w.err == nil && w.next != len(w.infos) {
		w.err = fmt.Errorf("safetensors: %s: %d of %d tensors written (next: %q)", w.path, w.next, len(w.infos), w.infos[w.next].Name)
	}
	if w.err != nil {
		w.Abort()
		return w.err
	}
	if w.f == nil {
		return fmt.Errorf("safetensors: %s: already committed", w.path)
	}
	f := w.f
	w.f = nil
	if _, err := f.WriteAt([]byte(formatSums(w.sums)), w.sumsAt); err != nil {
		f.Abort()
		return fmt.Errorf("safetensors: saving %s: %w", w.path, err)
	}
	if err := f.Commit(); err != nil {
		return fmt.Errorf("safetensors: %w", err)
	}
	return nil
}

// Abort discards the temporary file; the target is untouched.
func (w *Writer) Abort() {
	if w.f != nil {
		w.f.Abort()
		w.f = nil
	}
	if w.err == nil {
		w.err = fmt.Errorf("safetensors: %s: writer aborted", w.path)
	}
}
