package cpu

// microKernel6x16 is microKernelGo in AVX2+FMA assembly: twelve ymm
// accumulators hold the 6 x 16 tile (smallgemm_amd64.s).
//
//go:noescape
func microKernel6x16(k int, a, b, tile *float32)

// microKernel multiplies a packed A panel by a packed B panel over k >= 1.
func microKernel(k int, a, b []float32, tile *[gemmMR * gemmNR]float32) {
	if hasAVX2FMA {
		_, _ = a[gemmMR*k-1], b[gemmNR*k-1] // the kernel reads this far
		microKernel6x16(k, &a[0], &b[0], &tile[0])
		return
	}
	microKernelGo(k, a, b, tile)
}

// microKernel6x16C is microKernel6x16 writing C = alpha tile + beta C
// straight into a full 6 x 16 block of C (row pitch ldc); C is not read
// when beta is 0 (smallgemm_amd64.s).
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
