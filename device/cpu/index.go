package cpu

import (
	"fmt"

	"github.com/hilbert-ml/hilbert/device"
)

// The Core's index ops along an axis: GatherAxis and ScatterAddAxis.

// GatherAxis reads dst[o,j,i] = src[o, idx[o,j,i], i].
func (d *Device) GatherAxis(dst, src device.Buffer, idx device.View, outer, n, inner, m int) {
	ix := Int32s(idx.Buf)
	switch dt := dst.DType(); dt {
	case device.Float32:
		gatherAxis(Float32s(dst), Float32s(src), ix, idx.Layout, outer, n, inner, m)
	case device.Float64:
		gatherAxis(Float64s(dst), Float64s(src), ix, idx.Layout, outer, n, inner, m)
	case device.Int32:
		gatherAxis(Int32s(dst), Int32s(src), ix, idx.Layout, outer, n, inner, m)
	default:
		panic(fmt.Sprintf("cpu: GatherAxis of %v", dt))
	}
}

func gatherAxis[T any](z, x []T, ix []int32, il device.Layout, outer, n, inner, m int) {
	s0, s1, s2 := il.Strides[0], il.Strides[1], il.Strides[2]
	if inner == 1 { // one element a row (im2col, IndexSelect of the last axis): no copy call per element
		parallelFor(outer*m, elementGrain, func(lo, hi int) {
			o, j := lo/m, lo%m
			for r := lo; r < hi; r++ {
				k := int(ix[il.Offset+o*s0+j*s1])
				if uint(k) >= uint(n) {
					panic(fmt.Sprintf("cpu: GatherAxis: index %d outside [0, %d)", k, n))
				}
				z[r] = x[o*n+k]
				if j++; j == m {
					o, j = o+1, 0
				}
			}
		})
		return
	}
	parallelFor(outer*m, max(1, elementGrain/max(inner, 1)), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			o, j := r/m, r%m
			at := il.Offset + o*s0 + j*s1
			row := z[r*inner : (r+1)*inner]
			src := x[o*n*inner : (o+1)*n*inner]
			if s2 == 0 {
				k := int(ix[at])
				copy(row, src[k*inner:(k+1)*inner])
				continue
			}
			for i := range row {
				row[i] = src[int(ix[at+i*s2])*inner+i]
			}
		}
	})
}

// ScatterAddAxis adds dst[o, idx[o,j,i], i] += src[o,j,i]. Workers own
// blocks of (outer, column) pairs and walk j in order, so the result does
// not depend on the thread count.
func (d *Device) ScatterAddAxis(dst, src device.Buffer, idx device.View, outer, n, inner, m int) {
	ix := Int32s(idx.Buf)
	if dst.DType() == device.Float64 {
		scatterAddAxis(Float64s(dst), Float64s(src), ix, idx.Layout, outer, n, inner, m)
		return
	}
	scatterAddAxis(Float32s(dst), Float32s(src), ix, idx.Layout, outer, n, inner, m)
}

func scatterAddAxis[T float](z, x []T, ix []int32, il device.Layout, outer, n, inner, m int) {
	if outer*inner*m == 0 {
		return
	}
	s0, s1, s2 := il.Strides[0], il.Strides[1], il.Strides[2]
	if inner == 1 { // one element a row (col2im, IndexSelect's gradient): each row's j in order
		parallelFor(outer, max(1, elementGrain/max(m, 1)), func(lo, hi int) {
			for o := lo; o < hi; o++ {
				dst, at := z[o*n:(o+1)*n], il.Offset+o*s0
				for j, v := range x[o*m : (o+1)*m] {
					dst[ix[at+j*s1]] += v
				}
			}
		})
		return
	}
	// Column blocks: enough units for the workers when outer is small.
	width := inner
	if want := 2 * Threads(); outer < want {
		width = max(64, (inner*outer+want-1)/want)
	}
	blocks := (inner + width - 1) / width
	parallelFor(outer*blocks, 1, func(lo, hi int) {
		for u := lo; u < hi; u++ {
			o, c0 := u/blocks, (u%blocks)*width
			c1 := min(c0+width, inner)
			dst := z[o*n*inner : (o+1)*n*inner]
			for j := range m {
				at := il.Offset + o*s0 + j*s1
				srow := x[(o*m+j)*inner+c0 : (o*m+j)*inner+c1]
				if s2 == 0 {
					k := int(ix[at])
					drow := dst[k*inner+c0 : k*inner+c1]
					for i, v := range srow {
						drow[i] += v
					}
					continue
				}
				for i, v := range srow {
					c := c0 + i
					dst[int(ix[at+c*s2])*inner+c] += v
				}
			}
		}
	})
}
