package cpu

import (
	"fmt"
	"math"

	"github.com/hilbert-ml/hilbert/device"
)

// elementGrain is the smallest number of elements worth a goroutine.
const elementGrain = 1 << 14

// Fill sets every element of dst to v.
func (d *Device) Fill(dst device.Buffer, v float32) {
	if dst.DType() == device.Float64 {
		fill(Float64s(dst), float64(v))
		return
	}
	x := Float32s(dst)
	zero := math.Float32bits(v) == 0 // +0 only: -0 has a sign bit to write
	parallelFor(len(x), elementGrain, func(lo, hi int) {
		s := x[lo:hi]
		if zero {
			clear(s) // memclr: several times faster than the loop
			return
		}
		for i := range s {
			s[i] = v
		}
	})
}

// Axpby computes dst = alpha*x + beta*dst (alpha*x when beta is 0, dst
// not read), with the AVX2 kernel for the bulk where there is one.
func (d *Device) Axpby(dst, x device.Buffer, alpha, beta float32) {
	xv, z := Float32s(x), Float32s(dst)
	parallelFor(len(z), elementGrain, func(lo, hi int) {
		xs, zs := xv[lo:hi], z[lo:hi]
		done := axpbyFast(zs, xs, alpha, beta)
		xs, zs = xs[done:], zs[done:]
		switch beta {
		case 1:
			for i := range zs {
				zs[i] += alpha * xs[i]
			}
		case 0:
			for i := range zs {
				zs[i] = alpha * xs[i]
			}
		default:
			for i := range zs {
				zs[i] = alpha*xs[i] + beta*zs[i]
			}
		}
	})
}

// Reduce reduces src (rows x cols) along axis 1 (per row) or 0 (per column).
func (d *Device) Reduce(op device.ReduceOp, axis int, dst, src device.Buffer, rows, cols int) {
	x, z := Float32s(src), Float32s(dst)
	if axis == 1 && op == device.SumSquares {
		parallelFor(rows, max(1, elementGrain/max(cols, 1)), func(lo, hi int) {
			rowSumSquares(z, x, cols, lo, hi)
		})
		return
	}
	if axis == 1 {
		parallelFor(rows, max(1, elementGrain/max(cols, 1)), func(lo, hi int) {
			for r := lo; r < hi; r++ {
				z[r] = reduceRow(op, x[r*cols:(r+1)*cols])
			}
		})
		return
	}
	// Per column: each worker owns a block of columns and walks all rows,
	// accumulating in float64.
	parallelFor(cols, 64, func(lo, hi int) {
		acc := make([]float64, hi-lo)
		if op == device.Max {
			for j := range acc {
				acc[j] = math.Inf(-1)
			}
		}
		done := colSumsFast(op, acc, x[lo:], rows, cols)
		for r := 0; r < rows; r++ {
			row, acc := x[r*cols+lo+done:r*cols+hi], acc[done:]
			switch op {
			case device.Sum:
				for j, v := range row {
					acc[j] += float64(v)
				}
			case device.SumSquares:
				for j, v := range row {
					acc[j] += float64(v) * float64(v)
				}
			case device.Max:
				for j, v := range row {
					acc[j] = math.Max(acc[j], float64(v))
				}
			}
		}
		for j, v := range acc {
			z[lo+j] = float32(v)
		}
	})
}

func reduceRow(op device.ReduceOp, row []float32) float32 {
	switch op {
	case device.Sum:
		var s float64
		for _, v := range row {
			s += float64(v)
		}
		return float32(s)
	case device.SumSquares:
		return float32(sumSquares(row))
	case device.Max:
		m := float32(math.Inf(-1))
		for _, v := range row {
			if v > m || v != v {
				m = v
			}
		}
		return m
	}
	panic(fmt.Sprintf("cpu: unknown reduction %v", op))
}

// rowSumSquares sets z[r] to sumSquares(row r) rounded to float32 for the
// rows r in [lo, hi) of x (cols wide), eight rows at a time by the vector
// kernel where it runs (the same sums).
func rowSumSquares(z, x []float32, cols, lo, hi int) {
	var buf [64]float64
	for b := lo; b < hi; b += len(buf) {
		ss := buf[:min(len(buf), hi-b)]
		rows := x[b*cols : (b+len(ss))*cols]
		for r := rowSumSquaresFast(ss, rows, cols); r < len(ss); r++ {
			ss[r] = sumSquares(rows[r*cols : (r+1)*cols])
		}
		for r, v := range ss {
			z[b+r] = float32(v)
		}
	}
}

// sumSquares returns the sum of squares of x in float64.
func sumSquares(x []float32) float64 {
	var s0, s1 float64
	i := 0
	for ; i+1 < len(x); i += 2 {
		s0 += float64(x[i]) * float64(x[i])
		s1 += float64(x[i+1]) * float64(x[i+1])
	}
	if i < len(x) {
		s0 += float64(x[i]) * float64(x[i])
	}
	return s0 + s1
}

// RowScale normalises each row: dst_i = alpha * src_i / (||src_i|| + eps)
// (optim.RowScaler).
func (d *Device) RowScale(dst, src device.Buffer, rows, cols int, alpha, eps float32) {
	x, z := Float32s(src), Float32s(dst)
	parallelFor(rows, max(1, elementGrain/max(cols, 1)), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			xs, zs := x[r*cols:(r+1)*cols], z[r*cols:(r+1)*cols]
			s := float32(float64(alpha) / (math.Sqrt(sumSquares(xs)) + float64(eps)))
			for i := range zs {
				zs[i] = xs[i] * s
			}
		}
	})
}

// Gather copies table rows: dst[i,:] = table[idx[i],:].
func (d *Device) Gather(dst, table, idx device.Buffer, cols int) {
	z, t, ix := Float32s(dst), Float32s(table), Int32s(idx)
	parallelFor(len(ix), max(1, elementGrain/max(cols, 1)), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			r := int(ix[i])
			copy(z[i*cols:(i+1)*cols], t[r*cols:(r+1)*cols])
		}
	})
}

// ScatterAdd accumulates rows: dst[idx[i],:] += src[i,:]. Work is split by
// column blocks so that repeated indices never race.
func (d *Device) ScatterAdd(dst, src device.Buffer, idx device.Buffer, cols int) {
	z, s, ix := Float32s(dst), Float32s(src), Int32s(idx)
	parallelFor(cols, 32, func(lo, hi int) {
		for i, r := range ix {
			zs := z[int(r)*cols+lo : int(r)*cols+hi]
			ss := s[i*cols+lo : i*cols+hi]
			for j := range zs {
				zs[j] += ss[j]
			}
		}
	})
}

// sigmoidChunk is the number of elements whose sigmoid is computed at once
// (a stack buffer for the vector exponential).
const sigmoidChunk = 256

// sigmoidInto writes sigmoid(a[i]) = 1/(1+e^-a[i]) into s (len(a) <=
// sigmoidChunk) with the vector exponential.
func sigmoidInto(s *[sigmoidChunk]float32, a []float32) []float32 {
	t := s[:len(a)]
	for i, v := range a {
		t[i] = -v
	}
	expShiftSum(t, t, 0)
	for i, e := range t {
		t[i] = 1 / (1 + e)
	}
	return t
}

// SwiGLU computes out = silu(a)*b: the AVX-512 kernel over each worker's
// longest multiple of 8 elements (bit for bit the loop below), the loop
// on sigmoidInto for the rest.
func (d *Device) SwiGLU(out, a, b device.Buffer) {
	x, y, z := Float32s(a), Float32s(b), Float32s(out)
	parallelFor(len(z), elementGrain/4, func(lo, hi int) {
		lo += swigluFast(z[lo:hi], x[lo:hi], y[lo:hi])
		var buf [sigmoidChunk]float32
		for c := lo; c < hi; c += sigmoidChunk {
			e := min(c+sigmoidChunk, hi)
			sig := sigmoidInto(&buf, x[c:e])
			xs, ys, zs := x[c:e], y[c:e], z[c:e]
			for i, s := range sig {
				zs[i] = xs[i] * s * ys[i]
			}
		}
	})
}

// SwiGLUBackward computes da = dout*b*silu'(a) and db = dout*silu(a), as
// SwiGLU with the AVX-512 kernel for the bulk.
func (d *Device) SwiGLUBackward(da, db, dout, a, b device.Buffer) {
	x, y, g := Float32s(a), Float32s(b), Float32s(dout)
	dx, dy := Float32s(da), Float32s(db)
	parallelFor(len(g), elementGrain/4, func(lo, hi int) {
		lo += swigluBackwardFast(dx[lo:hi], dy[lo:hi], g[lo:hi], x[lo:hi], y[lo:hi])
		var buf [sigmoidChunk]float32
		for c := lo; c < hi; c += sigmoidChunk {
			e := min(c+sigmoidChunk, hi)
			sig := sigmoidInto(&buf, x[c:e])
			for i, s := range sig {
				j := c + i
				av := x[j]
				silu := av * s
				gv := g[j]
				dx[j] = gv * y[j] * (s + silu*(1-s))
				dy[j] = gv * silu
			}
		}
	})
}

// AdamWStep applies one AdamW update in place (optim.AdamWStepper).
func (d *Device) AdamWStep(p, g, m, v, step device.Buffer, lr, beta1, beta2, oneMinusBeta1, oneMinusBeta2, eps, decay, bc1, bc2 float32) {
	pv, gv, mv, vv := Float32s(p), Float32s(g), Float32s(m), Float32s(v)
	var sv []float32
	if step != nil {
		sv = Float32s(step)
	}
	c := adamScalars32{-lr, beta1, beta2, oneMinusBeta1, oneMinusBeta2, eps, decay, bc1, bc2}
	parallelFor(len(pv), elementGrain/4, func(lo, hi int) {
		var ss []float32
		if sv != nil {
			ss = sv[lo:hi]
		}
		done := adamWFast(pv[lo:hi], gv[lo:hi], mv[lo:hi], vv[lo:hi], ss, &c)
		for i := lo + done; i < hi; i++ {
			gi := gv[i]
			mi := beta1*mv[i] + oneMinusBeta1*gi
			vi := beta2*vv[i] + oneMinusBeta2*gi*gi
			mv[i], vv[i] = mi, vi
			s := -lr * (mi / bc1) / (float32(math.Sqrt(float64(vi/bc2))) + eps)
			if sv != nil {
				sv[i] = s
			}
			pv[i] = pv[i]*decay + s
		}
	})
}

// adamScalars32 are AdamWStep's scalars as its vector kernel reads them:
// -lr, beta1, beta2, 1-beta1, 1-beta2, eps, decay, bc1, bc2.
type adamScalars32 [9]float32

// Transpose swaps the middle axes of [batch, rows, cols, inner].
func (d *Device) Transpose(dst, src device.Buffer, batch, rows, cols, inner int) {
	x, z := Float32s(src), Float32s(dst)
	if inner == 1 {
		transposeScalar(z, x, batch, rows, cols)
		return
	}
	parallelFor(batch*rows, max(1, elementGrain/max(cols*inner, 1)), func(lo, hi int) {
		for br := lo; br < hi; br++ {
			b, r := br/rows, br%rows
			for c := 0; c < cols; c++ {
				from := ((b*rows+r)*cols + c) * inner
				to := ((b*cols+c)*rows + r) * inner
				copy(z[to:to+inner], x[from:from+inner])
			}
		}
	})
}

// Tile of transposeScalar: rows, columns and the buffer's padded pitch
// (rows 1 KiB apart would share L1 sets).
const transposeRows, transposeCols, transposePitch = 64, 256, 256 + 16

// transposeTiles recycles the 68 KiB tile buffers (too large for a
// goroutine stack, so they would be heap allocations per call).
var transposeTiles = newFreeList[[transposeRows * transposePitch]float32](2 * nativeMaxHelpers)

// transposeScalar transposes batch matrices of rows x cols element by
// element, in tiles of 64 rows by 256 columns: each tile's rows are copied
// into a local buffer (1 KiB contiguous runs, which the hardware
// prefetcher follows, unlike a walk down a column whose every element is
// a separate memory miss), then written out column by column from the
// buffer. Workers own strips of 256 source columns.
func transposeScalar(z, x []float32, batch, rows, cols int) {
	strips := (cols + transposeCols - 1) / transposeCols
	parallelFor(batch*strips, 1, func(lo, hi int) {
		const tr, tc, ld = transposeRows, transposeCols, transposePitch
		tile := transposeTiles.get()
		defer transposeTiles.put(tile)
		buf := tile[:]
		for bs := lo; bs < hi; bs++ {
			b, c0 := bs/strips, (bs%strips)*tc
			cw := min(tc, cols-c0)
			xs, zs := x[b*rows*cols:(b+1)*rows*cols], z[b*rows*cols:(b+1)*rows*cols]
			for r0 := 0; r0 < rows; r0 += tr {
				rh := min(tr, rows-r0)
				for i := range rh {
					copy(buf[i*ld:i*ld+cw], xs[(r0+i)*cols+c0:])
				}
				for j := range cw {
					out := zs[(c0+j)*rows+r0 : (c0+j)*rows+r0+rh]
					for i := range out {
						out[i] = buf[i*ld+j]
					}
				}
			}
		}
	})
}
