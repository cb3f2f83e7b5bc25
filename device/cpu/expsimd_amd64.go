package cpu

import "golang.org/x/sys/cpu"

// hasAVX2FMA reports whether expShiftSum may use the AVX2+FMA kernel.
var hasAVX2FMA = cpu.X86.HasAVX2 && cpu.X86.HasFMA

// expShiftSum8 is the AVX2+FMA kernel of expShiftSum for n, a multiple of
// 8, elements: dst[i] = e^(src[i]-shift) when dst is not nil, and the sum
// of the results (float64 lanes). Implemented in expsimd_amd64.s.
//
//go:noescape
func expShiftSum8(dst, src *float32, n int, shift float32) float64

// expShiftSum16 is the AVX-512 form of expShiftSum8, bit for bit the same
// results (element values and sum) for n, a multiple of 8; it prefetches
// n elements of next as it goes, when next is not nil. Implemented in
// expsimd_amd64.s.
//
//go:noescape
func expShiftSum16(dst, src *float32, n int, shift float32, next *float32) float64

// hasAVX512Softmax reports whether the softmax kernels (expShiftSum,
// rowMax, scaleInPlace) may use their AVX-512 forms; each gives its AVX2
// form's results bit for bit. GODEBUG=cpu.avx512f=off turns it off.
var hasAVX512Softmax = hasAVX2FMA && cpu.X86.HasAVX512F

// expShiftSumFast runs the vector kernel over the longest multiple of 8
// and returns how many elements it did (0 without AVX2+FMA). The AVX-512
// kernel prefetches next (nil: nothing; at least as long as src
// otherwise) while it runs.
func expShiftSumFast(dst, src, next []float32, shift float32) (done int, sum float64) {
	n := len(src) &^ 7
	if !hasAVX2FMA || n == 0 {
		return 0, 0
	}
	var d *float32
	if dst != nil {
		d = &dst[0]
	}
	if hasAVX512Softmax {
		var pf *float32
		if len(next) >= n {
			pf = &next[0]
		}
		return n, expShiftSum16(d, &src[0], n, shift, pf)
	}
	return n, expShiftSum8(d, &src[0], n, shift)
}

// max8 returns the largest of n (a multiple of 8, n >= 8) floats, or a NaN
// if any is NaN. Implemented in expsimd_amd64.s.
//
//go:noescape
func max8(x *float32, n int) float32

// max16 is the AVX-512 form of max8. Implemented in expsimd_amd64.s.
//
//go:noescape
func max16(x *float32, n int) float32

// rowMaxFast is the vector maximum over the longest multiple of 8; ok is
// false without AVX2 (or fewer than 8 elements).
func rowMaxFast(z []float32) (m float32, done int, ok bool) {
	n := len(z) &^ 7
	if !hasAVX2FMA || n == 0 {
		return 0, 0, false
	}
	if hasAVX512Softmax {
		return max16(&z[0], n), n, true
	}
	return max8(&z[0], n), n, true
}

// scale8 multiplies n (a multiple of 8) floats by s in place.
// Implemented in expsimd_amd64.s.
//
//go:noescape
func scale8(x *float32, n int, s float32)

// scale16 is the AVX-512 form of scale8. Implemented in expsimd_amd64.s.
//
//go:noescape
func scale16(x *float32, n int, s float32)

// scaleFast scales the longest multiple of 8 elements and returns how many
// it did (0 without AVX2).
func scaleFast(x []float32, s float32) int {
	n := len(x) &^ 7
	if !hasAVX2FMA || n == 0 {
		return 0
	}
	if hasAVX512Softmax {
		scale16(&x[0], n, s)
		return n
	}
	scale8(&x[0], n, s)
	return n
}
