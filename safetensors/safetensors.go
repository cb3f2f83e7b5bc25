// Package safetensors reads and writes the safetensors file format (the
// format PyTorch and Hugging Face users load): an 8-byte little-endian
// header length, a JSON header mapping tensor names to dtype, shape and
// byte offsets (plus an optional "__metadata__" string map), then the raw
// little-endian tensor data.
//
// The reader treats a file as untrusted: the header size is bounded, every
// tensor's dtype must be known, its shape must match its byte range, the
// ranges must tile the data section exactly (no overlap, no gap, nothing
// past the end of the file), names must be unique, and every error names
// the file and the tensor. Data is read on demand with ReadAt, so opening
// a multi-gigabyte checkpoint reads only its header.
//
// The writer is atomic: it writes a temporary file next to the target,
// fsyncs it, renames it over the target and fsyncs the directory, so a
// crash leaves either the old file or the new one, never a torn one.
//
// The writer records a checksum of every tensor in the metadata, under
// the key "hilbert.crc32c": the CRC-32C (Castagnoli) of each tensor's
// bytes as 8 hex digits, comma-separated, in the order of the tensors'
// data offsets. The reader checks a tensor against it on every read when
// the key is present (a mismatch is an error naming the tensor and the
// file) and hides the key from Metadata; files without it (written by
// PyTorch, say) load as before.
//
// This package knows nothing of tensors or devices (it handles bytes and
// float32 slices); nn and the trainer build on it. It must not import any
// other Hilbert package.
package safetensors

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"math/bits"
)

// DType is a safetensors dtype string ("F32", "BF16", "I32", ...).
type DType string

// The dtypes this package knows. Files holding any other dtype are
// rejected.
const (
	F64  DType = "F64"
	F32  DType = "F32"
	F16  DType = "F16"
	BF16 DType = "BF16"
	I64  DType = "I64"
	I32  DType = "I32"
	I16  DType = "I16"
	I8   DType = "I8"
	U8   DType = "U8"
	Bool DType = "BOOL"
)

// Size returns the number of bytes of one element, or 0 for an unknown
// dtype.
func (d DType) Size() int {
	switch d {
	case F64, I64:
		return 8
	case F32, I32:
		return 4
	case F16, BF16, I16:
		return 2
	case I8, U8, Bool:
		return 1
	}
	return 0
}

// MaxHeaderBytes bounds the JSON header a reader accepts (100 MB, the
// limit of the reference implementation).
const MaxHeaderBytes = 100 << 20

// metadataKey is the reserved header key of the free-form string map.
const metadataKey = "__metadata__"

// ChecksumKey is the metadata key of the per-tensor checksums (see the
// package comment); a caller's metadata may not use it.
const ChecksumKey = "hilbert.crc32c"

// castagnoli is the CRC-32C table (hardware-accelerated on amd64, arm64).
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Info describes one tensor of a file.
type Info struct {
	Name  string
	DType DType
	Shape []int
	// Begin and End are byte offsets into the data section.
	Begin, End int64
}

// Numel returns the number of elements of the tensor.
func (in Info) Numel() int {
	n := 1
	for _, d := range in.Shape {
		n *= d
	}
	return n
}

// byteSize returns numel(shape) * size(dtype), reporting overflow.
func byteSize(dtype DType, shape []int) (int64, bool) {
	n := uint64(dtype.Size())
	for _, d := range shape {
		if d < 0 {
			return 0, false
		}
		hi, lo := bits.Mul64(n, uint64(d))
		if hi != 0 || lo > math.MaxInt64 {
			return 0, false
		}
		n = lo
	}
	return int64(n), true
}

// EncodeFloat32 returns the little-endian bytes of v.
func EncodeFloat32(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// DecodeFloat32 decodes little-endian float32 bytes into dst
// (len(b) == 4*len(dst)).
func DecodeFloat32(dst []float32, b []byte) {
	for i := range dst {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
}

// EncodeFloat64 returns the little-endian bytes of v (an F64 tensor).
func EncodeFloat64(v []float64) []byte {
	b := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(x))
	}
	return b
}

// DecodeFloat64 decodes little-endian float64 bytes into dst
// (len(b) == 8*len(dst)).
func DecodeFloat64(dst []float64, b []byte) {
	for i := range dst {
		dst[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
	}
}

// EncodeInt32 returns the little-endian bytes of v.
func EncodeInt32(v []int32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(x))
	}
	return b
}

// DecodeInt32 decodes little-endian int32 bytes into dst
// (len(b) == 4*len(dst)).
func DecodeInt32(dst []int32, b []byte) {
	for i := range dst {
		dst[i] = int32(binary.LittleEndian.Uint32(b[4*i:]))
	}
}

func shapeString(s []int) string { return fmt.Sprint(s) }
