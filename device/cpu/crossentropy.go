package cpu

import (
	"math"

	"github.com/hilbert-ml/hilbert/device"
)

// CrossEntropy computes per-row loss and log-sum-exp straight from logits.
// Rows are processed in parallel blocks; nothing of size rows x vocab is
// allocated.
func (d *Device) CrossEntropy(loss, lse, logits, targets device.Buffer, rows, vocab int) {
	lv, sv, zv, tv := Float32s(loss), Float32s(lse), Float32s(logits), Int32s(targets)
	parallelFor(rows, 1, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			z := zv[r*vocab : (r+1)*vocab]
			m := z[0]
			for _, v := range z {
				if v > m {
					m = v
				}
			}
			var s float64
			for _, v := range z {
				s += math.Exp(float64(v - m))
			}
			l := float64(m) + math.Log(s)
			sv[r] = float32(l)
			lv[r] = float32(l - float64(z[tv[r]]))
		}
	})
}

// CrossEntropyBackward writes dlogits = dloss * (softmax - onehot).
func (d *Device) CrossEntropyBackward(dlogits, dloss, logits, lse, targets device.Buffer, rows, vocab int) {
	gv, dv, zv, sv, tv := Float32s(dlogits), Float32s(dloss), Float32s(logits), Float32s(lse), Int32s(targets)
	parallelFor(rows, 1, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			z, g := zv[r*vocab:(r+1)*vocab], gv[r*vocab:(r+1)*vocab]
			l, scale := sv[r], dv[r]
			for i, v := range z {
				g[i] = scale * exp32(v-l)
			}
			g[tv[r]] -= scale
		}
	})
}
