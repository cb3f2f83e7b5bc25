package cpu

import (
	"fmt"
	"math"

	"github.com/hilbert-ml/hilbert/device"
)

// The Core's reductions (sums, extremes and their indices over the middle
// axis of [outer, n, inner]), parallel over blocks of output columns.

// ReduceAxis reduces the middle axis of src [outer, n, inner] into dst
// [outer, inner].
func (d *Device) ReduceAxis(op device.ReduceOp, dst, src device.Buffer, outer, n, inner int) {
	if op < device.Sum || op > device.ArgMin {
		panic(fmt.Sprintf("cpu: unknown reduction %v", op))
	}
	arg := op == device.ArgMax || op == device.ArgMin
	var zi []int32
	if arg {
		zi = Int32s(dst)
	}
	if src.DType() == device.Float64 {
		var z []float64
		if !arg {
			z = Float64s(dst)
		}
		reduceAxis(op, z, zi, Float64s(src), outer, n, inner)
		return
	}
	var z []float32
	if !arg {
		z = Float32s(dst)
	}
	reduceAxis(op, z, zi, Float32s(src), outer, n, inner)
}

func reduceAxis[T float](op device.ReduceOp, z []T, zi []int32, x []T, outer, n, inner int) {
	if outer*inner == 0 {
		return
	}
	if n == 0 {
		if zi != nil {
			fill(zi[:outer*inner], -1)
			return
		}
		v := T(0)
		switch op {
		case device.Max:
			v = T(math.Inf(-1))
		case device.Min:
			v = T(math.Inf(1))
		}
		fill(z[:outer*inner], v)
		return
	}
	if inner == 1 {
		parallelFor(outer, max(1, elementGrain/n), func(lo, hi int) {
			for o := lo; o < hi; o++ {
				row := x[o*n : (o+1)*n]
				if zi != nil {
					zi[o] = argRow(op, row)
				} else {
					z[o] = reduceVec(op, row)
				}
			}
		})
		return
	}
	// Columns in blocks of coreChunk, each block walking the n rows.
	blocks := (inner + coreChunk - 1) / coreChunk
	parallelFor(outer*blocks, max(1, elementGrain/(n*min(inner, coreChunk))), func(lo, hi int) {
		var acc [coreChunk]float64
		var best [coreChunk]T
		var idx [coreChunk]int32
		for u := lo; u < hi; u++ {
			o, c0 := u/blocks, (u%blocks)*coreChunk
			w := min(coreChunk, inner-c0)
			reduceColumns(op, z, zi, x, o*n*inner+c0, o*inner+c0, w, n, inner, acc[:w], best[:w], idx[:w])
		}
	})
}

// reduceColumns reduces w adjacent columns over n rows of stride inner,
// starting at x[base], into z[at:at+w] (zi for ArgMax and ArgMin); acc,
// best and idx are w-long scratch.
func reduceColumns[T float](op device.ReduceOp, z []T, zi []int32, x []T, base, at, w, n, inner int, acc []float64, best []T, idx []int32) {
	switch op {
	case device.Sum, device.SumSquares:
		clear(acc)
		done := 0
		if xf, ok := any(x).([]float32); ok {
			done = colSumsFast(op, acc, xf[base:], n, inner)
		}
		for j := range n {
			row, acc := x[base+j*inner+done:base+j*inner+w], acc[done:]
			if op == device.Sum {
				for i, v := range row {
					acc[i] += float64(v)
				}
			} else {
				for i, v := range row {
					acc[i] += float64(v) * float64(v)
				}
			}
		}
		out := z[at : at+w]
		for i, v := range acc {
			out[i] = T(v)
		}
	case device.Max, device.Min:
		copy(best, x[base:base+w])
		for j := 1; j < n; j++ {
			row := x[base+j*inner : base+j*inner+w]
			if op == device.Max {
				for i, v := range row {
					best[i] = max(best[i], v)
				}
			} else {
				for i, v := range row {
					best[i] = min(best[i], v)
				}
			}
		}
		copy(z[at:at+w], best)
	default: // ArgMax, ArgMin
		copy(best, x[base:base+w])
		clear(idx)
		for j := 1; j < n; j++ {
			row := x[base+j*inner : base+j*inner+w]
			for i, v := range row {
				if better(op, v, best[i]) {
					best[i], idx[i] = v, int32(j)
				}
			}
		}
		copy(zi[at:at+w], idx)
	}
}

// better reports whether v displaces the running best of an ArgMax or
// ArgMin: strictly better, or the first NaN.
func better[T float](op device.ReduceOp, v, best T) bool {
	if best != best {
		return false
	}
	if v != v {
		return true
	}
	if op == device.ArgMax {
		return v > best
	}
	return v < best
}

func argRow[T float](op device.ReduceOp, row []T) int32 {
	best, bi := row[0], int32(0)
	for j := 1; j < len(row); j++ {
		if better(op, row[j], best) {
			best, bi = row[j], int32(j)
		}
	}
	return bi
}

func reduceVec[T float](op device.ReduceOp, row []T) T {
	switch op {
	case device.Sum:
		var s0, s1 float64
		i := 0
		for ; i+1 < len(row); i += 2 {
			s0 += float64(row[i])
			s1 += float64(row[i+1])
		}
		if i < len(row) {
			s0 += float64(row[i])
		}
		return T(s0 + s1)
	case device.SumSquares:
		var s float64
		for _, v := range row {
			s += float64(v) * float64(v)
		}
		return T(s)
	case device.Max:
		m := row[0]
		for _, v := range row[1:] {
			m = max(m, v)
		}
		return m
	default: // Min
		m := row[0]
		for _, v := range row[1:] {
			m = min(m, v)
		}
		return m
	}
}
