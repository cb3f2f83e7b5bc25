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
// z = x + bias (bias nil: x) and sigmoid(2u) at hand.
func geluRows(x, bias []float32, rows, cols int, body func(off int, z, s []float32)) {
	parallelFor(rows, max(1, elementGrain/4/max(cols, 1)), func(lo, hi int) {
		var zb, sb [sigmoidChunk]float32
		for r := lo; r < hi; r++ {
			for c0 := 0; c0 < cols; c0 += sigmoidChunk {
				c1 := min(c0+sigmoidChunk, cols)
				off := r*cols + c0
				z, a := zb[:c1-c0], sb[:c1-c0]
				copy(z, x[off:off+len(z)])
				if bias != nil {
					for i, b := range bias[c0:c1] {
						z[i] += b
					}
				}
				for i, v := range z {
					a[i] = geluK2 * (v + geluC*v*v*v)
				}
				body(off, z, sigmoidInto(&sb, a))
			}
		}
	})
}

// GELUTanh computes out = gelu(x + bias) with gelu(z) = z sigmoid(2u),
// u = sqrt(2/pi) (z + 0.044715 z^3), the tanh form's value (1 + tanh u)/2
// = sigmoid(2u), on the vector exponential.
func (d *Device) GELUTanh(out, x, bias device.Buffer, rows, cols int) {
	ov := Float32s(out)
	geluRows(Float32s(x), optFloat32s(bias), rows, cols, func(off int, z, s []float32) {
		o := ov[off : off+len(z)]
		for i, v := range z {
			o[i] = v * s[i]
		}
	})
}

// GELUTanhBackward computes dx = dout gelu'(x + bias), gelu'(z) =
// s + z s (1 - s) 2 sqrt(2/pi) (1 + 3 0.044715 z^2) with s = sigmoid(2u).
func (d *Device) GELUTanhBackward(dx, dout, x, bias device.Buffer, rows, cols int) {
	dv, gv := Float32s(dx), Float32s(dout)
	geluRows(Float32s(x), optFloat32s(bias), rows, cols, func(off int, z, s []float32) {
		ds, gs := dv[off:off+len(z)], gv[off:off+len(z)]
		for i, v := range z {
			si := s[i]
			ds[i] = gs[i] * (si + v*si*(1-si)*geluK2*(1+3*geluC*v*v))
		}
	})
}
