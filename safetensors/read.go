package safetensors

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/hilbert-ml/hilbert/internal/regfile"
)

// File is an open safetensors file whose header has been validated.
// Tensor data is read on demand. A File is safe for concurrent reads.
type File struct {
	path      string
	r         io.ReaderAt // the file's bytes
	closer    io.Closer   // nil for a File on memory
	dataStart int64
	infos     []Info // in file order (ascending offsets)
	byName    map[string]int
	metadata  map[string]string
	sums      []uint32 // per tensor in file order, from ChecksumKey; nil when absent
}

// Open opens path and validates its header (see the package comment for
// the checks). The caller must Close the file.
func Open(path string) (*File, error) {
	f, err := regfile.Open(path)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	sf, err := parse(path, f, st.Size())
	if err != nil {
		f.Close()
		return nil, err
	}
	sf.r, sf.closer = f, f
	return sf, nil
}

// parse reads and validates the header of a file of the given size.
func parse(path string, r io.ReaderAt, size int64) (*File, error) {
	var lenBuf [8]byte
	if size < 8 {
		return nil, fmt.Errorf("safetensors: %s: %d bytes, too short for a header", path, size)
	}
	if _, err := r.ReadAt(lenBuf[:], 0); err != nil {
		return nil, fmt.Errorf("safetensors: %s: reading the header length: %w", path, err)
	}
	n := binary.LittleEndian.Uint64(lenBuf[:])
	if n > MaxHeaderBytes {
		return nil, fmt.Errorf("safetensors: %s: header of %d bytes exceeds the limit of %d", path, n, MaxHeaderBytes)
	}
	if int64(n) > size-8 {
		return nil, fmt.Errorf("safetensors: %s: header of %d bytes runs past the end of the %d-byte file", path, n, size)
	}
	header := make([]byte, n)
	if _, err := r.ReadAt(header, 8); err != nil {
		return nil, fmt.Errorf("safetensors: %s: reading the header: %w", path, err)
	}
	sf := &File{path: path, dataStart: 8 + int64(n), byName: map[string]int{}}
	if err := sf.decodeHeader(header); err != nil {
		return nil, fmt.Errorf("safetensors: %s: %w", path, err)
	}
	if err := sf.checkLayout(size - sf.dataStart); err != nil {
		return nil, fmt.Errorf("safetensors: %s: %w", path, err)
	}
	if err := sf.parseSums(); err != nil {
		return nil, fmt.Errorf("safetensors: %s: %w", path, err)
	}
	return sf, nil
}

// parseSums takes ChecksumKey out of the metadata: one 8-hex-digit
// CRC-32C per tensor, in file order.
func (sf *File) parseSums() error {
	v, ok := sf.metadata[ChecksumKey]
	if !ok {
		return nil
	}
	delete(sf.metadata, ChecksumKey)
	if len(sf.metadata) == 0 {
		sf.metadata = nil // the caller's metadata was nil
	}
	var fields []string
	if v != "" {
		fields = strings.Split(v, ",")
	}
	if len(fields) != len(sf.infos) {
		return fmt.Errorf("metadata %q: %d checksums for %d tensors", ChecksumKey, len(fields), len(sf.infos))
	}
	sf.sums = make([]uint32, len(fields))
	for i, f := range fields {
		x, err := strconv.ParseUint(f, 16, 32)
		if err != nil || len(f) != 8 {
			return fmt.Errorf("metadata %q: checksum %d (tensor %q): expected 8 hex digits, got %q", ChecksumKey, i, sf.infos[i].Name, f)
		}
		sf.sums[i] = uint32(x)
	}
	return nil
}

type headerEntry struct {
	DType       DType   `json:"dtype"`
	Shape       []int   `json:"shape"`
	DataOffsets []int64 `json:"data_offsets"`
}

// decodeHeader parses the JSON object key by key, so that a duplicated
// name is an error rather than silently overriding the first.
func (sf *File) decodeHeader(header []byte) error {
	dec := json.NewDecoder(bytes.NewReader(header))
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return fmt.Errorf("header is not a JSON object")
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fmt.Errorf("header: %w", err)
		}
		name, ok := tok.(string)
		if !ok {
			return fmt.Errorf("header: unexpected token %v", tok)
		}
		if name == metadataKey {
			if sf.metadata != nil {
				return fmt.Errorf("header: %q appears twice", metadataKey)
			}
			var m map[string]string
			if err := dec.Decode(&m); err != nil {
				return fmt.Errorf("header: %s: %w", metadataKey, err)
			}
			if m == nil {
				m = map[string]string{}
			}
			sf.metadata = m
			continue
		}
		if _, dup := sf.byName[name]; dup {
			return fmt.Errorf("tensor %q appears twice in the header", name)
		}
		var e headerEntry
		if err := dec.Decode(&e); err != nil {
			return fmt.Errorf("tensor %q: %w", name, err)
		}
		if e.DType.Size() == 0 {
			return fmt.Errorf("tensor %q: unknown dtype %q", name, e.DType)
		}
		if len(e.DataOffsets) != 2 {
			return fmt.Errorf("tensor %q: data_offsets %v: want [begin, end]", name, e.DataOffsets)
		}
		want, ok := byteSize(e.DType, e.Shape)
		if !ok {
			return fmt.Errorf("tensor %q: invalid shape %s", name, shapeString(e.Shape))
		}
		begin, end := e.DataOffsets[0], e.DataOffsets[1]
		if begin < 0 || end < begin {
			return fmt.Errorf("tensor %q: invalid data_offsets [%d, %d]", name, begin, end)
		}
		if end-begin != want {
			return fmt.Errorf("tensor %q: %s %s needs %d bytes, data_offsets [%d, %d] hold %d", name, e.DType, shapeString(e.Shape), want, begin, end, end-begin)
		}
		sf.byName[name] = len(sf.infos)
		sf.infos = append(sf.infos, Info{Name: name, DType: e.DType, Shape: e.Shape, Begin: begin, End: end})
	}
	if _, err := dec.Token(); err != nil {
		return fmt.Errorf("header: %w", err)
	}
	if dec.More() {
		return fmt.Errorf("header: trailing data after the JSON object")
	}
	if rest, _ := io.ReadAll(dec.Buffered()); len(bytes.TrimSpace(rest)) != 0 {
		return fmt.Errorf("header: trailing data after the JSON object")
	}
	return nil
}

// checkLayout requires the tensors' byte ranges to tile the data section
// exactly: sorted by offset, each begins where the previous ended, the
// first at 0 and the last at the end of the file.
func (sf *File) checkLayout(dataSize int64) error {
	slices.SortStableFunc(sf.infos, func(a, b Info) int { return cmp.Or(cmp.Compare(a.Begin, b.Begin), cmp.Compare(a.End, b.End)) })
	var pos int64
	for i, in := range sf.infos {
		sf.byName[in.Name] = i
		if in.Begin < pos {
			return fmt.Errorf("tensor %q: data_offsets [%d, %d] overlap the previous tensor %q (ends at %d)", in.Name, in.Begin, in.End, sf.infos[i-1].Name, pos)
		}
		if in.Begin > pos {
			return fmt.Errorf("tensor %q: data_offsets [%d, %d] leave a gap after byte %d", in.Name, in.Begin, in.End, pos)
		}
		if in.End > dataSize {
			return fmt.Errorf("tensor %q: data_offsets [%d, %d] run past the end of the data (%d bytes)", in.Name, in.Begin, in.End, dataSize)
		}
		pos = in.End
	}
	if pos != dataSize {
		return fmt.Errorf("%d bytes of data after the last tensor", dataSize-pos)
	}
	return nil
}

// Close closes the file.
func (sf *File) Close() error {
	if sf.closer == nil {
		return nil
	}
	return sf.closer.Close()
}

// Path returns the file's path.
func (sf *File) Path() string { return sf.path }

// Metadata returns the header's "__metadata__" map (nil when absent),
// without ChecksumKey.
func (sf *File) Metadata() map[string]string { return sf.metadata }

// Checksummed reports whether the file records the CRC-32C of every
// tensor (ChecksumKey), which every read is then checked against. Files
// of this package's writer are; files from elsewhere may not be.
func (sf *File) Checksummed() bool { return sf.sums != nil }

// Tensors returns the tensors' descriptions in file order.
func (sf *File) Tensors() []Info { return append([]Info(nil), sf.infos...) }

// Info returns the description of the named tensor.
func (sf *File) Info(name string) (Info, bool) {
	i, ok := sf.byName[name]
	if !ok {
		return Info{}, false
	}
	return sf.infos[i], true
}

// ReadBytes reads the raw data of the named tensor into dst, whose length
// must be the tensor's byte size, and checks it against the tensor's
// checksum when the file records one.
func (sf *File) ReadBytes(name string, dst []byte) error {
	in, ok := sf.Info(name)
	if !ok {
		return fmt.Errorf("safetensors: %s: no tensor %q", sf.path, name)
	}
	if int64(len(dst)) != in.End-in.Begin {
		return fmt.Errorf("safetensors: %s: tensor %q: %d-byte buffer for %d bytes", sf.path, name, len(dst), in.End-in.Begin)
	}
	if _, err := sf.r.ReadAt(dst, sf.dataStart+in.Begin); err != nil {
		return fmt.Errorf("safetensors: %s: reading tensor %q: %w", sf.path, name, err)
	}
	if sf.sums != nil {
		if got, want := crc32.Checksum(dst, castagnoli), sf.sums[sf.byName[name]]; got != want {
			return fmt.Errorf("safetensors: %s: tensor %q is damaged: its bytes have CRC-32C %08x, the header records %08x", sf.path, name, got, want)
		}
	}
	return nil
}

// check verifies the named tensor's dtype, and its shape when shape is
// not nil.
func (sf *File) check(name string, dtype DType, shape []int) (Info, error) {
	in, ok := sf.Info(name)
	if !ok {
		return in, fmt.Errorf("safetensors: %s: no tensor %q", sf.path, name)
	}
	if in.DType != dtype {
		return in, fmt.Errorf("safetensors: %s: tensor %q has dtype %s (want %s)", sf.path, name, in.DType, dtype)
	}
	if shape != nil && !slices.Equal(in.Shape, shape) {
		return in, fmt.Errorf("safetensors: %s: tensor %q has shape %s (want %s)", sf.path, name, shapeString(in.Shape), shapeString(shape))
	}
	return in, nil
}

// ReadFloat32 reads an F32 tensor of the given shape into dst
// (len(dst) == numel(shape)); a different dtype or shape is an error
// naming the tensor. A nil shape accepts any shape of len(dst) elements.
func (sf *File) ReadFloat32(name string, shape []int, dst []float32) error {
	return readInto(sf, name, F32, shape, dst, DecodeFloat32)
}

// ReadInt32 reads an I32 tensor of the given shape into dst, like
// ReadFloat32.
func (sf *File) ReadInt32(name string, shape []int, dst []int32) error {
	return readInto(sf, name, I32, shape, dst, DecodeInt32)
}

// ReadFloat64 reads an F64 tensor of the given shape into dst, like
// ReadFloat32.
func (sf *File) ReadFloat64(name string, shape []int, dst []float64) error {
	return readInto(sf, name, F64, shape, dst, DecodeFloat64)
}

// readInto reads a tensor of dtype and the given shape into dst, decoding
// its bytes with decode (see ReadFloat32).
func readInto[T any](sf *File, name string, dtype DType, shape []int, dst []T, decode func([]T, []byte)) error {
	buf, err := sf.readN(name, dtype, shape, len(dst))
	if err == nil {
		decode(dst, buf)
	}
	return err
}

// readN checks a tensor against dtype, shape and the destination's length
// n, and returns its raw bytes (n elements of dtype's size).
func (sf *File) readN(name string, dtype DType, shape []int, n int) ([]byte, error) {
	in, err := sf.check(name, dtype, shape)
	if err != nil {
		return nil, err
	}
	if in.Numel() != n {
		return nil, fmt.Errorf("safetensors: %s: tensor %q has %d elements (want %d)", sf.path, name, in.Numel(), n)
	}
	buf := make([]byte, dtype.Size()*n)
	if err := sf.ReadBytes(name, buf); err != nil {
		return nil, err
	}
	return buf, nil
}
