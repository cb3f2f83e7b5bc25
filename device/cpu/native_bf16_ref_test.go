package cpu

import "math"

// The arithmetic of VDPBF16PS and of AMX's TDPBF16PS in portable Go, for
// checking the assembly kernels bit for bit. Every step is a float32 FMA or
// add with the products exact, one rounding to nearest even, denormal
// inputs read as zero and tiny results flushed to zero, MXCSR ignored.
//
// VDPBF16PS, as Intel's SDM defines it and as the kernel tests confirm on
// the CPU (Emerald Rapids), bit for bit: per lane i, one chain,
//
//	d += a.bf16[2i+1] * b.bf16[2i+1];  d += a.bf16[2i] * b.bf16[2i]
//
// TDPBF16PS is defined in the SDM the same way (one chain over the pairs,
// even K first), but Emerald Rapids computes otherwise (found with 2^24,
// 1 and -2^24 placed at chosen K, and confirmed by the kernel tests bit
// for bit on every element): per element and instruction (16 pairs, 32
// K), two chains from zero, E over the even K and O over the odd K, each
// in order of K, then
//
//	c = c + (E + O)
//
// Which NaN comes out when several meet is not modelled: the tests compare
// NaN as NaN.

// dazBF16 widens a bfloat16 to float32, a denormal to a zero of its sign.
func dazBF16(h uint16) float32 {
	if h&0x7f80 == 0 {
		h &= 0x8000
	}
	return math.Float32frombits(uint32(h) << 16)
}

// roundTo32 rounds the exact sum s + e (s = fl64(s + e), |e| at most half
// an ulp of s, as TwoSum gives them) to float32, nearest even, in one
// rounding; subnormal results are rounded as IEEE 754 does.
func roundTo32(s, e float64) float32 {
	r := float32(s)
	if e == 0 || math.IsNaN(s) || float64(r) == s {
		return r // exact in float64, or s a float32 that s+e rounds to
	}
	// s lies strictly between two float32, lo < s < hi. s+e rounds as s
	// does unless s is their midpoint (no other midpoint can lie between
	// s and s+e: it would be a float64 closer to s+e than s).
	value := func(f float32) float64 {
		if math.IsInf(float64(f), 0) {
			return math.Copysign(0x1p128, float64(f)) // the next step past the largest float32
		}
		return float64(f)
	}
	other := math.Nextafter32(r, float32(math.Copysign(math.Inf(1), s-value(r))))
	if math.IsInf(float64(r), 0) {
		other = float32(math.Copysign(math.MaxFloat32, s))
	}
	if s != (value(r)+value(other))/2 {
		return r
	}
	// The midpoint: e decides.
	if (e > 0) == (value(other) > value(r)) {
		return other
	}
	return r
}

// twoSum returns fl64(x + y) and its exact error.
func twoSum(x, y float64) (s, e float64) {
	s = x + y
	bv := s - x
	e = (x - (s - bv)) + (y - bv)
	if math.IsInf(s, 0) || math.IsNaN(s) {
		e = 0
	}
	return s, e
}

// fma32 returns x*y + z with one rounding to float32 (an FMA under
// Go's default MXCSR: no DAZ or FTZ).
func fma32(x, y, z float32) float32 {
	p := float64(x) * float64(y) // exact: 48 significant bits
	s, e := twoSum(p, float64(z))
	return roundTo32(s, e)
}

// fmaDAZFTZ returns z + x*y as one step of VDPBF16PS: x, y bfloat16 (read
// with denormals as zero), z's denormals read as zero, one rounding, a
// tiny result (below 2^-126 after rounding to 24 bits with an unbounded
// exponent) flushed to a zero of its sign.
func fmaDAZFTZ(z float32, x, y uint16) float32 {
	if math.Abs(float64(z)) < 0x1p-126 {
		z = float32(math.Copysign(0, float64(z)))
	}
	p := float64(dazBF16(x)) * float64(dazBF16(y)) // exact: 16 significant bits
	s, e := twoSum(p, float64(z))
	if s == 0 && e == 0 {
		return float32(s) // keeps IEEE's sign of an exact zero sum
	}
	// Round with an unbounded exponent: scale tiny sums up by 2^64
	// (exactly) so that float32's rounding is 24 bits wide there.
	if math.Abs(s) < 0x1p-100 {
		r := roundTo32(s*0x1p64, e*0x1p64)
		if math.Abs(float64(r)) < 0x1p-62 {
			return float32(math.Copysign(0, float64(r)))
		}
		return r * 0x1p-64
	}
	r := roundTo32(s, e)
	if math.Abs(float64(r)) < 0x1p-126 {
		return float32(math.Copysign(0, float64(r)))
	}
	return r
}

// dpbf16Lane is one lane of VDPBF16PS: acc + a.hi*b.hi, then + a.lo*b.lo.
func dpbf16Lane(acc float32, a, b uint32) float32 {
	acc = fmaDAZFTZ(acc, uint16(a>>16), uint16(b>>16))
	return fmaDAZFTZ(acc, uint16(a), uint16(b))
}

// addFTZ returns x + y rounded once, a tiny result flushed to zero (x and
// y are never denormal here).
func addFTZ(x, y float32) float32 {
	s, e := twoSum(float64(x), float64(y))
	r := roundTo32(s, e)
	if math.Abs(float64(r)) < 0x1p-126 {
		return float32(math.Copysign(0, float64(r)))
	}
	return r
}

// tdpbf16Element is one element of TDPBF16PS over one instruction's 16
// pairs: c + (E + O), E and O the chains over the even and odd K.
func tdpbf16Element(c float32, a, b []uint32) float32 {
	var even, odd float32
	for p := range a {
		even = fmaDAZFTZ(even, uint16(a[p]), uint16(b[p]))
		odd = fmaDAZFTZ(odd, uint16(a[p]>>16), uint16(b[p]>>16))
	}
	return addFTZ(c, addFTZ(even, odd))
}

// refBF16Kernel returns a portable kernel with kb's register block,
// alignment, blocking and arithmetic (VDPBF16PS's chain, or TDPBF16PS's
// per 16 pairs when kb.tiles), pairs in order of K, then alpha and beta
// applied as the assembly kernels do: t = alpha*acc (rounded), C = beta*C
// + t (one rounding), C not read for beta 0. Run through the same driver,
// it must give kb's results bit for bit.
func refBF16Kernel(kb *bf16Kernel) *bf16Kernel {
	r := *kb
	r.name = kb.name + "-ref"
	r.micro = func(kp int, a []uint16, lda int, b []uint32, c []float32, ldc int, alpha, beta float32, rows, cols int, _ *nativeWorker) {
		pairs := kp / 2
		ap, bp := make([]uint32, pairs), make([]uint32, pairs)
		for i := 0; i < rows; i++ {
			for p := range ap {
				ap[p] = uint32(a[i*lda+2*p]) | uint32(a[i*lda+2*p+1])<<16
			}
			for jj := 0; jj < cols; jj++ {
				panel := b[jj/r.nr*pairs*r.nr:]
				for p := range bp {
					bp[p] = panel[p*r.nr+jj%r.nr]
				}
				var acc float32
				if r.tiles {
					for p := 0; p < pairs; p += 16 {
						acc = tdpbf16Element(acc, ap[p:p+16], bp[p:p+16])
					}
				} else {
					for p := range ap {
						acc = dpbf16Lane(acc, ap[p], bp[p])
					}
				}
				t := alpha * acc
				if beta == 0 {
					c[i*ldc+jj] = t
				} else {
					c[i*ldc+jj] = fma32(beta, c[i*ldc+jj], t)
				}
			}
		}
	}
	return &r
}
