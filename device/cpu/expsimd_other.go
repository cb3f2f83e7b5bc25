//go:build !amd64

package cpu

// hasAVX2FMA is false: there is no vector kernel on this architecture.
var hasAVX2FMA = false

// hasAVX512Softmax is false: there is no vector kernel on this architecture.
var hasAVX512Softmax = false

// expShiftSumFast has no vector kernel on this architecture.
func expShiftSumFast(dst, src, next []float32, shift float32) (done int, sum float64) { return 0, 0 }

// rowMaxFast has no vector kernel on this architecture.
func rowMaxFast(z []float32) (m float32, done int, ok bool) { return 0, 0, false }

// scaleFast has no vector kernel on this architecture.
func scaleFast(x []float32, s float32) int { return 0 }
