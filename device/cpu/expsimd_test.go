package cpu

import (
	"math"
	"testing"
)

// TestExpShiftSumVectorKernel checks the vector kernel on its own (where
// the machine has one): every element against math.Exp, NaN propagation,
// underflow to zero, the sum, and storing or not storing.
func TestExpShiftSumVectorKernel(t *testing.T) {
	src := make([]float32, 0, 40000)
	for x := float32(-95); x < 4; x += 0.0031 {
		src = append(src, x)
	}
	src = append(src, float32(math.Inf(-1)), float32(math.NaN()), 0, -1)
	for len(src)%8 != 0 {
		src = append(src, -2)
	}
	dst := make([]float32, len(src))
	done, sum := expShiftSumFast(dst, src, nil, 1.5)
	if done == 0 {
		t.Skip("no AVX2+FMA on this machine: the scalar path is the one in use (tested elsewhere)")
	}
	if done != len(src) {
		t.Fatalf("did %d of %d", done, len(src))
	}
	var want float64
	for i, v := range src {
		x := float64(v - 1.5) // the kernel subtracts in float32
		if math.IsNaN(x) {
			if !math.IsNaN(float64(dst[i])) {
				t.Fatalf("exp(NaN) = %v", dst[i])
			}
			continue
		}
		w := math.Exp(x)
		if x <= -87.3365 {
			w = 0
		}
		if w == 0 {
			if dst[i] != 0 && float64(dst[i]) > 1e-37 {
				t.Fatalf("exp(%v) = %v, want underflow to 0", x, dst[i])
			}
			continue
		}
		want += w
		if rel := math.Abs(float64(dst[i])-w) / w; rel > 2.4e-7 {
			t.Fatalf("exp(%v) = %v, want %v (rel %.3g)", x, dst[i], w, rel)
		}
	}
	if !math.IsNaN(sum) {
		t.Errorf("sum %v: a NaN input must make the sum NaN", sum)
	}
	// Without the NaN: the sum, and the no-store form.
	for i := range src {
		if src[i] != src[i] {
			src[i] = -3
			want += math.Exp(float64(float32(-3) - 1.5))
		}
	}
	_, sum = expShiftSumFast(nil, src, nil, 1.5)
	_, stored := expShiftSumFast(dst, src, nil, 1.5)
	var direct float64
	for _, v := range dst {
		direct += float64(v)
	}
	if sum != stored || math.Abs(sum-direct) > 1e-12*direct {
		t.Errorf("sums: no-store %v, store %v, of stored values %v", sum, stored, direct)
	}
}

func BenchmarkExpShiftSumScalar(b *testing.B) {
	x := make([]float32, 4096)
	for i := range x {
		x[i] = float32(i%200) * -0.05
	}
	dst := make([]float32, len(x))
	saved := hasAVX2FMA
	hasAVX2FMA = false
	defer func() { hasAVX2FMA = saved }()
	for b.Loop() {
		expShiftSum(dst, x, 0.5)
	}
	b.ReportMetric(float64(b.N*len(x))/b.Elapsed().Seconds()/1e6, "Mexp/s")
}

func TestRowMaxVectorAndScalarAgree(t *testing.T) {
	saved := hasAVX2FMA
	defer func() { hasAVX2FMA = saved }()
	nan := float32(math.NaN())
	for _, n := range []int{1, 7, 8, 9, 16, 17, 1000, 50257} {
		for _, at := range []int{0, n / 2, n - 1} {
			z := make([]float32, n)
			for i := range z {
				z[i] = float32(math.Sin(float64(i)*0.37)) - float32(i%5)
			}
			want := float32(math.Inf(-1))
			for _, v := range z {
				want = max(want, v)
			}
			z[at] = 7 // a unique maximum at a chosen place
			want = 7
			for _, vector := range []bool{false, saved} {
				hasAVX2FMA = vector
				if got := rowMax(z); got != want {
					t.Fatalf("n %d max at %d vector %v: rowMax = %v, want %v", n, at, vector, got, want)
				}
				z[at] = nan
				if got := rowMax(z); got == got {
					t.Fatalf("n %d NaN at %d vector %v: rowMax = %v, want NaN", n, at, vector, got)
				}
				z[at] = 7
			}
		}
	}
}

// TestScaleInPlaceVector: the AVX2 bulk and the scalar tail give the
// products bit for bit (one rounding each), for every length around the
// vector width.
func TestScaleInPlaceVector(t *testing.T) {
	for n := range 41 {
		for _, s := range []float32{0.3, -2, 0} {
			x := make([]float32, n)
			for i := range x {
				x[i] = float32(i)*1.37 - 20
			}
			want := make([]float32, n)
			for i := range x {
				want[i] = x[i] * s
			}
			scaleInPlace(x, s)
			for i := range x {
				if math.Float32bits(x[i]) != math.Float32bits(want[i]) {
					t.Fatalf("n %d s %v: x[%d] = %v, want %v", n, s, i, x[i], want[i])
				}
			}
		}
	}
}
