package cpu

import (
	"fmt"
	"os"
	"strings"
	"sync"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"

	"github.com/hilbert-ml/hilbert/device"
)

var (
	gemmOnce sync.Once
	blasLib  *openBLAS // nil when the pure-Go GEMM is in use
	gemmErr  error     // set when HILBERT_GEMM=openblas could not be honoured
	gemmDesc string    // what GemmDescription returns
	goBLAS   gonum.Implementation
)

// initGemm chooses the GEMM once per process and reports the choice on
// stderr.
func initGemm() {
	gemmOnce.Do(func() {
		mode := strings.ToLower(os.Getenv("HILBERT_GEMM"))
		switch mode {
		case "", "auto", "openblas":
			lib, err := loadOpenBLAS()
			if err != nil {
				if mode == "openblas" {
					gemmErr = fmt.Errorf("HILBERT_GEMM=openblas: %w", err)
					gemmDesc = fmt.Sprintf("pure Go (gonum): %v", gemmErr)
					fmt.Fprintf(os.Stderr, "hilbert: %v; falling back to the pure-Go GEMM\n", gemmErr)
				} else {
					gemmDesc = fmt.Sprintf("pure Go (gonum); OpenBLAS not loaded: %v", err)
					fmt.Fprintf(os.Stderr, "hilbert: GEMM: %s\n", gemmDesc)
				}
				return
			}
			blasLib = lib
			if lib.setThreads != nil {
				lib.setThreads(int32(Threads()))
			}
			gemmDesc = fmt.Sprintf("OpenBLAS (%s) %s", lib.path, lib.configString())
			fmt.Fprintf(os.Stderr, "hilbert: GEMM: %s, %d threads\n", gemmDesc, Threads())
		case "go", "gonum":
			gemmDesc = "pure Go (gonum), forced by HILBERT_GEMM"
			fmt.Fprintln(os.Stderr, "hilbert: GEMM: "+gemmDesc)
		default:
			gemmErr = fmt.Errorf("HILBERT_GEMM=%q: want openblas, go or auto", mode)
			gemmDesc = fmt.Sprintf("pure Go (gonum): %v", gemmErr)
			fmt.Fprintf(os.Stderr, "hilbert: %v; using the pure-Go GEMM\n", gemmErr)
		}
	})
}

// GemmName reports the GEMM in use: "openblas" or "go".
func GemmName() string {
	initGemm()
	if blasLib != nil {
		return "openblas"
	}
	return "go"
}

// GemmDescription says which GEMM is in use and why: the OpenBLAS library
// and its build, or the pure-Go GEMM and the reason.
func GemmDescription() string {
	initGemm()
	return gemmDesc
}

// GemmError reports a GEMM request (HILBERT_GEMM) that could not be met.
func GemmError() error {
	initGemm()
	return gemmErr
}

func setBLASThreads(n int) {
	initGemm()
	if blasLib != nil && blasLib.setThreads != nil {
		blasLib.setThreads(int32(n))
	}
}

// Sgemm computes C = alpha*op(A)*op(B) + beta*C on row-major host slices
// with the framework's GEMM (OpenBLAS or pure Go). It is the entry point for
// host-side numerics (diagnostics, benchmarks) that work on plain slices.
// Calls must not overlap: with an OpenMP build of OpenBLAS, concurrent
// calls from two threads share per-thread buffers and return wrong results
// now and then (seen as a flaky bit-exact resume when attention ran its
// (batch, head) pairs on two goroutines).
func Sgemm(tA, tB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	initGemm()
	if m == 0 || n == 0 {
		return
	}
	if k == 0 || alpha == 0 {
		scaleMatrix(c, m, n, ldc, beta)
		return
	}
	if blasLib != nil {
		blasLib.gemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	goBLAS.Sgemm(gonumTranspose(tA), gonumTranspose(tB), m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// SgemmOpenBLAS calls OpenBLAS directly, bypassing the framework's dispatch;
// it reports false when OpenBLAS is not loaded. Benchmarks use it as the
// reference the framework's GEMM is measured against.
func SgemmOpenBLAS(tA, tB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) bool {
	initGemm()
	if blasLib == nil {
		return false
	}
	blasLib.gemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
	return true
}

func gonumTranspose(t bool) blas.Transpose {
	if t {
		return blas.Trans
	}
	return blas.NoTrans
}

// scaleMatrix sets C = beta*C (C = 0 when beta is 0, dropping NaNs).
func scaleMatrix(c []float32, m, n, ldc int, beta float32) {
	for i := 0; i < m; i++ {
		row := c[i*ldc : i*ldc+n]
		if beta == 0 {
			clear(row)
			continue
		}
		for j := range row {
			row[j] *= beta
		}
	}
}

// Gemm runs a strided batched GEMM, one Sgemm per batch entry. BFloat16
// A or B are widened to float32 (exactly) before the product, so the
// result is the float32 product of the bfloat16 values; C is float32.
func (d *Device) Gemm(g device.GemmArgs) {
	a, b, c := gemmOperand(g.A), gemmOperand(g.B), Float32s(g.C)
	batch := max(g.Batch, 1)
	rowsA, colsA := g.M, g.K
	if g.TransA {
		rowsA, colsA = colsA, rowsA
	}
	rowsB, colsB := g.K, g.N
	if g.TransB {
		rowsB, colsB = colsB, rowsB
	}
	for i := 0; i < batch; i++ {
		Sgemm(g.TransA, g.TransB, g.M, g.N, g.K, g.Alpha,
			window(a, i*g.StrideA, rowsA, colsA, g.LDA), g.LDA,
			window(b, i*g.StrideB, rowsB, colsB, g.LDB), g.LDB,
			g.Beta, window(c, i*g.StrideC, g.M, g.N, g.LDC), g.LDC)
	}
}

// window returns the part of s holding a rows x cols matrix with row pitch
// ld starting at off (empty when the matrix is).
func window(s []float32, off, rows, cols, ld int) []float32 {
	if rows == 0 || cols == 0 {
		return s[off:off]
	}
	return s[off : off+(rows-1)*ld+cols]
}

// gemmOperand returns a float32 view of a GEMM input, widening bfloat16
// into a new slice.
func gemmOperand(b device.Buffer) []float32 {
	if b.DType() != device.BFloat16 {
		return Float32s(b)
	}
	h := BFloat16s(b)
	f := make([]float32, len(h))
	fromBFloat16(f, h)
	return f
}
