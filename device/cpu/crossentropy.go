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
// when dst is not nil, and the sum of those exponentials.
func rowLSE(dst, z []float32) (lse float32, sum float64) {
	m := rowMax(z)
	sum = expShiftSum(dst, z, m)
	return m + float32(math.Log(sum)), sum
}

// CrossEntropy computes per-row loss and log-sum-exp straight from logits.
func (d *Device) CrossEntropy(loss, lse, logits, targets device.Buffer, rows, vocab int) {
	lv, sv, zv, tv := Float32s(loss), Float32s(lse), Float32s(logits), Int32s(targets)
	parallelFor(rows, 1, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			z := zv[r*vocab : (r+1)*vocab]
			l, _ := rowLSE(nil, z)
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
			expShiftSum(g, z, sv[r])
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
			l, sum := rowLSE(z, z)
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
