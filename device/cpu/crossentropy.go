package cpu

import (
	"math"

	"github.com/hilbert-ml/hilbert/device"
)

// The cross-entropy kernels work row by row, rows split across workers;
// nothing of size rows x vocab is allocated. Exponentials use the float32
// expShiftSum; sums accumulate in float64.

// rowMax returns the largest element of z (NaN if any element is NaN).
func rowMax(z []float32) float32 {
	m := z[0]
	if vm, done, ok := rowMaxFast(z); ok {
		m, z = vm, z[done:]
		if m != m {
			return m
		}
	}
	for _, v := range z {
		if v > m || v != v {
			m = v
		}
	}
	return m
}

// rowLSE returns log(sum(exp(z))) of one row, storing e^(z - max) into dst
// when dst is not nil, and the sum of those exponentials; it prefetches
// next (the row after, nil for none) while it computes the exponentials,
// so that the next row's maximum reads it from cache.
func rowLSE(dst, z, next []float32) (lse float32, sum float64) {
	m := rowMax(z)
	sum = expShiftSumNext(dst, z, next, m)
	return m + float32(math.Log(sum)), sum
}

// nextRow returns row r+1 of the rows x vocab matrix x when r+1 < hi, the
// end of the caller's rows, and nil otherwise.
func nextRow(x []float32, r, hi, vocab int) []float32 {
	if r+1 >= hi {
		return nil
	}
	return x[(r+1)*vocab : (r+2)*vocab]
}

// CrossEntropy computes per-row loss and log-sum-exp straight from logits.
func (d *Device) CrossEntropy(loss, lse, logits, targets device.Buffer, rows, vocab int) {
	lv, sv, zv, tv := Float32s(loss), Float32s(lse), Float32s(logits), Int32s(targets)
	parallelFor(rows, 1, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			z := zv[r*vocab : (r+1)*vocab]
			l, _ := rowLSE(nil, z, nextRow(zv, r, hi, vocab))
			sv[r] = l
			lv[r] = l - z[tv[r]]
		}
	})
}

// CrossEntropyBackward writes dlogits = dloss * (softmax - onehot).
func (d *Device) CrossEntropyBackward(dlogits, dloss, logits, lse, targets device.Buffer, rows, vocab int) {
	gv, dv, zv, sv, tv := Float32s(dlogits), Float32s(dloss), Float32s(logits), Float32s(lse), Int32s(targets)
	parallelFor(rows, 1, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			z, g := zv[r*vocab:(r+1)*vocab], gv[r*vocab:(r+1)*vocab]
			expShiftSumNext(g, z, nextRow(zv, r, hi, vocab), sv[r])
			scaleInPlace(g, dv[r])
			g[tv[r]] -= dv[r]
		}
	})
}

// CrossEntropyWithGrad computes loss and lse and replaces the logits by
// gradScale * (softmax - onehot), with one exponential per element.
func (d *Device) CrossEntropyWithGrad(loss, lse, logits, targets device.Buffer, rows, vocab int, gradScale float32) {
	lv, sv, zv, tv := Float32s(loss), Float32s(lse), Float32s(logits), Int32s(targets)
	parallelFor(rows, 1, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			z := zv[r*vocab : (r+1)*vocab]
			target := z[tv[r]]
			l, sum := rowLSE(z, z, nextRow(zv, r, hi, vocab))
			sv[r] = l
			lv[r] = l - target
			scaleInPlace(z, float32(float64(gradScale)/sum))
			z[tv[r]] -= gradScale
		}
	})
}

// scaleInPlace multiplies x by s (AVX2 for the bulk where available).
func scaleInPlace(x []float32, s float32) {
	for i := scaleFast(x, s); i < len(x); i++ {
		x[i] *= s
	}
}
