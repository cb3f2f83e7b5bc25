package device

import (
	"math"
	"testing"
)

func TestBFloat16Rounding(t *testing.T) {
	cases := []struct {
		in   float32
		want uint16
	}{
		{1, 0x3f80},
		{-2, 0xc000},
		{0, 0},
		{float32(math.Inf(1)), 0x7f80},
		{float32(math.Inf(-1)), 0xff80},
		// 1 + 2^-8 is halfway between bf16 1 and 1+2^-7: ties go to even (1).
		{1 + 1.0/256, 0x3f80},
		// 1 + 3*2^-8 is halfway between 1+2^-7 (odd) and 1+2^-6: up to even.
		{1 + 3.0/256, 0x3f82},
		// just above the halfway point rounds up
		{math.Float32frombits(0x3f808001), 0x3f81},
		// the largest float32 rounds to infinity
		{math.MaxFloat32, 0x7f80},
	}
	for _, c := range cases {
		if got := BFloat16FromFloat32(c.in); got != c.want {
			t.Errorf("BFloat16FromFloat32(%v) = %#04x, want %#04x", c.in, got, c.want)
		}
	}
	nan := BFloat16FromFloat32(float32(math.NaN()))
	if f := Float32FromBFloat16(nan); f == f {
		t.Errorf("NaN became %v", f)
	}
	// Every bf16 value widens exactly and rounds back to itself.
	for h := 0; h < 1<<16; h++ {
		f := Float32FromBFloat16(uint16(h))
		if f != f {
			continue
		}
		if back := BFloat16FromFloat32(f); back != uint16(h) {
			t.Fatalf("%#04x -> %v -> %#04x", h, f, back)
		}
	}
}
