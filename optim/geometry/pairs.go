package geometry

import (
	"fmt"
	"math"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/compose"
)

// PairDistanceMaxer scans a tile of a Gram matrix for the farthest pairs
// in one pass (step 2 of RowDiameterDevice), a kernel a backend may
// implement (the CPU and CUDA backends do); RowDiameterDevice runs it
// through compose.Run, so that a wrapper such as device/profile sees it.
// Composition: pairDistanceMaxCore, its definition and the fallback.
type PairDistanceMaxer interface {
	// PairDistanceMax finds the farthest column of each row of a tile of a
	// Gram matrix. g is a rows x cols tile of inner products a_i . b_j; na
	// and nb hold the squared norms of the a rows (rows elements) and of
	// the b rows (cols elements), so that x_ij = na[i] + nb[j] - 2 g[i,j],
	// computed in float32, is the squared distance of a_i and b_j. The tile
	// sits at row r0 and column c0 of a symmetric Gram matrix and only pairs
	// above its diagonal count: column j of row i when c0+j > r0+i (a tile
	// with c0 >= r0+rows counts every pair). best (Float32) and arg (Int32),
	// rows elements each, hold a running maximum across calls (the column
	// tiles of one row block): when row i's largest x_ij exceeds best[i],
	// best[i] becomes it and arg[i] becomes c0+j, for the smallest such j.
	// Rows without a counted pair, and NaN values, change nothing; start
	// best at -Inf.
	PairDistanceMax(best, arg, g, na, nb device.Buffer, rows, cols, r0, c0 int)
}

// pairDistanceMax is PairDistanceMaxer's PairDistanceMax on any backend.
func pairDistanceMax(d device.Core, best, arg, g, na, nb device.Buffer, rows, cols, r0, c0 int) error {
	var err error
	compose.Run(d, "PairDistanceMax", func(k PairDistanceMaxer) { k.PairDistanceMax(best, arg, g, na, nb, rows, cols, r0, c0) },
		func(c device.Core) { err = pairDistanceMaxCore(c, best, arg, g, na, nb, rows, cols, r0, c0) })
	return err
}

// pairDistanceMaxCore is PairDistanceMax through the Core: it forms x by
// broadcasting, masks the uncounted pairs and NaNs to -Inf (Where), reduces
// each row to its maximum and first argmax, and updates the running
// maximum (rows elements) on the host.
func pairDistanceMaxCore(d device.Core, best, arg, g, na, nb device.Buffer, rows, cols, r0, c0 int) error {
	if rows == 0 || cols == 0 {
		return nil
	}
	dt, n := g.DType(), rows*cols
	f, err := d.Alloc(dt, 3*n+rows+2) // x, t, u, the row maxima, 2 and -Inf
	if err != nil {
		return fmt.Errorf("geometry: PairDistanceMax: scratch of %d %v: %w", 3*n+rows+2, dt, err)
	}
	defer d.Free(f)
	am, err := d.Alloc(device.Int32, rows) // the row argmaxima
	if err != nil {
		return fmt.Errorf("geometry: PairDistanceMax: scratch of %d int32: %w", rows, err)
	}
	defer d.Free(am)
	x, t, u, mx, consts := f.Slice(0, n), f.Slice(n, n), f.Slice(2*n, n), f.Slice(3*n, rows), f.Slice(3*n+rows, 2)
	dims := device.DimsOf(rows, cols)
	d.CopyFloat64FromHost(consts, []float64{2, math.Inf(-1)})
	two, ninf := device.View{Buf: consts.Slice(0, 1)}, device.View{Buf: consts.Slice(1, 1)}
	xv, tv, uv := device.Contiguous(x, dims), device.Contiguous(t, dims), device.Contiguous(u, dims)
	col, row := device.View{Buf: na}, device.View{Buf: nb} // na down the rows, nb along them
	col.Strides[0], row.Strides[1] = 1, 1
	d.BinaryStrided(device.Add, dims, x, col, row)
	d.BinaryStrided(device.Mul, dims, t, device.Contiguous(g, dims), two)
	d.BinaryStrided(device.Sub, dims, x, xv, tv) // x = na + nb - 2 g
	counted := make([]float64, n)
	for i := range rows {
		for j := range cols {
			if c0+j > r0+i {
				counted[i*cols+j] = 1
			}
		}
	}
	d.CopyFloat64FromHost(t, counted)
	d.BinaryStrided(device.Eq, dims, u, xv, xv) // 0 where x is NaN
	d.BinaryStrided(device.Mul, dims, t, tv, uv)
	d.Where(dims, x, tv, xv, ninf)
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
	return nil
}
