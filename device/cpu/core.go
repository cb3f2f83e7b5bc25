package cpu

import (
	"fmt"
	"math"

	"github.com/hilbert-ml/hilbert/device"
)

// The core ops (device.Core) for float32 and float64: generic loops over
// a device.Plan, parallel over runs of the plan's last axis with
// parallelFor. Strided or broadcast operands of a run are gathered into
// stack buffers of coreChunk elements, so that every op has one tight
// loop over contiguous slices and nothing is allocated but the workers'
// closures.

type float interface{ ~float32 | ~float64 }

// number is the element types of BinaryStrided and Where: the floats and
// int32 (whose arithmetic wraps, as Go's and PyTorch's does).
type number interface{ float | ~int32 }

// coreChunk is the length of the stack buffers strided operands are
// gathered into.
const coreChunk = 256

// transcendentalGrain is the parallel grain of ops that cost more than a
// few cycles per element.
const transcendentalGrain = elementGrain / 8

func fill[T any](x []T, v T) {
	parallelFor(len(x), elementGrain, func(lo, hi int) {
		s := x[lo:hi]
		for i := range s {
			s[i] = v
		}
	})
}

// runPlan calls seg for every run of consecutive elements along the
// plan's last axis, with each operand's element offset of the run's first
// element; the runs of [0, total) are split across workers.
func runPlan(p *device.Plan, grain int, seg func(off *[device.MaxOperands]int, n int)) {
	rows, inner := p.Inner()
	total := rows * inner
	if total == 0 {
		return
	}
	var st [device.MaxOperands]int
	for k := range p.Operands {
		st[k] = p.Layouts[k].Strides[p.Rank-1]
	}
	parallelFor(total, grain, func(lo, hi int) {
		r, c := lo/inner, lo%inner
		for pos := lo; pos < hi; r, c = r+1, 0 {
			off := p.RowOffsets(r)
			n := min(inner-c, hi-pos)
			for k := range p.Operands {
				off[k] += c * st[k]
			}
			seg(&off, n)
			pos += n
		}
	})
}

// innerStride returns operand k's stride along the plan's last axis.
func innerStride(p *device.Plan, k int) int { return p.Layouts[k].Strides[p.Rank-1] }

// gather returns the n elements of x from off with stride st: a subslice
// when st is 1, else a copy into buf.
func gather[T any](buf []T, x []T, off, st int) []T {
	if st == 1 {
		return x[off : off+len(buf)]
	}
	if st == 0 {
		v := x[off]
		for i := range buf {
			buf[i] = v
		}
		return buf
	}
	for i := range buf {
		buf[i] = x[off+i*st]
	}
	return buf
}

// CopyStrided copies dims' elements from src to dst through their
// layouts, for every dtype.
func (d *Device) CopyStrided(dims device.Dims, dst, src device.View) {
	p := device.NewPlan(dims, dst.Layout, src.Layout)
	switch dt := dst.Buf.DType(); dt {
	case device.Float32:
		copyStrided(&p, Float32s(dst.Buf), Float32s(src.Buf))
	case device.Float64:
		copyStrided(&p, Float64s(dst.Buf), Float64s(src.Buf))
	case device.Int32:
		copyStrided(&p, Int32s(dst.Buf), Int32s(src.Buf))
	case device.BFloat16:
		copyStrided(&p, BFloat16s(dst.Buf), BFloat16s(src.Buf))
	default:
		panic(fmt.Sprintf("cpu: CopyStrided of %v", dt))
	}
}

func copyStrided[T any](p *device.Plan, z, x []T) {
	zs, xs := innerStride(p, 0), innerStride(p, 1)
	runPlan(p, elementGrain, func(off *[device.MaxOperands]int, n int) {
		zo, xo := off[0], off[1]
		switch {
		case zs == 1 && xs == 1:
			copy(z[zo:zo+n], x[xo:xo+n])
		case zs == 1:
			gather(z[zo:zo+n], x, xo, xs)
		default:
			for i := range n {
				z[zo+i*zs] = x[xo+i*xs]
			}
		}
	})
}

// Unary computes dst = op(src) elementwise.
func (d *Device) Unary(op device.UnaryOp, dst, src device.Buffer) {
	if dst.DType() == device.Float64 {
		unary(op, Float64s(dst), Float64s(src))
		return
	}
	unary(op, Float32s(dst), Float32s(src))
}

func unary[T float](op device.UnaryOp, z, x []T) {
	x = x[:len(z)]
	grain := transcendentalGrain
	if op == device.Neg || op == device.Abs || op == device.Relu || op == device.Square || op == device.Sign {
		grain = elementGrain
	}
	parallelFor(len(z), grain, func(lo, hi int) { unaryVV(op, z[lo:hi], x[lo:hi]) })
}

// is32 reports whether T is float32 (for the float32 fast paths).
func is32[T float]() bool {
	var v T = 1 << 30
	v++
	return v == 1<<30 // 2^30 + 1 rounds to 2^30 only in float32
}

// unaryVV computes z = op(x) elementwise.
//
// funclen: one case per op, each with its own loop, so that every loop is
// a plain, monomorphic pass the compiler keeps tight; split into a
// function per op it would only add a table beside the switch.
func unaryVV[T float](op device.UnaryOp, z, x []T) {
	x = x[:len(z)]
	f := func(g func(float64) float64) {
		for i, v := range x {
			z[i] = T(g(float64(v)))
		}
	}
	switch op {
	case device.Neg:
		for i, v := range x {
			z[i] = -v
		}
	case device.Abs:
		for i, v := range x {
			z[i] = T(math.Abs(float64(v)))
		}
	case device.Exp:
		if is32[T]() {
			for i, v := range x {
				z[i] = T(expf(float32(v)))
			}
			return
		}
		f(math.Exp)
	case device.Log:
		f(math.Log)
	case device.Sqrt:
		f(math.Sqrt)
	case device.Rsqrt:
		for i, v := range x {
			z[i] = T(1 / math.Sqrt(float64(v)))
		}
	case device.Reciprocal:
		for i, v := range x {
			z[i] = 1 / v
		}
	case device.Tanh:
		if is32[T]() {
			for i, v := range x {
				z[i] = T(tanhf(float32(v)))
			}
			return
		}
		f(math.Tanh)
	case device.Erf:
		f(math.Erf)
	case device.Sigmoid:
		if is32[T]() {
			for i, v := range x {
				z[i] = T(1 / (1 + expf(-float32(v))))
			}
			return
		}
		for i, v := range x {
			z[i] = T(1 / (1 + math.Exp(-float64(v))))
		}
	case device.Relu:
		for i, v := range x {
			z[i] = max(v, 0)
		}
	case device.Sin:
		f(math.Sin)
	case device.Cos:
		f(math.Cos)
	case device.Square:
		for i, v := range x {
			z[i] = v * v
		}
	case device.Sign:
		for i, v := range x {
			switch {
			case v > 0:
				z[i] = 1
			case v < 0:
				z[i] = -1
			default:
				z[i] = v // ±0 and NaN
			}
		}
	case device.Log1p:
		f(math.Log1p)
	case device.Expm1:
		f(math.Expm1)
	default:
		panic(fmt.Sprintf("cpu: unknown unary op %v", op))
	}
}

// BinaryStrided computes dst = a op b over dims with broadcasting strides,
// for float32, float64 and int32 (every op but Div and Pow; int32 sums and
// products wrap).
func (d *Device) BinaryStrided(op device.BinaryOp, dims device.Dims, dst device.Buffer, a, b device.View) {
	if op < device.Add || op > device.Ge {
		panic(fmt.Sprintf("cpu: unknown binary op %v", op))
	}
	switch dst.DType() {
	case device.Float64:
		binaryStrided(op, dims, Float64s(dst), Float64s(a.Buf), a.Layout, Float64s(b.Buf), b.Layout)
	case device.Int32:
		if op == device.Div || op == device.Pow {
			panic(fmt.Sprintf("cpu: BinaryStrided %v of int32 (int32 takes add, sub, mul, maximum, minimum and the comparisons)", op))
		}
		binaryStrided(op, dims, Int32s(dst), Int32s(a.Buf), a.Layout, Int32s(b.Buf), b.Layout)
	default:
		binaryStrided(op, dims, Float32s(dst), Float32s(a.Buf), a.Layout, Float32s(b.Buf), b.Layout)
	}
}

func binaryStrided[T number](op device.BinaryOp, dims device.Dims, z, x []T, xl device.Layout, y []T, yl device.Layout) {
	p := device.NewPlan(dims, dims.RowMajor(), xl, yl)
	xs, ys := innerStride(&p, 1), innerStride(&p, 2)
	grain := elementGrain
	if op == device.Pow {
		grain = transcendentalGrain
	}
	runPlan(&p, grain, func(off *[device.MaxOperands]int, n int) {
		if xs == 1 && ys == 1 {
			binaryVV(op, z[off[0]:off[0]+n], x[off[1]:off[1]+n], y[off[2]:off[2]+n])
			return
		}
		var xb, yb [coreChunk]T
		for c := 0; c < n; c += coreChunk {
			m := min(coreChunk, n-c)
			binaryVV(op, z[off[0]+c:off[0]+c+m], gather(xb[:m], x, off[1]+c*xs, xs), gather(yb[:m], y, off[2]+c*ys, ys))
		}
	})
}

func mask[T number](c bool) T {
	if c {
		return 1
	}
	return 0
}

func binaryVV[T number](op device.BinaryOp, z, x, y []T) {
	x, y = x[:len(z)], y[:len(z)]
	switch op {
	case device.Add:
		for i := range z {
			z[i] = x[i] + y[i]
		}
	case device.Sub:
		for i := range z {
			z[i] = x[i] - y[i]
		}
	case device.Mul:
		for i := range z {
			z[i] = x[i] * y[i]
		}
	case device.Div:
		for i := range z {
			z[i] = x[i] / y[i]
		}
	case device.Maximum:
		for i := range z {
			z[i] = max(x[i], y[i])
		}
	case device.Minimum:
		for i := range z {
			z[i] = min(x[i], y[i])
		}
	case device.Pow:
		for i := range z {
			z[i] = T(math.Pow(float64(x[i]), float64(y[i])))
		}
	case device.Eq:
		for i := range z {
			z[i] = mask[T](x[i] == y[i])
		}
	case device.Ne:
		for i := range z {
			z[i] = mask[T](x[i] != y[i])
		}
	case device.Lt:
		for i := range z {
			z[i] = mask[T](x[i] < y[i])
		}
	case device.Le:
		for i := range z {
			z[i] = mask[T](x[i] <= y[i])
		}
	case device.Gt:
		for i := range z {
			z[i] = mask[T](x[i] > y[i])
		}
	case device.Ge:
		for i := range z {
			z[i] = mask[T](x[i] >= y[i])
		}
	}
}

// Where computes dst = cond != 0 ? a : b over dims, for float32, float64
// and int32 (cond of the operands' dtype).
func (d *Device) Where(dims device.Dims, dst device.Buffer, cond, a, b device.View) {
	switch dst.DType() {
	case device.Float64:
		where(dims, Float64s(dst), Float64s(cond.Buf), cond.Layout, Float64s(a.Buf), a.Layout, Float64s(b.Buf), b.Layout)
	case device.Int32:
		where(dims, Int32s(dst), Int32s(cond.Buf), cond.Layout, Int32s(a.Buf), a.Layout, Int32s(b.Buf), b.Layout)
	default:
		where(dims, Float32s(dst), Float32s(cond.Buf), cond.Layout, Float32s(a.Buf), a.Layout, Float32s(b.Buf), b.Layout)
	}
}

func where[T number](dims device.Dims, z, c []T, cl device.Layout, x []T, xl device.Layout, y []T, yl device.Layout) {
	p := device.NewPlan(dims, dims.RowMajor(), cl, xl, yl)
	cs, xs, ys := innerStride(&p, 1), innerStride(&p, 2), innerStride(&p, 3)
	runPlan(&p, elementGrain, func(off *[device.MaxOperands]int, n int) {
		var cb, xb, yb [coreChunk]T
		for k := 0; k < n; k += coreChunk {
			m := min(coreChunk, n-k)
			cv := gather(cb[:m], c, off[1]+k*cs, cs)
			xv := gather(xb[:m], x, off[2]+k*xs, xs)
			yv := gather(yb[:m], y, off[3]+k*ys, ys)
			zv := z[off[0]+k : off[0]+k+m]
			for i := range zv {
				if cv[i] != 0 {
					zv[i] = xv[i]
				} else {
					zv[i] = yv[i]
				}
			}
		}
	})
}

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
		for j := range n {
			row := x[base+j*inner : base+j*inner+w]
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

// Random fills dst from the Philox4x32-10 stream (see device.Philox4x32).
func (d *Device) Random(dist device.Distribution, dst device.Buffer, seed, offset uint64, a, b float32) {
	if dist < device.Uniform || dist > device.Bernoulli {
		panic(fmt.Sprintf("cpu: unknown distribution %v", dist))
	}
	if dst.DType() == device.Float64 {
		z := Float64s(dst)
		parallelFor(len(z), transcendentalGrain, func(lo, hi int) {
			device.FillRandom64(z[lo:hi], dist, seed, offset+uint64(lo), a, b)
		})
		return
	}
	z := Float32s(dst)
	parallelFor(len(z), transcendentalGrain, func(lo, hi int) {
		device.FillRandom(z[lo:hi], dist, seed, offset+uint64(lo), a, b)
	})
}
