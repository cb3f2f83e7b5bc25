package compose

import (
	"math"

	"github.com/hilbert-ml/hilbert/device"
)

// AdamWStep is device.AdamWStepper's AdamWStep on any backend.
func AdamWStep(d device.Core, p, g, m, v, step device.Buffer, h device.AdamW) {
	if f, ok := d.(device.AdamWStepper); ok {
		f.AdamWStep(p, g, m, v, step, h)
		return
	}
	const op = "AdamWStep"
	dt, n := p.DType(), p.Len()
	dims := device.DimsOf(n)
	c1, c2, decay := h.Coefficients() // the kernels' coefficients, from float64
	t := temp(d, op, dt, n)
	u := temp(d, op, dt, n)
	// m = b1 m + (1-b1) g
	scaleInto(d, op, t, g, float64(c1))
	scaleInto(d, op, m, m, float64(h.Beta1))
	d.BinaryStrided(device.Add, dims, m, flat(m), flat(t))
	// v = b2 v + (1-b2) g^2
	d.Unary(device.Square, t, g)
	scaleInto(d, op, t, t, float64(c2))
	scaleInto(d, op, v, v, float64(h.Beta2))
	d.BinaryStrided(device.Add, dims, v, flat(v), flat(t))
	// step = -lr (m/bc1) / (sqrt(v/bc2) + eps)
	scaleInto(d, op, u, v, 1/float64(h.BiasCorrection2))
	d.Unary(device.Sqrt, u, u)
	addScalar(d, op, u, u, float64(h.Eps))
	scaleInto(d, op, t, m, -float64(h.LR)/float64(h.BiasCorrection1))
	d.BinaryStrided(device.Div, dims, t, flat(t), flat(u))
	// p = p (1 - lr wd) + step
	if h.WeightDecay != 0 {
		scaleInto(d, op, p, p, float64(decay))
	}
	d.BinaryStrided(device.Add, dims, p, flat(p), flat(t))
	if step != nil {
		d.Copy(step, t)
	}
	d.Free(t)
	d.Free(u)
}

// PairDistanceMax is device.PairDistanceMaxer's PairDistanceMax on any
// backend. The composition masks the uncounted pairs and NaNs to -Inf on
// the device, reduces each row to its maximum and first argmax, and
// updates the running maximum (rows elements) on the host.
func PairDistanceMax(d device.Core, best, arg, g, na, nb device.Buffer, rows, cols, r0, c0 int) {
	if f, ok := d.(device.PairDistanceMaxer); ok {
		f.PairDistanceMax(best, arg, g, na, nb, rows, cols, r0, c0)
		return
	}
	if rows == 0 || cols == 0 {
		return
	}
	const op = "PairDistanceMax"
	dt := g.DType()
	dims := device.DimsOf(rows, cols)
	x := temp(d, op, dt, rows*cols)
	t := temp(d, op, dt, rows*cols)
	xv, tv := device.Contiguous(x, dims), device.Contiguous(t, dims)
	d.BinaryStrided(device.Add, dims, x, view(na, 0, 1, 0), view(nb, 0, 0, 1))
	scaleInto(d, op, t, g.Slice(0, rows*cols), 2)
	d.BinaryStrided(device.Sub, dims, x, xv, tv)
	counted := make([]float64, rows*cols)
	for i := range rows {
		for j := range cols {
			if c0+j > r0+i {
				counted[i*cols+j] = 1
			}
		}
	}
	d.CopyFloat64FromHost(t, counted)
	u := temp(d, op, dt, rows*cols)
	d.BinaryStrided(device.Eq, dims, u, xv, xv) // 0 where x is NaN
	d.BinaryStrided(device.Mul, dims, t, tv, device.Contiguous(u, dims))
	ninf := scalar(d, op, dt, math.Inf(-1))
	d.Where(dims, x, tv, xv, bcast(ninf))
	mx := temp(d, op, dt, rows)
	am := temp(d, op, device.Int32, rows)
	d.ReduceAxis(device.Max, mx, x, rows, cols, 1)
	d.ReduceAxis(device.ArgMax, am, x, rows, cols, 1)
	hm, hb := make([]float64, rows), make([]float64, rows)
	ha, harg := make([]int32, rows), make([]int32, rows)
	d.CopyFloat64ToHost(hm, mx)
	d.CopyInt32ToHost(ha, am)
	d.CopyFloat64ToHost(hb, best)
	d.CopyInt32ToHost(harg, arg)
	for i := range rows {
		if hm[i] > hb[i] {
			hb[i], harg[i] = hm[i], int32(c0)+ha[i]
		}
	}
	d.CopyFloat64FromHost(best, hb)
	d.CopyInt32FromHost(arg, harg)
	for _, b := range []device.Buffer{x, t, u, ninf, mx, am} {
		d.Free(b)
	}
}
