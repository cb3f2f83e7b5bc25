package cpu

import (
	"fmt"
	"testing"
)

// nativeBenchShapes are the model's products: projections, a square, the
// LM head's three products at d 128 and 512 (forward X W^T, dX = dY W,
// dW^T = X^T dY) and attention's per-pair products at T 256 and 2048.
var nativeBenchShapes = []struct {
	m, n, k int
	tA, tB  bool
}{
	{2048, 768, 768, false, false},
	{512, 512, 512, false, false},
	{2048, 50257, 128, false, true},
	{2048, 128, 50257, false, false},
	{128, 50257, 2048, true, false},
	{256, 256, 64, false, true},
	{256, 64, 256, false, false},
	{256, 64, 256, true, false},
}

// BenchmarkNative compares the native GEMM (best kernel) with OpenBLAS on
// the same operands.
//
//	go test -run '^$' -bench Native ./device/cpu/
func BenchmarkNative(b *testing.B) {
	initGemm()
	for _, s := range nativeBenchShapes {
		lda, ldb := s.k, s.n
		if s.tA {
			lda = s.m
		}
		if s.tB {
			ldb = s.k
		}
		a, bb, c := make([]float32, s.m*s.k), make([]float32, s.k*s.n), make([]float32, s.m*s.n)
		for i := range a {
			a[i] = float32(i%7) - 3
		}
		for i := range bb {
			bb[i] = float32(i%5) - 2
		}
		flops := 2 * float64(s.m) * float64(s.n) * float64(s.k)
		tr := map[bool]string{false: "n", true: "t"}
		name := fmt.Sprintf("%dx%dx%d:%s%s", s.m, s.n, s.k, tr[s.tA], tr[s.tB])
		b.Run(name+"/native", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				sgemmNative(nativeBest, Threads(), s.tA, s.tB, s.m, s.n, s.k, 1, a, lda, bb, ldb, 0, c, s.n)
			}
			b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
		if blasLib != nil {
			b.Run(name+"/openblas", func(b *testing.B) {
				for b.Loop() {
					blasLib.gemm(s.tA, s.tB, s.m, s.n, s.k, 1, a, lda, bb, ldb, 0, c, s.n)
				}
				b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

// BenchmarkNativeKernels times every kernel this CPU has (the AVX2 and Go
// kernels are forced here as in the tests) and gonum on two shapes.
//
//	go test -run '^$' -bench NativeKernels ./device/cpu/
func BenchmarkNativeKernels(b *testing.B) {
	for _, s := range [][3]int{{512, 512, 512}, {2048, 768, 768}} {
		m, n, k := s[0], s[1], s[2]
		a, bb, c := make([]float32, m*k), make([]float32, k*n), make([]float32, m*n)
		for i := range a {
			a[i] = float32(i%7) - 3
		}
		for i := range bb {
			bb[i] = float32(i%5) - 2
		}
		flops := 2 * float64(m) * float64(n) * float64(k)
		name := fmt.Sprintf("%dx%dx%d", m, n, k)
		for _, kn := range nativeKernels {
			b.Run(name+"/"+kn.name, func(b *testing.B) {
				for b.Loop() {
					sgemmNative(kn, Threads(), false, false, m, n, k, 1, a, k, bb, n, 0, c, n)
				}
				b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
		b.Run(name+"/gonum", func(b *testing.B) {
			for b.Loop() {
				sgemmWith(gemmGo, Threads(), false, false, m, n, k, 1, a, k, bb, n, 0, c, n)
			}
			b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

// bf16BenchShapes are a GPT-2-small projection and the autocast products
// of the paper model's blocks at d 128 and 256 (8 x 256 tokens, MLP 4d):
// forward X W^T (nt), dX = dY W (nn), dW = dY^T X (tn).
var bf16BenchShapes = []struct {
	m, n, k int
	tA, tB  bool
}{
	{2048, 768, 768, false, false},
	{2048, 128, 128, false, true},
	{2048, 128, 128, false, false},
	{128, 128, 2048, true, false},
	{2048, 512, 128, false, true},
	{2048, 128, 512, false, false},
	{512, 128, 2048, true, false},
	{128, 512, 2048, true, false},
	{2048, 256, 256, false, true},
	{2048, 1024, 256, false, true},
	{2048, 256, 1024, false, false},
	{1024, 256, 2048, true, false},
}

// BenchmarkNativeBF16 times, on the model's products, the float32 native
// GEMM, each bfloat16 kernel this CPU has, and the widening path (bfloat16
// operands widened to float32, then the float32 GEMM, as Device.Gemm runs
// them without a kernel), on the same values, in turn per shape.
//
//	go test -run '^$' -bench NativeBF16 ./device/cpu/
func BenchmarkNativeBF16(b *testing.B) {
	initGemm()
	for _, s := range bf16BenchShapes {
		lda, ldb := s.k, s.n
		if s.tA {
			lda = s.m
		}
		if s.tB {
			ldb = s.k
		}
		// The operands, made by the first sub-benchmark -bench selects.
		var a, bb, c []float32
		var a16, b16 []uint16
		operands := func() {
			if a != nil {
				return
			}
			a, bb, c = make([]float32, s.m*s.k), make([]float32, s.k*s.n), make([]float32, s.m*s.n)
			for i := range a {
				a[i] = float32(i%7) - 3
			}
			for i := range bb {
				bb[i] = float32(i%5) - 2
			}
			a16, b16 = make([]uint16, len(a)), make([]uint16, len(bb))
			toBFloat16(a16, a)
			toBFloat16(b16, bb)
		}
		flops := 2 * float64(s.m) * float64(s.n) * float64(s.k)
		tr := map[bool]string{false: "n", true: "t"}
		name := fmt.Sprintf("%dx%dx%d:%s%s", s.m, s.n, s.k, tr[s.tA], tr[s.tB])
		report := func(b *testing.B) {
			b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		}
		b.Run(name+"/float32", func(b *testing.B) {
			operands()
			for b.Loop() {
				sgemmNative(nativeBest, Threads(), s.tA, s.tB, s.m, s.n, s.k, 1, a, lda, bb, ldb, 0, c, s.n)
			}
			report(b)
		})
		for _, kb := range bf16Kernels {
			b.Run(name+"/"+kb.name, func(b *testing.B) {
				operands()
				b.ReportAllocs()
				for b.Loop() {
					bf16Gemm(kb, Threads(), s.tA, s.tB, s.m, s.n, s.k, 1, a16, lda, b16, ldb, 0, c, s.n)
				}
				report(b)
			})
		}
		b.Run(name+"/widen", func(b *testing.B) {
			operands()
			af, bf := make([]float32, len(a16)), make([]float32, len(b16))
			for b.Loop() {
				fromBFloat16(af, a16)
				fromBFloat16(bf, b16)
				sgemmNative(nativeBest, Threads(), s.tA, s.tB, s.m, s.n, s.k, 1, af, lda, bf, ldb, 0, c, s.n)
			}
			report(b)
		})
	}
}
