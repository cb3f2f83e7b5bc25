package device

import (
	"math"
	"math/bits"
)

// Random numbers: every backend draws Device.Random's values from the
// counter-based generator Philox4x32-10 (Salmon et al., "Parallel random
// numbers: as easy as 1, 2, 3", SC 2011; the Random123 reference), so that
// a seed and an offset give the same numbers on every backend, in any
// order of evaluation and for any split of the work.
//
// Element e (counted from the call's offset: the i-th element of dst is
// e = offset + i) is computed from one 128-bit Philox block:
//
//	key     = (uint32(seed), uint32(seed >> 32))
//	Uniform, Bernoulli: words = Philox(ctr(e/4), key), w = words[e%4]
//	Normal:             words = Philox(ctr(e/2), key), w1 = words[2(e%2)], w2 = words[2(e%2)+1]
//	ctr(b)  = (uint32(b), uint32(b >> 32), 0, 0)
//
// and a 24-bit uniform u(w) = (w >> 8) * 2^-24 in [0, 1):
//
//	Uniform:   float32(float64(a) + float64(b - a) * u(w))   (b - a rounded to float32 first)
//	Bernoulli: 1 if u(w) < a, else 0
//	Normal:    float32(a + b * sqrt(-2 log(u(w1) + 2^-24)) * cos(2 pi u(w2))), in float64
//
// Uniform and Bernoulli values are bit-identical on every backend: the
// product in the uniform is exact in float64, so the only rounding is the
// final one. Normal values go through log and cos, whose last bit may
// differ between math libraries; after the rounding to float32 the
// backends agree except, rarely, in the last bit. Float64 buffers get the
// same formulas without the final rounding to float32.
//
// A caller that fills several tensors from one seed advances offset by
// each tensor's length, so the streams do not overlap.

// Philox4x32 is the Philox4x32-10 block function: ten rounds of the
// Random123 reference, with the key bumped by the Weyl constants between
// rounds.
func Philox4x32(ctr [4]uint32, key [2]uint32) [4]uint32 {
	const (
		m0, m1 = 0xD2511F53, 0xCD9E8D57
		w0, w1 = 0x9E3779B9, 0xBB67AE85
	)
	c0, c1, c2, c3 := ctr[0], ctr[1], ctr[2], ctr[3]
	k0, k1 := key[0], key[1]
	for r := 0; r < 10; r++ {
		if r > 0 {
			k0 += w0
			k1 += w1
		}
		hi0, lo0 := bits.Mul32(m0, c0)
		hi1, lo1 := bits.Mul32(m1, c2)
		c0, c1, c2, c3 = hi1^c1^k0, lo1, hi0^c3^k1, lo0
	}
	return [4]uint32{c0, c1, c2, c3}
}

// philoxBlock returns Philox4x32-10 of counter block b under seed.
func philoxBlock(seed, b uint64) [4]uint32 {
	return Philox4x32([4]uint32{uint32(b), uint32(b >> 32), 0, 0}, [2]uint32{uint32(seed), uint32(seed >> 32)})
}

// Uniform24 maps a random word to [0, 1) with 24 bits: (w >> 8) * 2^-24.
func Uniform24(w uint32) float32 { return float32(w>>8) * (1.0 / (1 << 24)) }

// RandomWord returns the word element e of a Uniform or Bernoulli fill
// uses.
func RandomWord(seed, e uint64) uint32 { return philoxBlock(seed, e/4)[e%4] }

// UniformValue is element e of a float32 Uniform fill on [a, b).
func UniformValue(seed, e uint64, a, b float32) float32 {
	return uniformFrom(RandomWord(seed, e), a, b)
}

func uniformFrom(w uint32, a, b float32) float32 {
	d := b - a
	return float32(float64(a) + float64(d)*float64(Uniform24(w)))
}

// BernoulliValue is element e of a Bernoulli fill with probability p.
func BernoulliValue(seed, e uint64, p float32) float32 {
	if Uniform24(RandomWord(seed, e)) < p {
		return 1
	}
	return 0
}

// NormalValue64 is element e of a Normal fill of mean and std, before the
// rounding to float32 (the value of a float64 fill).
func NormalValue64(seed, e uint64, mean, std float64) float64 {
	w := philoxBlock(seed, e/2)
	j := 2 * (e % 2)
	return normalFrom(w[j], w[j+1], mean, std)
}

func normalFrom(w1, w2 uint32, mean, std float64) float64 {
	u1 := float64(Uniform24(w1)) + 1.0/(1<<24) // (0, 1]
	u2 := float64(Uniform24(w2))
	return mean + std*(math.Sqrt(-2*math.Log(u1))*math.Cos(2*math.Pi*u2))
}

// FillRandom writes elements offset, offset+1, ... of a fill of dist into
// dst (float32), for backends written in Go and for tests.
func FillRandom(dst []float32, dist Distribution, seed, offset uint64, a, b float32) {
	fillRandom(dst, dist, seed, offset, a, b, true)
}

// FillRandom64 is FillRandom for float64 elements.
func FillRandom64(dst []float64, dist Distribution, seed, offset uint64, a, b float32) {
	fillRandom(dst, dist, seed, offset, a, b, false)
}

func fillRandom[T float32 | float64](dst []T, dist Distribution, seed, offset uint64, a, b float32, is32 bool) {
	var blk [4]uint32
	have := uint64(math.MaxUint64)
	for i := range dst {
		e := offset + uint64(i)
		switch dist {
		case Uniform, Bernoulli:
			if e/4 != have {
				have, blk = e/4, philoxBlock(seed, e/4)
			}
			w := blk[e%4]
			if dist == Bernoulli {
				dst[i] = 0
				if Uniform24(w) < a {
					dst[i] = 1
				}
			} else if is32 {
				dst[i] = T(uniformFrom(w, a, b))
			} else {
				dst[i] = T(float64(a) + (float64(b)-float64(a))*float64(Uniform24(w)))
			}
		case Normal:
			if e/2 != have {
				have, blk = e/2, philoxBlock(seed, e/2)
			}
			j := 2 * (e % 2)
			dst[i] = T(normalFrom(blk[j], blk[j+1], float64(a), float64(b)))
		}
	}
}
