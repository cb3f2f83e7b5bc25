package cpu

import (
	"math"

	"github.com/hilbert-ml/hilbert/device"
)

// RMSNorm computes out = x * rstd per row, rstd = 1/sqrt(mean(x^2)+eps).
func (d *Device) RMSNorm(out, rstd, x device.Buffer, rows, cols int, eps float32) {
	xv, ov, rv := Float32s(x), Float32s(out), Float32s(rstd)
	parallelFor(rows, max(1, elementGrain/max(cols, 1)), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			xs, os := xv[r*cols:(r+1)*cols], ov[r*cols:(r+1)*cols]
			s := float32(1 / math.Sqrt(sumSquares(xs)/float64(cols)+float64(eps)))
			rv[r] = s
			for i := range os {
				os[i] = xs[i] * s
			}
		}
	})
}

// RMSNormBackward computes dx = rstd * (dy - y * mean(dy*y)) with y = x*rstd.
func (d *Device) RMSNormBackward(dx, dy, x, rstd device.Buffer, rows, cols int) {
	xv, gv, rv, dv := Float32s(x), Float32s(dy), Float32s(rstd), Float32s(dx)
	parallelFor(rows, max(1, elementGrain/max(cols, 1)), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			xs, gs, ds := xv[r*cols:(r+1)*cols], gv[r*cols:(r+1)*cols], dv[r*cols:(r+1)*cols]
			s := rv[r]
			var dot float64
			for i, g := range gs {
				dot += float64(g) * float64(xs[i])
			}
			c := float32(dot/float64(cols)) * s * s
			for i := range ds {
				ds[i] = s * (gs[i] - xs[i]*c)
			}
		}
	})
}

// RoPE rotates the two halves of every head vector by the tabled angles.
func (d *Device) RoPE(out, x, cos, sin device.Buffer, s device.AttentionShape, inverse bool) {
	xv, ov, cv, sv := Float32s(x), Float32s(out), Float32s(cos), Float32s(sin)
	half := s.HeadDim / 2
	width := s.Heads * s.HeadDim
	sign := float32(1)
	if inverse {
		sign = -1
	}
	parallelFor(s.Batch*s.Seq, max(1, elementGrain/max(width, 1)), func(lo, hi int) {
		for bt := lo; bt < hi; bt++ {
			t := bt % s.Seq
			c, sn := cv[t*half:(t+1)*half], sv[t*half:(t+1)*half]
			for h := 0; h < s.Heads; h++ {
				base := bt*width + h*s.HeadDim
				l, r := xv[base:base+half], xv[base+half:base+s.HeadDim]
				ol, or := ov[base:base+half], ov[base+half:base+s.HeadDim]
				for j := 0; j < half; j++ {
					lj, rj, cj, sj := l[j], r[j], c[j], sign*sn[j]
					ol[j] = lj*cj - rj*sj
					or[j] = rj*cj + lj*sj
				}
			}
		}
	})
}
