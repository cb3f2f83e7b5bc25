package oracle

// The inner loops of a pass, on d-vectors, unrolled by four.

// sqDiff returns ||a - b||^2.
func sqDiff(a, b []float64) float64 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float64
	k := 0
	for ; k+4 <= len(a); k += 4 {
		e0, e1, e2, e3 := a[k]-b[k], a[k+1]-b[k+1], a[k+2]-b[k+2], a[k+3]-b[k+3]
		s0 += e0 * e0
		s1 += e1 * e1
		s2 += e2 * e2
		s3 += e3 * e3
	}
	for ; k < len(a); k++ {
		e := a[k] - b[k]
		s0 += e * e
	}
	return (s0 + s1) + (s2 + s3)
}

// addScaledDiff sets y += s (a - b) and returns ||y||^2.
func addScaledDiff(y, a, b []float64, s float64) float64 {
	a, b = a[:len(y)], b[:len(y)]
	var s0, s1, s2, s3 float64
	k := 0
	for ; k+4 <= len(y); k += 4 {
		e0 := y[k] + s*(a[k]-b[k])
		e1 := y[k+1] + s*(a[k+1]-b[k+1])
		e2 := y[k+2] + s*(a[k+2]-b[k+2])
		e3 := y[k+3] + s*(a[k+3]-b[k+3])
		y[k], y[k+1], y[k+2], y[k+3] = e0, e1, e2, e3
		s0 += e0 * e0
		s1 += e1 * e1
		s2 += e2 * e2
		s3 += e3 * e3
	}
	for ; k < len(y); k++ {
		e := y[k] + s*(a[k]-b[k])
		y[k] = e
		s0 += e * e
	}
	return (s0 + s1) + (s2 + s3)
}

// setScaledDiff sets y = s (a - b).
func setScaledDiff(y, a, b []float64, s float64) {
	a, b = a[:len(y)], b[:len(y)]
	for k := range y {
		y[k] = s * (a[k] - b[k])
	}
}

// setScaledDiffAccum sets y = s (a - b), ai += y and aj -= y.
func setScaledDiffAccum(y, a, b []float64, s float64, ai, aj []float64) {
	a, b, ai, aj = a[:len(y)], b[:len(y)], ai[:len(y)], aj[:len(y)]
	for k := range y {
		e := s * (a[k] - b[k])
		y[k] = e
		ai[k] += e
		aj[k] -= e
	}
}

// scaleAccum sets y *= s, ai += y and aj -= y.
func scaleAccum(y []float64, s float64, ai, aj []float64) {
	ai, aj = ai[:len(y)], aj[:len(y)]
	k := 0
	for ; k+4 <= len(y); k += 4 {
		e0, e1, e2, e3 := y[k]*s, y[k+1]*s, y[k+2]*s, y[k+3]*s
		y[k], y[k+1], y[k+2], y[k+3] = e0, e1, e2, e3
		ai[k] += e0
		ai[k+1] += e1
		ai[k+2] += e2
		ai[k+3] += e3
		aj[k] -= e0
		aj[k+1] -= e1
		aj[k+2] -= e2
		aj[k+3] -= e3
	}
	for ; k < len(y); k++ {
		e := y[k] * s
		y[k] = e
		ai[k] += e
		aj[k] -= e
	}
}

// projectedNorm2 returns ||y + (ri - rj) inv||^2.
func projectedNorm2(y, ri, rj []float64, inv float64) float64 {
	ri, rj = ri[:len(y)], rj[:len(y)]
	var s0, s1 float64
	k := 0
	for ; k+2 <= len(y); k += 2 {
		e0 := y[k] + (ri[k]-rj[k])*inv
		e1 := y[k+1] + (ri[k+1]-rj[k+1])*inv
		s0 += e0 * e0
		s1 += e1 * e1
	}
	for ; k < len(y); k++ {
		e := y[k] + (ri[k]-rj[k])*inv
		s0 += e * e
	}
	return s0 + s1
}
