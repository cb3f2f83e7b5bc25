package cpu

import (
	"math"
	"testing"
)

func TestExpfAccuracy(t *testing.T) {
	worst := 0.0
	for x := float32(-87.3); x < 88.7; x += 0.0137 {
		want := math.Exp(float64(x))
		got := float64(expf(x))
		if rel := math.Abs(got-want) / want; rel > worst {
			worst = rel
		}
	}
	// 2^-22 ~ 2.4e-7: a few float32 ulps.
	if worst > 2.4e-7 {
		t.Fatalf("max relative error %.3g", worst)
	}
	special := []struct{ x, want float32 }{
		{0, 1}, {-100, 0}, {float32(math.Inf(-1)), 0}, {100, float32(math.Inf(1))}, {float32(math.Inf(1)), float32(math.Inf(1))},
	}
	for _, s := range special {
		if got := expf(s.x); got != s.want {
			t.Errorf("expf(%v) = %v, want %v", s.x, got, s.want)
		}
	}
	if nan := float32(math.NaN()); expf(nan) == expf(nan) {
		t.Error("expf(NaN) is not NaN")
	}
}

func BenchmarkExpf(b *testing.B) {
	x := make([]float32, 4096)
	for i := range x {
		x[i] = float32(i%200) * -0.05
	}
	b.Run("expf", func(b *testing.B) {
		var s float32
		for b.Loop() {
			for _, v := range x {
				s += expf(v)
			}
		}
		_ = s
		b.ReportMetric(float64(b.N*len(x))/b.Elapsed().Seconds()/1e6, "Mexp/s")
	})
	b.Run("math.Exp", func(b *testing.B) {
		var s float32
		for b.Loop() {
			for _, v := range x {
				s += float32(math.Exp(float64(v)))
			}
		}
		_ = s
		b.ReportMetric(float64(b.N*len(x))/b.Elapsed().Seconds()/1e6, "Mexp/s")
	})
}

func TestExpShiftSum(t *testing.T) {
	src := []float32{0, -1, -2.5, -30, -90, -200, 3, float32(math.Inf(-1))}
	dst := make([]float32, len(src))
	sum := expShiftSum(dst, src, 3)
	var want float64
	for i, v := range src {
		w := math.Exp(float64(v) - 3)
		if float64(v)-3 < -87.33 {
			w = 0
		}
		want += w
		if math.Abs(float64(dst[i])-w) > 2.4e-7*w {
			t.Errorf("exp(%v-3) = %v, want %v", v, dst[i], w)
		}
	}
	if math.Abs(sum-want) > 1e-6*want {
		t.Errorf("sum %v, want %v", sum, want)
	}
	nan := []float32{float32(math.NaN())}
	if s := expShiftSum(nan, nan, 0); s == s {
		t.Error("NaN did not propagate")
	}
}

func BenchmarkExpShiftSum(b *testing.B) {
	x := make([]float32, 4096)
	for i := range x {
		x[i] = float32(i%200) * -0.05
	}
	dst := make([]float32, len(x))
	for b.Loop() {
		expShiftSum(dst, x, 0.5)
	}
	b.ReportMetric(float64(b.N*len(x))/b.Elapsed().Seconds()/1e6, "Mexp/s")
}

func TestExpShiftSumAccuracySweep(t *testing.T) {
	saved := hasAVX2FMA
	defer func() { hasAVX2FMA = saved }()
	for _, vector := range []bool{false, saved} {
		hasAVX2FMA = vector
		expShiftSumSweep(t)
	}
}

func expShiftSumSweep(t *testing.T) {
	var src []float32
	for x := float32(-87.3); x < 88; x += 0.00731 {
		src = append(src, x)
	}
	dst := make([]float32, len(src))
	expShiftSum(dst, src, 0)
	worst := 0.0
	for i, x := range src {
		want := math.Exp(float64(x))
		if rel := math.Abs(float64(dst[i])-want) / want; rel > worst {
			worst = rel
		}
	}
	if worst > 2.4e-7 { // 2^-22: a few float32 ulps
		t.Fatalf("vector kernel %v: max relative error %.3g", hasAVX2FMA, worst)
	}
}
