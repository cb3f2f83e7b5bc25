package cpu

import (
	"math"
	"testing"
)

// TestTanhfAccuracy sweeps tanhf over every float32 exponent from 2^-30
// to 2^4 (and beyond 9) against math.Tanh rounded to float32: at most 3
// ulp, and the signed zeros, infinities and NaN as math.Tanh gives them.
func TestTanhfAccuracy(t *testing.T) {
	worst, at := 0.0, float32(0)
	check := func(x float32) {
		want := float32(math.Tanh(float64(x)))
		got := tanhf(x)
		ulp := math.Abs(float64(math.Float32bits(got)) - float64(math.Float32bits(want)))
		if math.Signbit(float64(got)) != math.Signbit(float64(want)) {
			ulp = math.Inf(1)
		}
		if ulp > worst {
			worst, at = ulp, x
		}
	}
	for e := -30; e <= 5; e++ {
		base := float32(math.Ldexp(1, e))
		for i := range 4096 {
			x := base * (1 + float32(i)/4096)
			check(x)
			check(-x)
		}
	}
	for _, x := range []float32{0.625, 0.62499994, 8.999999, 9, 9.000001, 20, 1e30} {
		check(x)
		check(-x)
	}
	if worst > 3 {
		t.Errorf("tanhf is %v ulp from the rounded tanh at %v (tanhf %v, tanh %v)", worst, at, tanhf(at), float32(math.Tanh(float64(at))))
	}
	negZero := float32(math.Copysign(0, -1))
	for _, c := range []struct{ x, want float32 }{
		{0, 0}, {negZero, negZero}, {float32(math.Inf(1)), 1}, {float32(math.Inf(-1)), -1},
	} {
		if got := tanhf(c.x); math.Float32bits(got) != math.Float32bits(c.want) {
			t.Errorf("tanhf(%v) = %v, want %v", c.x, got, c.want)
		}
	}
	if nan := float32(math.NaN()); tanhf(nan) == tanhf(nan) {
		t.Error("tanhf(NaN) is not NaN")
	}
}

// BenchmarkTanh compares tanhf with math.Tanh in float64 on GELU-like
// inputs.
func BenchmarkTanh(b *testing.B) {
	x := make([]float32, 4096)
	for i := range x {
		x[i] = float32(i%400-200) * 0.02
	}
	b.Run("tanhf", func(b *testing.B) {
		var s float32
		for b.Loop() {
			for _, v := range x {
				s += tanhf(v)
			}
		}
		_ = s
	})
	b.Run("math.Tanh", func(b *testing.B) {
		var s float32
		for b.Loop() {
			for _, v := range x {
				s += float32(math.Tanh(float64(v)))
			}
		}
		_ = s
	})
}
