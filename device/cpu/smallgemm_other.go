//go:build !amd64

package cpu

// microKernel multiplies a packed A panel by a packed B panel over k >= 1.
func microKernel(k int, a, b []float32, tile *[gemmMR * gemmNR]float32) {
	microKernelGo(k, a, b, tile)
}

// microKernelFull has no vector kernel on this architecture.
func microKernelFull(k int, a, b, c []float32, ldc int, alpha, beta float32) bool { return false }
