package cpu

import (
	"math"

	"github.com/hilbert-ml/hilbert/device"
)

// The AVX2 forms of Axpby, AdamWStep and the float32 add, subtract and
// multiply of BinaryStrided (elemsimd_amd64.s), bit for bit their scalar
// loops' results.

//go:noescape
func axpby8(dst, x *float32, n int, alpha, beta float32)

//go:noescape
func scaleTo8(dst, x *float32, n int, alpha float32)

//go:noescape
func adamW8(p, grad, m, v, s *float32, n int, c *adamScalars32)

// axpbyFast computes dst = alpha*x + beta*dst (alpha*x for beta 0) over
// the longest multiple of 8 elements and returns how many it did (0
// without AVX2).
func axpbyFast(dst, x []float32, alpha, beta float32) int {
	n := len(dst) &^ 7
	if !hasAVX2FMA || n == 0 {
		return 0
	}
	_ = x[n-1]
	if beta == 0 {
		scaleTo8(&dst[0], &x[0], n, alpha)
	} else {
		axpby8(&dst[0], &x[0], n, alpha, beta)
	}
	return n
}

// adamWFast runs AdamW's update over the longest multiple of 8 elements
// and returns how many it did (0 without AVX2). s may be nil.
func adamWFast(p, g, m, v, s []float32, c *adamScalars32) int {
	n := len(p) &^ 7
	if !hasAVX2FMA || n == 0 {
		return 0
	}
	_, _, _ = g[n-1], m[n-1], v[n-1]
	var sp *float32
	if s != nil {
		_ = s[n-1]
		sp = &s[0]
	}
	adamW8(&p[0], &g[0], &m[0], &v[0], sp, n, c)
	return n
}

//go:noescape
func binaryVV8(op int, z, x, y *float32, n int)

// binaryFast computes z = x op y for op Add, Sub or Mul over the longest
// multiple of 8 elements and returns how many it did (0 without AVX2 or
// for another op). z may be x or y.
func binaryFast(op device.BinaryOp, z, x, y []float32) int {
	code := -1 // binaryVV8's numbering
	switch op {
	case device.Add:
		code = 0
	case device.Sub:
		code = 1
	case device.Mul:
		code = 2
	}
	n := len(z) &^ 7
	if !hasAVX2FMA || n == 0 || code < 0 {
		return 0
	}
	_, _ = x[n-1], y[n-1]
	binaryVV8(code, &z[0], &x[0], &y[0], n)
	return n
}

//go:noescape
func colSums16(acc *float64, x *float32, cols, rows int, pitch uintptr, squares bool)

// colSumsFast adds to acc[i] the float64 sum over rows j, in order, of
// x[j*pitch+i] (squared for SumSquares) for the longest multiple of 16
// columns of acc, and returns how many columns it did (0 without AVX2,
// for another op, or with no rows): the scalar loop's sums bit for bit.
func colSumsFast(op device.ReduceOp, acc []float64, x []float32, rows, pitch int) int {
	cols := len(acc) &^ 15
	if !hasAVX2FMA || cols == 0 || rows == 0 || op != device.Sum && op != device.SumSquares {
		return 0
	}
	_ = x[(rows-1)*pitch+cols-1]
	colSums16(&acc[0], &x[0], cols, rows, uintptr(pitch*4), op == device.SumSquares)
	return cols
}

//go:noescape
func rowSumSquares8(ss *float64, x *float32, cols int, idx *int32)

// rowSumSquaresFast sets ss[r] = sumSquares(x[r*cols:(r+1)*cols]) for the
// longest multiple of 8 of the len(ss) rows of x and returns how many rows
// it did (0 without AVX2): eight rows at a time, bit for bit the scalar
// loop's sums.
func rowSumSquaresFast(ss []float64, x []float32, cols int) int {
	rows := len(ss) &^ 7
	if !hasAVX2FMA || rows == 0 || cols == 0 || 8*cols > math.MaxInt32 {
		return 0
	}
	_ = x[rows*cols-1]
	var idx [8]int32
	for r := range idx {
		idx[r] = int32(r * cols)
	}
	for r := 0; r < rows; r += 8 {
		rowSumSquares8(&ss[r], &x[r*cols], cols, &idx[0])
	}
	return rows
}

//go:noescape
func softmaxGrad8(ds, p *float32, n int, d float32)

// softmaxGradFast computes ds = p * (ds - d) over the longest multiple of
// 8 elements and returns how many it did (0 without AVX2): bit for bit the
// scalar loop's.
func softmaxGradFast(ds, p []float32, d float32) int {
	n := len(ds) &^ 7
	if !hasAVX2FMA || n == 0 {
		return 0
	}
	_ = p[n-1]
	softmaxGrad8(&ds[0], &p[0], n, d)
	return n
}

//go:noescape
func lnColGrads16(accW, accB *float64, x, dy, mean, rstd *float32, cols, rows int, pitch uintptr)

// lnColGradsFast adds LayerNormBackward's column sums over rows (pitch
// apart) to accW and accB for the longest multiple of 16 of their columns
// and returns how many columns it did (0 without AVX2 or with no rows):
// the scalar loop's sums bit for bit.
func lnColGradsFast(accW, accB []float64, x, dy, mean, rstd []float32, rows, pitch int) int {
	cols := len(accW) &^ 15
	if !hasAVX2FMA || cols == 0 || rows == 0 {
		return 0
	}
	_, _ = x[(rows-1)*pitch+cols-1], dy[(rows-1)*pitch+cols-1]
	_, _, _ = accB[cols-1], mean[rows-1], rstd[rows-1]
	lnColGrads16(&accW[0], &accB[0], &x[0], &dy[0], &mean[0], &rstd[0], cols, rows, uintptr(pitch*4))
	return cols
}
