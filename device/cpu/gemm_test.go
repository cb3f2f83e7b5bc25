package cpu_test

import (
	"fmt"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/cpu"
)

// refGemm computes one row-major C = alpha*op(A)*op(B) + beta*C in float64
// in place on c. With beta == 0, C is not read. It also returns, for each
// element of C it writes, the sum of the magnitudes of the terms, which
// scales the rounding error bound.
func refGemm(tA, tB bool, m, n, k int, alpha float64, a []float32, lda int, b []float32, ldb int, beta float64, c []float64, ldc int) (mag []float64) {
	at := func(i, p int) float64 { // op(A)[i,p]
		if tA {
			return float64(a[p*lda+i])
		}
		return float64(a[i*lda+p])
	}
	bt := func(p, j int) float64 { // op(B)[p,j]
		if tB {
			return float64(b[j*ldb+p])
		}
		return float64(b[p*ldb+j])
	}
	mag = make([]float64, len(c))
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var s, sa float64
			for p := 0; p < k; p++ {
				s += at(i, p) * bt(p, j)
				sa += math.Abs(at(i, p) * bt(p, j))
			}
			s *= alpha
			sa *= math.Abs(alpha)
			if beta != 0 {
				s += beta * c[i*ldc+j]
				sa += math.Abs(beta * c[i*ldc+j])
			}
			c[i*ldc+j] = s
			mag[i*ldc+j] = sa
		}
	}
	return mag
}

// gemmCase is one strided batched product. Pads are extra columns beyond
// the stored width (lda = width + pad); gaps are extra elements between
// batch entries. Elements in pads and gaps of C must not change.
type gemmCase struct {
	tA, tB       bool
	m, n, k      int
	batch        int
	alpha, beta  float32
	padA, padB   int
	padC         int
	gap          int
	nanC         bool // fill C with NaN (only meaningful with beta 0)
	name         string
	zeroStrides  bool // batch > 1 sharing A and B (stride 0), as in a broadcast weight
	cInitialized bool // C starts random (otherwise zero)
}

func (c gemmCase) String() string {
	s := fmt.Sprintf("%s/tA=%v,tB=%v/%dx%dx%d/b%d/alpha%g,beta%g", c.name, c.tA, c.tB, c.m, c.n, c.k, c.batch, c.alpha, c.beta)
	if c.padA+c.padB+c.padC+c.gap > 0 {
		s += fmt.Sprintf("/pad%d,%d,%d,gap%d", c.padA, c.padB, c.padC, c.gap)
	}
	return s
}

func gemmCases() []gemmCase {
	var cs []gemmCase
	for _, tA := range []bool{false, true} {
		for _, tB := range []bool{false, true} {
			for _, s := range [][3]int{{1, 1, 1}, {17, 33, 5}, {5, 17, 33}, {33, 5, 17}, {64, 48, 80}, {3, 130, 7}} {
				cs = append(cs,
					gemmCase{name: "plain", tA: tA, tB: tB, m: s[0], n: s[1], k: s[2], alpha: 1, beta: 0},
					gemmCase{name: "scaled", tA: tA, tB: tB, m: s[0], n: s[1], k: s[2], alpha: -0.5, beta: 2, cInitialized: true},
				)
			}
			cs = append(cs,
				gemmCase{name: "strided", tA: tA, tB: tB, m: 17, n: 33, k: 5, batch: 3, alpha: 1.5, beta: 0, padA: 3, padB: 2, padC: 5, gap: 7},
				gemmCase{name: "accumulate", tA: tA, tB: tB, m: 9, n: 11, k: 13, batch: 2, alpha: 1, beta: 1, padA: 1, padB: 4, padC: 2, gap: 3, cInitialized: true},
				gemmCase{name: "nan-beta0", tA: tA, tB: tB, m: 7, n: 6, k: 5, batch: 2, alpha: 1, beta: 0, padC: 3, gap: 2, nanC: true},
				gemmCase{name: "broadcast", tA: tA, tB: tB, m: 6, n: 10, k: 4, batch: 3, alpha: 1, beta: 0.5, padC: 1, zeroStrides: true, cInitialized: true},
			)
		}
	}
	cs = append(cs,
		gemmCase{name: "m0", m: 0, n: 5, k: 3, alpha: 1, beta: 0},
		gemmCase{name: "n0", m: 5, n: 0, k: 3, alpha: 1, beta: 0},
		gemmCase{name: "k0-beta0-nan", m: 4, n: 5, k: 0, alpha: 1, beta: 0, nanC: true},
		gemmCase{name: "k0-scale", m: 4, n: 5, k: 0, batch: 2, alpha: 1, beta: 0.5, gap: 1, cInitialized: true},
		gemmCase{name: "alpha0", tA: true, m: 4, n: 5, k: 3, alpha: 0, beta: -1, cInitialized: true},
		gemmCase{name: "alpha0-beta0-nan", tB: true, m: 4, n: 5, k: 3, alpha: 0, beta: 0, nanC: true},
		gemmCase{name: "batch0-is-1", m: 3, n: 4, k: 2, batch: 0, alpha: 1, beta: 0},
	)
	return cs
}

// storage returns the buffer size and batch stride of a batch of rows x cols
// matrices with the given pad and gap.
func storage(batch, rows, cols, pad, gap int, zeroStride bool) (size, ld, stride int) {
	ld = max(cols+pad, 1)
	stride = rows*ld + gap
	if zeroStride {
		stride = 0
	}
	size = (max(batch, 1)-1)*stride + rows*ld
	return size, ld, stride
}

func TestGemm(t *testing.T) {
	t.Logf("GEMM: %s", cpu.GemmName())
	for ci, c := range gemmCases() {
		t.Run(c.String(), func(t *testing.T) {
			r := newRand(uint64(ci) + 1)
			rowsA, colsA := c.m, c.k
			if c.tA {
				rowsA, colsA = colsA, rowsA
			}
			rowsB, colsB := c.k, c.n
			if c.tB {
				rowsB, colsB = colsB, rowsB
			}
			nA, lda, sA := storage(c.batch, rowsA, colsA, c.padA, c.gap, c.zeroStrides)
			nB, ldb, sB := storage(c.batch, rowsB, colsB, c.padB, c.gap, c.zeroStrides)
			nC, ldc, sC := storage(c.batch, c.m, c.n, c.padC, c.gap, false)
			a := randSlice(r, nA, 1)
			b := randSlice(r, nB, 1)
			c0 := make([]float32, nC)
			switch {
			case c.nanC:
				for i := range c0 {
					c0[i] = float32(math.NaN())
				}
			case c.cInitialized:
				c0 = randSlice(r, nC, 1)
			}
			// Distinctive values in pads and gaps make stray writes visible.
			isOutside := make([]bool, nC)
			for i := range c0 {
				isOutside[i] = true
			}
			for bi := 0; bi < max(c.batch, 1); bi++ {
				for i := 0; i < c.m; i++ {
					for j := 0; j < c.n; j++ {
						isOutside[bi*sC+i*ldc+j] = false
					}
				}
			}
			for i := range c0 {
				if isOutside[i] {
					c0[i] = 12345
				}
			}

			want := f64(c0)
			mag := make([]float64, nC)
			for bi := 0; bi < max(c.batch, 1); bi++ {
				var bm []float64
				if nC > 0 {
					bm = refGemm(c.tA, c.tB, c.m, c.n, c.k, float64(c.alpha),
						a[bi*sA:], lda, b[bi*sB:], ldb, float64(c.beta), want[bi*sC:], ldc)
				}
				for i, v := range bm {
					if v != 0 {
						mag[bi*sC+i] = v
					}
				}
			}

			A, B, C := buf(a), buf(b), buf(c0)
			dev.Gemm(device.GemmArgs{
				TransA: c.tA, TransB: c.tB, M: c.m, N: c.n, K: c.k,
				Alpha: c.alpha, Beta: c.beta,
				A: A, LDA: lda, StrideA: sA,
				B: B, LDB: ldb, StrideB: sB,
				C: C, LDC: ldc, StrideC: sC,
				Batch: c.batch,
			})
			got := host(C)
			// gamma_{k+2} bound: k products summed plus alpha and beta
			// terms, each rounding at most once, relative to the sum of
			// magnitudes. Blocked and FMA kernels stay within it.
			checkCloseTol(t, "C", got, want, func(i int) float64 {
				return float64(c.k+2)*2*u32*mag[i] + 1e-30
			})
			for i, v := range got {
				if isOutside[i] && v != 12345 {
					t.Fatalf("C[%d] outside the matrices changed to %v", i, v)
				}
			}
			checkEqual(t, "A unchanged", host(A), a)
			checkEqual(t, "B unchanged", host(B), b)
		})
	}
}

// TestGemmViews checks that buffers made by Slice work as GEMM operands
// (the tensor layer passes views).
func TestGemmViews(t *testing.T) {
	r := newRand(99)
	m, n, k := 6, 7, 8
	a := randSlice(r, 10+m*k, 1)
	b := randSlice(r, 3+k*n, 1)
	c := make([]float32, 5+m*n)
	A, B, C := buf(a), buf(b), buf(c)
	dev.Gemm(device.GemmArgs{M: m, N: n, K: k, Alpha: 1,
		A: A.Slice(10, m*k), LDA: k, B: B.Slice(3, k*n), LDB: n, C: C.Slice(5, m*n), LDC: n})
	want := make([]float64, m*n)
	mag := refGemm(false, false, m, n, k, 1, a[10:], k, b[3:], n, 0, want, n)
	got := host(C)
	checkEqual(t, "C prefix", got[:5], make([]float32, 5))
	checkCloseTol(t, "C", got[5:], want, func(i int) float64 { return float64(k+2) * 2 * u32 * mag[i] })
}

// TestSgemmOpenBLASAgrees checks the direct OpenBLAS entry point against a
// float64 reference (skipped when OpenBLAS cannot be loaded).
func TestSgemmOpenBLASAgrees(t *testing.T) {
	r := newRand(7)
	m, n, k := 37, 29, 41
	a, b := randSlice(r, m*k, 1), randSlice(r, n*k, 1)
	c1 := make([]float32, m*n)
	if !cpu.SgemmOpenBLAS(false, true, m, n, k, 1, a, k, b, k, 0, c1, n) {
		if cpu.GemmName() == "openblas" {
			t.Fatal("SgemmOpenBLAS reported false while the GEMM in use is OpenBLAS")
		}
		t.Skip("OpenBLAS not loaded")
	}
	want := make([]float64, m*n)
	mag := refGemm(false, true, m, n, k, 1, a, k, b, k, 0, want, n)
	checkCloseTol(t, "C", c1, want, func(i int) float64 { return float64(k+2) * 2 * u32 * mag[i] })
}

// TestGemmThreads checks a product large enough for OpenBLAS (or gonum) to
// split across threads, at several thread settings.
func TestGemmThreads(t *testing.T) {
	r := newRand(3)
	m, n, k := 96, 160, 200
	a, b := randSlice(r, m*k, 1), randSlice(r, k*n, 1)
	want := make([]float64, m*n)
	mag := refGemm(false, false, m, n, k, 1, a, k, b, n, 0, want, n)
	for _, th := range []int{1, 2, 3} {
		withThreads(th, func() {
			C := zeros(t, m*n)
			dev.Gemm(device.GemmArgs{M: m, N: n, K: k, Alpha: 1, A: buf(a), LDA: k, B: buf(b), LDB: n, C: C, LDC: n})
			checkCloseTol(t, fmt.Sprintf("C(threads=%d)", th), host(C), want, func(i int) float64 { return float64(k+2) * 2 * u32 * mag[i] })
		})
	}
}

// TestGemmSelection checks that HILBERT_GEMM is honoured. Reading the
// variables inside a test also makes them part of go test's cache key: the
// device is created during package initialisation, before go test starts
// recording environment reads, so without this a HILBERT_GEMM=go (or
// LD_LIBRARY_PATH) pass could be answered from the cache of the other.
func TestGemmSelection(t *testing.T) {
	mode := strings.ToLower(os.Getenv("HILBERT_GEMM"))
	t.Logf("HILBERT_GEMM=%q HILBERT_OPENBLAS=%q LD_LIBRARY_PATH=%q: GEMM %s",
		mode, os.Getenv("HILBERT_OPENBLAS"), os.Getenv("LD_LIBRARY_PATH"), cpu.GemmName())
	switch mode {
	case "go", "gonum":
		if cpu.GemmName() != "go" {
			t.Errorf("HILBERT_GEMM=%s but GEMM is %s", mode, cpu.GemmName())
		}
	case "openblas":
		if err := cpu.GemmError(); err != nil || cpu.GemmName() != "openblas" {
			t.Errorf("HILBERT_GEMM=openblas but GEMM is %s (error %v)", cpu.GemmName(), err)
		}
	case "native":
		if err := cpu.GemmError(); err != nil || cpu.GemmName() != "native" {
			t.Errorf("HILBERT_GEMM=native but GEMM is %s (error %v)", cpu.GemmName(), err)
		}
	case "", "auto":
		if err := cpu.GemmError(); err != nil {
			t.Errorf("GemmError() = %v with automatic selection", err)
		}
		// The documented rule: native wherever it has an assembly kernel.
		if name, _, _ := cpu.NativeKernel(); name != "go" && cpu.GemmName() != "native" {
			t.Errorf("automatic selection chose %s although the native GEMM has the %s kernel", cpu.GemmName(), name)
		}
	default:
		if cpu.GemmError() == nil {
			t.Errorf("HILBERT_GEMM=%q accepted without error", mode)
		}
	}
}

// TestTranspose checks dst[b,c,r,i] = src[b,r,c,i] for 2-D transposes and
// head splitting.
func TestTranspose(t *testing.T) {
	for _, s := range [][4]int{{1, 1, 1, 1}, {1, 3, 5, 1}, {1, 130, 70, 1}, {3, 33, 65, 1}, {2, 129, 513, 1}, {1, 64, 256, 1}, {2, 5, 3, 8}, {8, 64, 12, 64}} {
		batch, rows, cols, inner := s[0], s[1], s[2], s[3]
		n := batch * rows * cols * inner
		src := randSlice(newRand(uint64(n)), n, 1)
		dst := buf(randSlice(newRand(1), n, 9))
		dev.Transpose(dst, buf(src), batch, rows, cols, inner)
		want := make([]float32, n)
		for b := 0; b < batch; b++ {
			for r := 0; r < rows; r++ {
				for c := 0; c < cols; c++ {
					for i := 0; i < inner; i++ {
						want[((b*cols+c)*rows+r)*inner+i] = src[((b*rows+r)*cols+c)*inner+i]
					}
				}
			}
		}
		checkEqual(t, fmt.Sprintf("Transpose %v", s), host(dst), want)
	}
}
