package cpu

import "github.com/hilbert-ml/hilbert/device"

// Constants of GELU's tanh approximation, gelu(z) = z sigmoid(2u) with
// u = sqrt(2/pi) (z + 0.044715 z^3).
const (
	geluK2 = 2 * 0.7978845608028654 // 2 sqrt(2/pi)
	geluC  = 0.044715
)

// geluRows runs body over row chunks of at most sigmoidChunk elements of
// a rows x cols matrix, rows split across workers, with each chunk's
// z = x + bias (bias nil: x), e = e^(-2u) and s = sigmoid(2u) = 1/(1 + e)
// at hand.
func geluRows(x, bias []float32, rows, cols int, body func(off int, z, e, s []float32)) {
	parallelFor(rows, max(1, elementGrain/4/max(cols, 1)), func(lo, hi int) {
		var zb, eb, sb [sigmoidChunk]float32
		for r := lo; r < hi; r++ {
			for c0 := 0; c0 < cols; c0 += sigmoidChunk {
				c1 := min(c0+sigmoidChunk, cols)
				off := r*cols + c0
				z, e, s := zb[:c1-c0], eb[:c1-c0], sb[:c1-c0]
				copy(z, x[off:off+len(z)])
				if bias != nil {
					for i, b := range bias[c0:c1] {
						z[i] += b
					}
				}
				for i, v := range z {
					e[i] = -geluK2 * (v + geluC*v*v*v)
				}
				expShiftSum(e, e, 0)
				for i, v := range e {
					s[i] = 1 / (1 + v)
				}
				body(off, z, e, s)
			}
		}
	})
}

// GELUTanh computes out = gelu(x + bias) with gelu(z) = z sigmoid(2u),
// u = sqrt(2/pi) (z + 0.044715 z^3), the tanh form's value (1 + tanh u)/2
// = sigmoid(2u): row by row with the AVX-512 kernel where there is one,
// else on the vector exponential.
func (d *Device) GELUTanh(out, x, bias device.Buffer, rows, cols int) {
	ov, xv, bv := Float32s(out), Float32s(x), optFloat32s(bias)
	if hasAVX512Softmax {
		parallelFor(rows, max(1, elementGrain/4/max(cols, 1)), func(lo, hi int) {
			for r := lo; r < hi; r++ {
				geluRowFast(ov[r*cols:(r+1)*cols], xv[r*cols:(r+1)*cols], bv)
			}
		})
		return
	}
	geluRows(xv, bv, rows, cols, func(off int, z, _, s []float32) {
		o := ov[off : off+len(z)]
		for i, v := range z {
			o[i] = v * s[i]
		}
	})
}

// GELUTanhBackward computes dx = dout gelu'(x + bias), gelu'(z) =
// s + z s (1 - s) 2 sqrt(2/pi) (1 + 3 0.044715 z^2) with s = sigmoid(2u),
// 1 - s taken as e^(-2u) s.
func (d *Device) GELUTanhBackward(dx, dout, x, bias device.Buffer, rows, cols int) {
	dv, gv, xv, bv := Float32s(dx), Float32s(dout), Float32s(x), optFloat32s(bias)
	if hasAVX512Softmax {
		parallelFor(rows, max(1, elementGrain/4/max(cols, 1)), func(lo, hi int) {
			for r := lo; r < hi; r++ {
				geluBackwardRowFast(dv[r*cols:(r+1)*cols], gv[r*cols:(r+1)*cols], xv[r*cols:(r+1)*cols], bv)
			}
		})
		return
	}
	geluRows(xv, bv, rows, cols, func(off int, z, e, s []float32) {
		ds, gs := dv[off:off+len(z)], gv[off:off+len(z)]
		for i, v := range z {
			si := s[i]
			// 1 - s = e s, without the cancellation of 1 - s near 1.
			ds[i] = gs[i] * (si + v*si*(e[i]*si)*geluK2*(1+3*geluC*v*v))
		}
	})
}
