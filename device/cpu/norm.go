package cpu

import (
	"math"

	"github.com/hilbert-ml/hilbert/device"
)

// RMSNorm computes out = x * rstd per row, rstd = 1/sqrt(mean(x^2)+eps).
func (d *Device) RMSNorm(out, rstd, x device.Buffer, rows, cols int, eps float32) {
	rmsNorm(Float32s(out), Float32s(rstd), Float32s(x), nil, rows, cols, eps)
}

// RMSNormBackward computes dx = rstd * (dy - y * mean(dy*y)) with y = x*rstd.
func (d *Device) RMSNormBackward(dx, dy, x, rstd device.Buffer, rows, cols int) {
	rmsNormBackward(Float32s(dx), Float32s(dy), Float32s(x), Float32s(rstd), nil, rows, cols)
}

// RMSNormGain computes out = (x rstd) gain per row
// (device.RMSNormGainer): RMSNorm's row pass with the gain's product
// after the norm's, so the result is RMSNorm's then Mul's bit for bit.
func (d *Device) RMSNormGain(out, rstd, x, gain device.Buffer, rows, cols int, eps float32) {
	rmsNorm(Float32s(out), Float32s(rstd), Float32s(x), Float32s(gain)[:cols], rows, cols, eps)
}

// RMSNormGainBackward computes dx as RMSNormBackward of g = dy gain (the
// same operations as Mul's backward then RMSNormBackward) and the gain's
// gradient dgain = sum over rows of dy (x rstd): LayerNormBackward's gain
// sums (normColumnGrads) with a zero mean.
func (d *Device) RMSNormGainBackward(dx, dgain, dy, x, rstd, gain device.Buffer, rows, cols int) {
	xv, gv, rv := Float32s(x), Float32s(dy), Float32s(rstd)
	rmsNormBackward(Float32s(dx), gv, xv, rv, Float32s(gain)[:cols], rows, cols)
	if dgain != nil {
		normColumnGrads(Float32s(dgain), nil, xv, gv, make([]float32, rows), rv, rows, cols)
	}
}

// rmsNorm is RMSNorm's row pass over x (rows x cols), each output then
// times the gain w when w is not nil.
func rmsNorm(ov, rv, xv, w []float32, rows, cols int, eps float32) {
	parallelFor(rows, max(1, elementGrain/max(cols, 1)), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			xs, os := xv[r*cols:(r+1)*cols], ov[r*cols:(r+1)*cols]
			s := float32(1 / math.Sqrt(sumSquares(xs)/float64(cols)+float64(eps)))
			rv[r] = s
			if w == nil {
				for i := range os {
					os[i] = xs[i] * s
				}
				continue
			}
			for i, wi := range w {
				os[i] = xs[i] * s * wi
			}
		}
	})
}

// rmsNormBackward is RMSNormBackward's row pass, of g = dy w (each product
// rounded, as Mul's output) when the gain w is not nil, of dy otherwise.
func rmsNormBackward(dv, gv, xv, rv, w []float32, rows, cols int) {
	parallelFor(rows, max(1, elementGrain/max(cols, 1)), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			xs, gs, ds := xv[r*cols:(r+1)*cols], gv[r*cols:(r+1)*cols], dv[r*cols:(r+1)*cols]
			s := rv[r]
			var dot float64
			if w == nil {
				for i, g := range gs {
					dot += float64(g) * float64(xs[i])
				}
			} else {
				for i, wi := range w {
					dot += float64(gs[i]*wi) * float64(xs[i])
				}
			}
			c := float32(dot/float64(cols)) * s * s
			if w == nil {
				for i := range ds {
					ds[i] = s * (gs[i] - xs[i]*c)
				}
				continue
			}
			for i, wi := range w {
				ds[i] = s * (float32(gs[i]*wi) - xs[i]*c) // the conversion keeps gs w rounded, as Mul's output
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

// LayerNorm computes out = (x - mean) rstd w + b per row (w, b nil: 1, 0),
// the mean and the variance summed in float64.
func (d *Device) LayerNorm(out, mean, rstd, x, w, b device.Buffer, rows, cols int, eps float32) {
	xv, ov, mv, rv := Float32s(x), Float32s(out), Float32s(mean), Float32s(rstd)
	wv, bv := optFloat32s(w), optFloat32s(b)
	parallelFor(rows, max(1, elementGrain/max(cols, 1)), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			xs, os := xv[r*cols:(r+1)*cols], ov[r*cols:(r+1)*cols]
			var sum float64
			for _, v := range xs {
				sum += float64(v)
			}
			mu := float32(sum / float64(cols))
			var ss float64
			for _, v := range xs {
				c := float64(v - mu)
				ss += c * c
			}
			rs := float32(1 / math.Sqrt(ss/float64(cols)+float64(eps)))
			mv[r], rv[r] = mu, rs
			layerNormRow(os, xs, wv, bv, mu, rs)
		}
	})
}

// layerNormRow writes out = (x - mu) rs w + b (w, b nil: 1, 0) in one
// pass, each product and sum rounded to float32 in that order (the
// conversions keep the compiler from fusing them).
func layerNormRow(out, x, w, b []float32, mu, rs float32) {
	out = out[:len(x)]
	switch {
	case w != nil && b != nil:
		w, b = w[:len(x)], b[:len(x)]
		for i, v := range x {
			out[i] = float32(float32((v-mu)*rs)*w[i]) + b[i]
		}
	case w != nil:
		w = w[:len(x)]
		for i, v := range x {
			out[i] = float32((v-mu)*rs) * w[i]
		}
	case b != nil:
		b = b[:len(x)]
		for i, v := range x {
			out[i] = float32((v-mu)*rs) + b[i]
		}
	default:
		for i, v := range x {
			out[i] = (v - mu) * rs
		}
	}
}

// LayerNormBackward computes dx = rstd (g - mean(g) - xhat mean(g xhat))
// with g = dy w per row, and the column sums dw = sum dy xhat and
// db = sum dy (float64 sums, workers over column blocks, each summing
// the rows in order: the same result for any thread count).
func (d *Device) LayerNormBackward(dx, dw, db, dy, x, w, mean, rstd device.Buffer, rows, cols int) {
	xv, gv, dv := Float32s(x), Float32s(dy), Float32s(dx)
	mv, rv, wv := Float32s(mean), Float32s(rstd), optFloat32s(w)
	parallelFor(rows, max(1, elementGrain/max(cols, 1)), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			xs, gs, ds := xv[r*cols:(r+1)*cols], gv[r*cols:(r+1)*cols], dv[r*cols:(r+1)*cols]
			layerNormBackwardRow(ds, xs, gs, wv, mv[r], rv[r])
		}
	})
	if dw != nil || db != nil {
		normColumnGrads(optFloat32s(dw), optFloat32s(db), xv, gv, mv, rv, rows, cols)
	}
}

// normColumnGrads writes a norm's gain and bias gradients (either slice
// nil: not wanted), the column sums dw = sum dy xhat and db = sum dy with
// xhat = (x - mean) rstd per row, in float64: workers over column blocks,
// each summing the rows in order, so the result is the same for any
// thread count.
func normColumnGrads(wo, bo, xv, gv, mv, rv []float32, rows, cols int) {
	parallelFor(cols, 64, func(lo, hi int) {
		accW, accB := make([]float64, hi-lo), make([]float64, hi-lo)
		done := lnColGradsFast(accW, accB, xv[lo:], gv[lo:], mv, rv, rows, cols)
		for r := range rows {
			xs, gs := xv[r*cols+lo+done:r*cols+hi], gv[r*cols+lo+done:r*cols+hi]
			accW, accB := accW[done:], accB[done:]
			mu, rs := mv[r], rv[r]
			for i, g := range gs {
				accW[i] += float64(g) * float64((xs[i]-mu)*rs)
				accB[i] += float64(g)
			}
		}
		for i := range accW {
			if wo != nil {
				wo[lo+i] = float32(accW[i])
			}
			if bo != nil {
				bo[lo+i] = float32(accB[i])
			}
		}
	})
}

// layerNormBackwardRow writes one row of LayerNormBackward's dx from the
// row's x, dy, mean and rstd (w nil: a gain of 1): the float64 sums of
// g = dy w and of g xhat, then dx = rstd (g - mean g - xhat mean(g xhat)).
// The loops are written out for each case of w, the same operations in
// the same order.
func layerNormBackwardRow(dx, x, dy, w []float32, mu, rs float32) {
	n := len(x)
	dy, dx = dy[:n], dx[:n]
	var sg, sgx float64
	if w == nil {
		for i, v := range x {
			sg += float64(dy[i])
			sgx += float64(dy[i]) * float64((v-mu)*rs)
		}
		c1, c2 := float32(sg/float64(n)), float32(sgx/float64(n))
		for i, v := range x {
			dx[i] = rs * (dy[i] - c1 - (v-mu)*rs*c2)
		}
		return
	}
	w = w[:n]
	for i, v := range x {
		g := float32(dy[i] * w[i])
		sg += float64(g)
		sgx += float64(g) * float64((v-mu)*rs)
	}
	c1, c2 := float32(sg/float64(n)), float32(sgx/float64(n))
	for i, v := range x {
		dx[i] = rs * (float32(dy[i]*w[i]) - c1 - (v-mu)*rs*c2)
	}
}

// optFloat32s is Float32s of b, or nil for a nil buffer (an optional
// operand).
func optFloat32s(b device.Buffer) []float32 {
	if b == nil {
		return nil
	}
	return Float32s(b)
}
