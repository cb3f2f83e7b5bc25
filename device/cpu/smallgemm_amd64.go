package cpu

// microKernel6x16C is the AVX2+FMA micro-kernel (smallgemm_amd64.s): it
// writes C = alpha A B + beta C straight into a full 6 x 16 block of C
// (row pitch ldc), twelve ymm registers holding the block; C is not read
// when beta is 0.
//
//go:noescape
func microKernel6x16C(k int, a, b, c *float32, ldc int, alpha, beta float32)

// microKernelFull computes a full tile into c (row pitch ldc, at least
// gemmMR rows of gemmNR columns from c[0]) and reports true, or reports
// false when only the portable kernel is available.
func microKernelFull(k int, a, b, c []float32, ldc int, alpha, beta float32) bool {
	if !hasAVX2FMA {
		return false
	}
	_, _, _ = a[gemmMR*k-1], b[gemmNR*k-1], c[(gemmMR-1)*ldc+gemmNR-1]
	microKernel6x16C(k, &a[0], &b[0], &c[0], ldc, alpha, beta)
	return true
}

// microKernel multiplies a packed A panel by a packed B panel over k >= 1
// into tile.
func microKernel(k int, a, b []float32, tile *[gemmMR * gemmNR]float32) {
	if !microKernelFull(k, a, b, tile[:], gemmNR, 1, 0) {
		microKernelGo(k, a, b, tile)
	}
}
