package cpu

// The AVX-512 kernels of SwiGLU and SwiGLUBackward (swiglu_amd64.s), bit
// for bit the loops on sigmoidInto.

//go:noescape
func swiglu16(out, a, b *float32, n int)

//go:noescape
func swigluBackward16(da, db, dout, a, b *float32, n int)

// swigluFast computes out = silu(a) b over the longest multiple of 8
// elements with the AVX-512 kernel and returns how many it did (0
// without AVX-512).
func swigluFast(out, a, b []float32) int {
	n := len(a) &^ 7
	if !hasAVX512Softmax || n == 0 {
		return 0
	}
	_, _ = out[n-1], b[n-1]
	swiglu16(&out[0], &a[0], &b[0], n)
	return n
}

// swigluBackwardFast computes SwiGLU's gradients over the longest
// multiple of 8 elements with the AVX-512 kernel and returns how many it
// did (0 without AVX-512).
func swigluBackwardFast(da, db, dout, a, b []float32) int {
	n := len(a) &^ 7
	if !hasAVX512Softmax || n == 0 {
		return 0
	}
	_, _, _, _ = da[n-1], db[n-1], dout[n-1], b[n-1]
	swigluBackward16(&da[0], &db[0], &dout[0], &a[0], &b[0], n)
	return n
}
