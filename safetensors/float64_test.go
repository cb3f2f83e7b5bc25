package safetensors

import (
	"math"
	"testing"
)

// TestFloat64Bytes checks that F64 encoding is little-endian IEEE 754 and
// round-trips values a float32 cannot hold.
func TestFloat64Bytes(t *testing.T) {
	v := []float64{1.0 / 3, -math.Pi, math.SmallestNonzeroFloat64, math.Inf(-1)}
	b := EncodeFloat64(v)
	if len(b) != 8*len(v) || b[7] != 0x3f || b[6] != 0xd5 {
		t.Fatalf("bytes of 1/3: % x, want ... d5 3f", b[:8])
	}
	got := make([]float64, len(v))
	DecodeFloat64(got, b)
	for i := range v {
		if got[i] != v[i] {
			t.Fatalf("element %d: %v, want %v", i, got[i], v[i])
		}
	}
}
