package cpu

import (
	"math"

	"github.com/hilbert-ml/hilbert/device"
)

// PairDistanceMax keeps, for each row i of a rows x cols Gram tile at (r0,
// c0), the running maximum of na[i] + nb[j] - 2 g[i,j] over the columns
// above the diagonal (c0+j > r0+i) and its column c0+j (the smallest j on
// ties), updating best[i] and arg[i] only when it grows
// (geometry.PairDistanceMaxer). Rows are split over the workers.
func (d *Device) PairDistanceMax(best, arg, g, na, nb device.Buffer, rows, cols, r0, c0 int) {
	bv, ai, gv, a, b := Float32s(best), Int32s(arg), Float32s(g), Float32s(na), Float32s(nb)
	parallelFor(rows, max(1, elementGrain/max(cols, 1)), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			j0 := max(0, r0+i+1-c0)
			if j0 >= cols {
				continue
			}
			row := gv[i*cols+j0 : (i+1)*cols]
			nbs := b[j0:cols]
			nbs = nbs[:len(row)]
			ni := a[i]
			m, mj := float32(math.Inf(-1)), -1
			for j, x := range row {
				if v := ni + nbs[j] - 2*x; v > m {
					m, mj = v, j
				}
			}
			if mj >= 0 && m > bv[i] {
				bv[i], ai[i] = m, int32(c0+j0+mj)
			}
		}
	})
}
