package cpu

// sgemvKernel8x16 is in native_amd64.s (written by internal/nativegen, gemv.go).

//go:noescape
func sgemvKernel8x16(k int, a *float32, lda uintptr, rows int, b *float32, ldb uintptr, c *float32, ldc int, alpha, beta float32, mask, tail, tmask uint32)

// gemvKernels maps a native kernel this CPU runs to its small-M kernel:
// the AVX-512 one only (gemv.go says why).
var gemvKernels = func() map[*nativeKernel]*gemvKernel {
	ks := map[*nativeKernel]*gemvKernel{}
	if hasAVX512 {
		ks[avx512Kernel] = &gemvKernel{name: "avx512", block: gemvBlock8x16}
	}
	return ks
}()

func gemvBlock8x16(k int, a []float32, lda, m int, b []float32, ldb int, c []float32, ldc int, alpha, beta float32, cols int) {
	_, _, _ = a[(m-1)*lda+k-1], b[15*ldb+k-1], c[(m-1)*ldc+cols-1]
	tail := (k-1)%16 + 1
	sgemvKernel8x16(k, &a[0], uintptr(lda*4), m, &b[0], uintptr(ldb*4), &c[0], ldc, alpha, beta, uint32(1<<cols-1), uint32(tail), uint32(1<<tail-1))
}
