package cpu

import (
	"math"
	"testing"
)

// TestSoftmaxKernelsAVX512MatchAVX2: the AVX-512 forms of the softmax
// kernels give their AVX2 forms' results bit for bit (every stored
// exponential, the float64 sum, the maximum, the scaled values), at
// every length that is a multiple of 8 around the 16-wide step and at the
// vocabulary's, with NaNs, infinities, underflow and signed zeros.
func TestSoftmaxKernelsAVX512MatchAVX2(t *testing.T) {
	if !hasAVX512Softmax {
		t.Skip("no AVX-512 on this machine")
	}
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	for _, n := range []int{8, 16, 24, 32, 40, 56, 1000, 50256} {
		for _, special := range []float32{0, nan, inf, -inf, -200, float32(math.Copysign(0, -1))} {
			src := make([]float32, n)
			for i := range src {
				src[i] = float32(math.Sin(float64(i)*0.731))*30 - float32(i%7)
			}
			src[n/3] = special
			for _, store := range []bool{false, true} {
				var d8, d16 []float32
				var p8, p16 *float32
				if store {
					d8, d16 = make([]float32, n), make([]float32, n)
					p8, p16 = &d8[0], &d16[0]
				}
				s8 := expShiftSum8(p8, &src[0], n, 1.25)
				s16 := expShiftSum16(p16, &src[0], n, 1.25, &src[0])
				if math.Float64bits(s8) != math.Float64bits(s16) && !(s8 != s8 && s16 != s16) {
					t.Fatalf("n %d special %v store %v: sum %v (AVX-512), want %v (AVX2)", n, special, store, s16, s8)
				}
				for i := range d8 {
					if math.Float32bits(d8[i]) != math.Float32bits(d16[i]) && !(d8[i] != d8[i] && d16[i] != d16[i]) {
						t.Fatalf("n %d special %v: exp[%d] %v (AVX-512), want %v (AVX2)", n, special, i, d16[i], d8[i])
					}
				}
			}
			m8, m16 := max8(&src[0], n), max16(&src[0], n)
			if math.Float32bits(m8) != math.Float32bits(m16) && !(m8 != m8 && m16 != m16) {
				t.Fatalf("n %d special %v: max %v (AVX-512), want %v (AVX2)", n, special, m16, m8)
			}
			x8, x16 := append([]float32(nil), src...), append([]float32(nil), src...)
			scale8(&x8[0], n, -0.37)
			scale16(&x16[0], n, -0.37)
			for i := range x8 {
				if math.Float32bits(x8[i]) != math.Float32bits(x16[i]) {
					t.Fatalf("n %d: scaled[%d] %v (AVX-512), want %v (AVX2)", n, i, x16[i], x8[i])
				}
			}
		}
	}
}

// TestRowMaxAVX512 checks max16 against the largest element where the
// maximum sits in each part of the row: the first 16, the 16-wide loop,
// the last 8.
func TestRowMaxAVX512(t *testing.T) {
	if !hasAVX512Softmax {
		t.Skip("no AVX-512 on this machine")
	}
	for _, n := range []int{8, 16, 24, 40} {
		for at := range n {
			z := make([]float32, n)
			for i := range z {
				z[i] = -float32(i%5) - 1
			}
			z[at] = 3
			if got := max16(&z[0], n); got != 3 {
				t.Fatalf("n %d max at %d: %v, want 3", n, at, got)
			}
			z[at] = float32(math.NaN())
			if got := max16(&z[0], n); got == got {
				t.Fatalf("n %d NaN at %d: %v, want NaN", n, at, got)
			}
		}
	}
}
