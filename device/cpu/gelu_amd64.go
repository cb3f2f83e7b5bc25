package cpu

// The AVX-512 kernels of GELUTanh and GELUTanhBackward over one row
// (gelu_amd64.s); bias may be nil.

//go:noescape
func geluTanh16(out, x, bias *float32, n int)

//go:noescape
func geluTanhBackward16(dx, dout, x, bias *float32, n int)

// geluRowFast computes out = gelu(x + bias) over a row with the AVX-512
// kernel, reporting false (nothing done) without AVX-512.
func geluRowFast(out, x, bias []float32) bool {
	if !hasAVX512Softmax || len(x) == 0 {
		return false
	}
	geluTanh16(&out[0], &x[0], firstOrNil(bias, len(x)), len(x))
	return true
}

// geluBackwardRowFast computes dx = dout gelu'(x + bias) over a row with
// the AVX-512 kernel, reporting false (nothing done) without AVX-512.
func geluBackwardRowFast(dx, dout, x, bias []float32) bool {
	if !hasAVX512Softmax || len(x) == 0 {
		return false
	}
	geluTanhBackward16(&dx[0], &dout[0], &x[0], firstOrNil(bias, len(x)), len(x))
	return true
}

// firstOrNil returns &b[0] for a b of at least n elements, nil for a nil
// b.
func firstOrNil(b []float32, n int) *float32 {
	if b == nil {
		return nil
	}
	_ = b[n-1]
	return &b[0]
}
