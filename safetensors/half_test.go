package safetensors

import (
	"math"
	"path/filepath"
	"strings"
	"testing"
)

// TestFloat16Values checks F16 decoding and encoding on values whose bits
// IEEE 754 fixes: one, signs, the largest half, the smallest subnormal and
// normal, infinities, and rounding ties (to even) in the normal and
// subnormal ranges and at the overflow threshold.
func TestFloat16Values(t *testing.T) {
	cases := []struct {
		bits uint16
		v    float32
	}{
		{0x3c00, 1}, {0xc000, -2}, {0x0000, 0}, {0x3555, 0.333251953125},
		{0x7bff, 65504}, {0x0001, 1.0 / (1 << 24)}, {0x03ff, 1023.0 / (1 << 24)}, {0x0400, 1.0 / (1 << 14)},
		{0x7c00, float32(math.Inf(1))}, {0xfc00, float32(math.Inf(-1))},
	}
	for _, c := range cases {
		got := make([]float32, 1)
		DecodeFloat16(got, []byte{byte(c.bits), byte(c.bits >> 8)})
		if got[0] != c.v {
			t.Errorf("decode %#04x: %v, want %v", c.bits, got[0], c.v)
		}
		if b := float32to16(c.v); b != c.bits {
			t.Errorf("encode %v: %#04x, want %#04x", c.v, b, c.bits)
		}
	}
	rounding := []struct {
		v    float64
		bits uint16
	}{
		{1 + 1.0/2048, 0x3c00},           // halfway between 1 and 1+2^-10: even (1)
		{1 + 3.0/2048, 0x3c02},           // halfway, the even neighbour above
		{1 + 1.0/2048 + 1e-7, 0x3c01},    // past halfway
		{65519, 0x7bff}, {65520, 0x7c00}, // the overflow threshold rounds to infinity
		{1.0 / (1 << 25), 0x0000},  // half the smallest subnormal: even (zero)
		{3.0 / (1 << 25), 0x0002},  // 1.5 subnormal units: even (2)
		{-1.0 / (1 << 26), 0x8000}, // negative underflow keeps the sign
		{1e9, 0x7c00},
	}
	for _, c := range rounding {
		if b := float32to16(float32(c.v)); b != c.bits {
			t.Errorf("encode %v: %#04x, want %#04x", c.v, b, c.bits)
		}
	}
	if v := float16to32(0x7e00); !math.IsNaN(float64(v)) {
		t.Errorf("decode 0x7e00: %v, want NaN", v)
	}
	if b := float32to16(float32(math.NaN())); b&0x7c00 != 0x7c00 || b&0x3ff == 0 {
		t.Errorf("encode NaN: %#04x, want a NaN", b)
	}
}

// TestHalfRoundTrips decodes every F16 and BF16 bit pattern and encodes
// it back: each non-NaN value must return its own bits, and every NaN
// a NaN.
func TestHalfRoundTrips(t *testing.T) {
	for h := range 1 << 16 {
		b := []byte{byte(h), byte(h >> 8)}
		for _, c := range []struct {
			name   string
			decode func([]float32, []byte)
			encode func([]float32) []byte
		}{{"F16", DecodeFloat16, EncodeFloat16}, {"BF16", DecodeBFloat16, EncodeBFloat16}} {
			v := make([]float32, 1)
			c.decode(v, b)
			back := c.encode(v)
			if math.IsNaN(float64(v[0])) {
				got := make([]float32, 1)
				c.decode(got, back)
				if !math.IsNaN(float64(got[0])) {
					t.Fatalf("%s %#04x: NaN encodes to %x, not a NaN", c.name, h, back)
				}
				continue
			}
			if back[0] != b[0] || back[1] != b[1] {
				t.Fatalf("%s %#04x: decodes to %v, which encodes to %x", c.name, h, v[0], back)
			}
		}
	}
}

// TestBFloat16Rounding checks BF16 rounding to nearest, ties to even.
func TestBFloat16Rounding(t *testing.T) {
	cases := []struct {
		v    float32
		bits uint16
	}{
		{1, 0x3f80}, {-2, 0xc000},
		{1 + 1.0/256, 0x3f80}, // halfway: even (1)
		{1 + 3.0/256, 0x3f82}, // halfway: even above
		{1 + 1.0/256 + 1.0/65536, 0x3f81},
		{math.MaxFloat32, 0x7f80}, // rounds up to infinity
	}
	for _, c := range cases {
		b := EncodeBFloat16([]float32{c.v})
		if got := uint16(b[0]) | uint16(b[1])<<8; got != c.bits {
			t.Errorf("encode %v: %#04x, want %#04x", c.v, got, c.bits)
		}
	}
}

// TestReadAsFloat reads one tensor stored as F64, F32, F16 and BF16 into
// float32 and float64, and checks the errors for a non-float tensor and a
// wrong shape.
func TestReadAsFloat(t *testing.T) {
	v := []float32{1, -0.5, 3.140625, 1 << 10} // exact in every float dtype
	path := filepath.Join(t.TempDir(), "m.safetensors")
	shape := []int{2, 2}
	err := Save(path, []Tensor{
		{Name: "f64", DType: F64, Shape: shape, Data: EncodeFloat64([]float64{1, -0.5, 3.140625, 1 << 10})},
		{Name: "f32", DType: F32, Shape: shape, Data: EncodeFloat32(v)},
		{Name: "f16", DType: F16, Shape: shape, Data: EncodeFloat16(v)},
		{Name: "bf16", DType: BF16, Shape: shape, Data: EncodeBFloat16(v)},
		{Name: "ids", DType: I32, Shape: shape, Data: EncodeInt32([]int32{1, 2, 3, 4})},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, name := range []string{"f64", "f32", "f16", "bf16"} {
		g32, g64 := make([]float32, 4), make([]float64, 4)
		if err := f.ReadAsFloat32(name, shape, g32); err != nil {
			t.Fatal(err)
		}
		if err := f.ReadAsFloat64(name, nil, g64); err != nil {
			t.Fatal(err)
		}
		for i := range v {
			if g32[i] != v[i] || g64[i] != float64(v[i]) {
				t.Errorf("%s[%d]: %v and %v, want %v", name, i, g32[i], g64[i], v[i])
			}
		}
	}
	for _, c := range []struct {
		name  string
		shape []int
		want  string
	}{
		{"ids", shape, `tensor "ids" has dtype I32 (want F64, F32, F16 or BF16)`},
		{"f16", []int{4}, `tensor "f16" has shape [2 2] (want [4])`},
		{"nope", nil, `no tensor "nope"`},
	} {
		err := f.ReadAsFloat32(c.name, c.shape, make([]float32, 4))
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: error %v, want one naming %s and %q", c.name, err, path, c.want)
		}
	}
}
