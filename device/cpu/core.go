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
	case device.Softplus:
		f(func(v float64) float64 { return max(v, 0) + math.Log1p(math.Exp(-math.Abs(v))) })
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
	if zf, ok := any(z).([]float32); ok {
		if n := binaryFast(op, zf, any(x).([]float32), any(y).([]float32)); n > 0 {
			z, x, y = z[n:], x[n:], y[n:]
		}
	}
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
