package cpu

import (
	"math"
)

// expf returns e^x in float32 arithmetic, about 10x faster than math.Exp:
// Cody-Waite range reduction x = n ln2 + r with |r| <= ln2/2, a degree-6
// polynomial for e^r (Cephes expf coefficients), and 2^n assembled from
// exponent bits. Relative error is below 2^-22 over the float32 range;
// results below the smallest normal flush to zero; NaN propagates.
func expf(x float32) float32 {
	const (
		log2e = 1.44269504088896341
		ln2hi = 0.693359375
		ln2lo = -2.12194440e-4
		maxX  = 88.72283905206835
		minX  = -87.33654475055310898657
	)
	switch {
	case x != x:
		return x
	case x > maxX:
		return float32(math.Inf(1))
	case x < minX:
		return 0
	}
	t := x*log2e + 0.5
	n := int32(t)
	if t < float32(n) {
		n-- // floor for negative t
	}
	fn := float32(n)
	r := x - fn*ln2hi - fn*ln2lo
	p := float32(1.9875691500e-4)
	p = p*r + 1.3981999507e-3
	p = p*r + 8.3334519073e-3
	p = p*r + 4.1665795894e-2
	p = p*r + 1.6666665459e-1
	p = p*r + 5.0000001201e-1
	p = p*r*r + r + 1
	if n > 127 { // x within maxX but 2^n overflows the exponent field
		return p * math.Float32frombits(uint32(127+127)<<23) * 2
	}
	return p * math.Float32frombits(uint32(n+127)<<23)
}

// exp2Table[j] = 2^(j/64), for expShiftSum's table-driven exponential.
var exp2Table = func() (t [64]float32) {
	for j := range t {
		t[j] = float32(math.Exp2(float64(j) / 64))
	}
	return t
}()

// expShiftSum writes dst[i] = e^(src[i]-shift) and returns the sum of the
// results in float64. It is the softmax kernels' exponential: with
// x = src[i]-shift = (64n + j) ln2/64 + r, |r| <= ln2/128, it returns
// 2^n * 2^(j/64) * (1 + r + r^2/2 + r^3/6), rounding x*64/ln2 with the
// 1.5*2^23 magic-number trick. The chain of dependent operations is short
// (about 9 float operations), which is what bounds a scalar loop. Relative
// error is below 2^-22; arguments below the float32 range flush to zero,
// arguments must be <= 88 (softmax arguments are <= 0), and NaN
// propagates. dst may alias src; with dst nil only the sum is computed.
func expShiftSum(dst, src []float32, shift float32) float64 {
	return expShiftSumNext(dst, src, nil, shift)
}

// expShiftSumNext is expShiftSum that also prefetches next (the next row
// of a softmax, nil for none) while it computes, where the vector kernel
// can.
func expShiftSumNext(dst, src, next []float32, shift float32) float64 {
	const (
		scale  = 64 / math.Ln2
		ln2hi  = 0.693359375 / 64 // 9 significant bits: k*ln2hi is exact for |k| < 2^15
		ln2lo  = -2.12194440e-4 / 64
		magic  = 12582912 // 1.5 * 2^23
		minX   = -87.33654475055310898657
		maxX   = 88.0
		third  = 1.0 / 6
		expOne = 127 << 23
	)
	store := dst != nil
	if store {
		dst = dst[:len(src)]
	}
	done, vsum := expShiftSumFast(dst, src, next, shift)
	if done == len(src) {
		return vsum
	}
	src = src[done:]
	if store {
		dst = dst[done:]
	}
	tab := &exp2Table
	s0, s1 := vsum, 0.0
	for i, v := range src {
		x := v - shift
		if x < minX {
			x = minX
		} else if x > maxX {
			x = maxX
		}
		kf := x*scale + magic
		k := int32(math.Float32bits(kf) - math.Float32bits(magic))
		kf -= magic
		r := x - kf*ln2hi - kf*ln2lo
		p := 1 + r*(1+r*(0.5+r*third))
		bits := math.Float32bits(tab[k&63]*p) + uint32(k>>6)<<23
		e := math.Float32frombits(bits)
		if x == minX {
			e = 0
		}
		if store {
			dst[i] = e
		}
		if i&1 == 0 {
			s0 += float64(e)
		} else {
			s1 += float64(e)
		}
	}
	return s0 + s1
}
