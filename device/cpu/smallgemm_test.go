package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// refGemm is C = alpha op(A) op(B) + beta C in float64 (beta 0: C not read).
func refGemm(tA, tB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) []float64 {
	out := make([]float64, m*n)
	for i := range m {
		for j := range n {
			var s float64
			for l := range k {
				ai, bi := i*lda+l, l*ldb+j
				if tA {
					ai = l*lda + i
				}
				if tB {
					bi = j*ldb + l
				}
				av, bv := a[ai], b[bi]
				s += float64(av) * float64(bv)
			}
			s *= float64(alpha)
			if beta != 0 {
				s += float64(beta) * float64(c[i*ldc+j])
			}
			out[i*n+j] = s
		}
	}
	return out
}

// TestSmallGemm checks every transpose pair, ragged tiles (m, n not
// multiples of 6 and 16), k from 1, padded pitches, beta 0 over NaN, and
// both micro-kernels, against a float64 reference.
func TestSmallGemm(t *testing.T) {
	saved := hasAVX2FMA
	defer func() { hasAVX2FMA = saved }()
	rng := rand.New(rand.NewPCG(21, 22))
	fill := func(n int) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		return x
	}
	var w smallGemm
	for _, vector := range []bool{false, saved} {
		hasAVX2FMA = vector
		for _, sh := range [][3]int{{1, 1, 1}, {6, 16, 1}, {7, 17, 3}, {64, 64, 64}, {13, 100, 64}, {64, 37, 130}, {256, 64, 256}} {
			m, n, k := sh[0], sh[1], sh[2]
			for _, tA := range []bool{false, true} {
				for _, tB := range []bool{false, true} {
					for _, beta := range []float32{0, 0.5} {
						lda, ldb, ldc := k+3, n+1, n+5
						if tA {
							lda = m + 2
						}
						if tB {
							ldb = k + 4
						}
						rowsA, rowsB := m, k
						if tA {
							rowsA = k
						}
						if tB {
							rowsB = n
						}
						a, b, c := fill(rowsA*lda), fill(rowsB*ldb), fill(m*ldc)
						if beta == 0 {
							for i := range c {
								c[i] = float32(math.NaN())
							}
						}
						want := refGemm(tA, tB, m, n, k, 0.75, a, lda, b, ldb, beta, c, ldc)
						w.gemm(tA, tB, m, n, k, 0.75, a, lda, b, ldb, beta, c, ldc)
						name := fmt.Sprintf("avx2=%v %dx%dx%d tA=%v tB=%v beta=%v", vector, m, n, k, tA, tB, beta)
						for i := range m {
							for j := range n {
								got, w := float64(c[i*ldc+j]), want[i*n+j]
								if math.Abs(got-w) > 1e-5*math.Sqrt(float64(k))*(1+math.Abs(w)) || got != got {
									t.Fatalf("%s: C[%d,%d] = %v, want %v", name, i, j, got, w)
								}
							}
							// Padding columns of C stay untouched.
							for j := n; j < ldc && i*ldc+j < len(c); j++ {
								if beta != 0 && c[i*ldc+j] != c[i*ldc+j] {
									t.Fatalf("%s: padding C[%d,%d] written", name, i, j)
								}
							}
						}
					}
				}
			}
		}
	}
}

func BenchmarkSmallGemm(b *testing.B) {
	// The attention pair products at T 256, D 64.
	for _, s := range []struct {
		name    string
		m, n, k int
		tA, tB  bool
	}{
		{"QKt-256x256x64", 256, 256, 64, false, true},
		{"PV-256x64x256", 256, 64, 256, false, false},
		{"PtdO-256x64x256", 256, 64, 256, true, false},
	} {
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
		var w smallGemm
		flops := 2 * float64(s.m*s.n*s.k)
		b.Run(s.name+"/small", func(b *testing.B) {
			for b.Loop() {
				w.gemm(s.tA, s.tB, s.m, s.n, s.k, 1, a, lda, bb, ldb, 0, c, s.n)
			}
			b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
		b.Run(s.name+"/framework", func(b *testing.B) {
			for b.Loop() {
				Sgemm(s.tA, s.tB, s.m, s.n, s.k, 1, a, lda, bb, ldb, 0, c, s.n)
			}
			b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}
