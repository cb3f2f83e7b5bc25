package safetensors

import (
	"encoding/binary"
	"fmt"
	"math"
)

// DecodeFloat16 decodes little-endian IEEE 754 half-precision bytes (F16)
// into dst (len(b) == 2*len(dst)), exactly: every half value, subnormals,
// infinities and NaNs included, is a float32.
func DecodeFloat16(dst []float32, b []byte) {
	for i := range dst {
		dst[i] = float16to32(binary.LittleEndian.Uint16(b[2*i:]))
	}
}

// float16to32 widens one IEEE half (1 sign, 5 exponent, 10 mantissa bits).
func float16to32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	man := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // infinity or NaN (the payload kept)
		return math.Float32frombits(sign | 0xff<<23 | man<<13)
	case exp != 0: // normal: rebias 15 -> 127
		return math.Float32frombits(sign | (exp+112)<<23 | man<<13)
	case man == 0:
		return math.Float32frombits(sign)
	}
	// Subnormal: man * 2^-24, exact in float32.
	v := float32(man) * (1.0 / (1 << 24))
	if sign != 0 {
		v = -v
	}
	return v
}

// EncodeFloat16 returns the little-endian F16 bytes of v, each rounded to
// the nearest half (ties to even); magnitudes beyond 65504 round to
// infinity, NaNs stay NaNs.
func EncodeFloat16(v []float32) []byte {
	b := make([]byte, 2*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint16(b[2*i:], float32to16(x))
	}
	return b
}

// float32to16 rounds one float32 to the nearest half, ties to even.
func float32to16(f float32) uint16 {
	u := math.Float32bits(f)
	sign := uint16(u>>16) & 0x8000
	a := u & 0x7fffffff
	switch {
	case a > 0x7f800000: // NaN: quiet, top payload bits kept
		return sign | 0x7e00 | uint16(a>>13)&0x3ff
	case a >= 0x477ff000: // rounds to or past 65520: infinity
		return sign | 0x7c00
	case a >= 0x38800000: // normal half
		// Round the 13 dropped bits to nearest, ties to even, carrying
		// into the exponent where the mantissa overflows.
		a += 0xfff + (a>>13)&1
		return sign | uint16((a-0x38000000)>>13)
	case a < 0x33000000: // below half the smallest subnormal: zero
		return sign
	}
	// Subnormal half: value / 2^-24, rounded to nearest even.
	m := float64(math.Float32frombits(a)) * (1 << 24)
	return sign | uint16(math.RoundToEven(m))
}

// DecodeBFloat16 decodes little-endian bfloat16 bytes (BF16) into dst
// (len(b) == 2*len(dst)), exactly: a bfloat16 is the top half of a
// float32.
func DecodeBFloat16(dst []float32, b []byte) {
	for i := range dst {
		dst[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(b[2*i:])) << 16)
	}
}

// EncodeBFloat16 returns the little-endian BF16 bytes of v, each rounded
// to the nearest bfloat16 (ties to even, as PyTorch rounds); NaNs stay
// NaNs.
func EncodeBFloat16(v []float32) []byte {
	b := make([]byte, 2*len(v))
	for i, x := range v {
		u := math.Float32bits(x)
		var h uint16
		if u&0x7fffffff > 0x7f800000 {
			h = uint16(u>>16) | 0x40 // quiet NaN
		} else {
			h = uint16((u + 0x7fff + (u>>16)&1) >> 16)
		}
		binary.LittleEndian.PutUint16(b[2*i:], h)
	}
	return b
}

// IsFloat reports whether d is a floating-point dtype (F64, F32, F16,
// BF16).
func (d DType) IsFloat() bool { return d == F64 || d == F32 || d == F16 || d == BF16 }

// ReadAsFloat32 reads a floating-point tensor of any float dtype into dst
// (len(dst) == numel): F32, F16 and BF16 exactly, F64 rounded to nearest.
// A shape other than shape (nil: any of len(dst) elements) or a tensor
// that is not floating-point is an error naming the tensor and the file.
func (sf *File) ReadAsFloat32(name string, shape []int, dst []float32) error {
	return readFloat(sf, name, shape, dst, DecodeAsFloat32)
}

// ReadAsFloat64 reads a floating-point tensor of any float dtype into dst
// exactly (every F32, F16 and BF16 value is a float64), with the checks of
// ReadAsFloat32.
func (sf *File) ReadAsFloat64(name string, shape []int, dst []float64) error {
	return readFloat(sf, name, shape, dst, DecodeAsFloat64)
}

// DecodeAsFloat32 decodes little-endian elements of float dtype dt (F64
// rounded to nearest, the others exactly) into dst
// (len(b) == dt.Size()*len(dst)); another dtype is an error.
func DecodeAsFloat32(dt DType, dst []float32, b []byte) error {
	switch dt {
	case F32:
		DecodeFloat32(dst, b)
	case F16:
		DecodeFloat16(dst, b)
	case BF16:
		DecodeBFloat16(dst, b)
	case F64:
		for i := range dst {
			dst[i] = float32(math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:])))
		}
	default:
		return fmt.Errorf("safetensors: dtype %s is not a float dtype", dt)
	}
	return nil
}

// DecodeAsFloat64 decodes little-endian elements of float dtype dt into
// dst exactly (len(b) == dt.Size()*len(dst)); another dtype is an error.
func DecodeAsFloat64(dt DType, dst []float64, b []byte) error {
	if dt == F64 {
		DecodeFloat64(dst, b)
		return nil
	}
	if !dt.IsFloat() {
		return fmt.Errorf("safetensors: dtype %s is not a float dtype", dt)
	}
	// Widen through float32 in chunks, without a second full-size slice.
	var tmp [1024]float32
	size := dt.Size()
	for off := 0; off < len(dst); off += len(tmp) {
		n := min(len(tmp), len(dst)-off)
		DecodeAsFloat32(dt, tmp[:n], b[off*size:(off+n)*size])
		for i, v := range tmp[:n] {
			dst[off+i] = float64(v)
		}
	}
	return nil
}

// readFloat checks a float tensor against shape and the destination's
// length and decodes it into dst with decode (see ReadAsFloat32).
func readFloat[T any](sf *File, name string, shape []int, dst []T, decode func(DType, []T, []byte) error) error {
	in, ok := sf.Info(name)
	if !ok {
		return fmt.Errorf("safetensors: %s: no tensor %q", sf.path, name)
	}
	if !in.DType.IsFloat() {
		return fmt.Errorf("safetensors: %s: tensor %q has dtype %s (want F64, F32, F16 or BF16)", sf.path, name, in.DType)
	}
	buf, err := sf.readN(name, in.DType, shape, len(dst))
	if err != nil {
		return err
	}
	return decode(in.DType, dst, buf)
}
