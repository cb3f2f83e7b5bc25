package compose

import "github.com/hilbert-ml/hilbert/device"

// rowsTimes computes dst = a * r[row] for a rows x cols matrix a and a
// vector r of rows elements (dst may be a).
func rowsTimes(d device.Core, dst, a, r device.Buffer, rows, cols int) {
	dims := device.DimsOf(rows, cols)
	d.BinaryStrided(device.Mul, dims, dst, device.Contiguous(a, dims), view(r, 0, 1, 0))
}

// RMSNorm is device.RMSNormer's RMSNorm on any backend. The backend's
// kernel takes eps rounded to float32; the composition adds eps rounded
// once to the buffers' dtype (exact in float64).
func RMSNorm(d device.Core, out, rstd, x device.Buffer, rows, cols int, eps float64) {
	if f, ok := d.(device.RMSNormer); ok {
		f.RMSNorm(out, rstd, x, rows, cols, float32(eps))
		return
	}
	d.ReduceAxis(device.SumSquares, rstd, x, rows, cols, 1)
	scalarInto(d, "RMSNorm", device.Mul, rstd, rstd, 1/float64(cols))
	scalarInto(d, "RMSNorm", device.Add, rstd, rstd, eps)
	d.Unary(device.Rsqrt, rstd, rstd)
	rowsTimes(d, out, x, rstd, rows, cols)
}

// RMSNormBackward is device.RMSNormer's RMSNormBackward on any backend:
// dx = rstd * (dy - x * rstd^2 * mean(dy * x)).
func RMSNormBackward(d device.Core, dx, dy, x, rstd device.Buffer, rows, cols int) {
	if f, ok := d.(device.RMSNormer); ok {
		f.RMSNormBackward(dx, dy, x, rstd, rows, cols)
		return
	}
	const op = "RMSNormBackward"
	n := device.DimsOf(rows * cols)
	c := temp(d, op, dx.DType(), rows)
	r2 := temp(d, op, dx.DType(), rows)
	d.BinaryStrided(device.Mul, n, dx, flat(dy), flat(x))
	d.ReduceAxis(device.Sum, c, dx, rows, cols, 1)
	d.Unary(device.Square, r2, rstd)
	d.BinaryStrided(device.Mul, device.DimsOf(rows), c, flat(c), flat(r2))
	scalarInto(d, op, device.Mul, c, c, 1/float64(cols))
	rowsTimes(d, dx, x, c, rows, cols)
	d.BinaryStrided(device.Sub, n, dx, flat(dy), flat(dx))
	rowsTimes(d, dx, dx, rstd, rows, cols)
	free(d, c, r2)
}

// RMSNormGain is device.RMSNormGainer's RMSNormGain on any backend:
// RMSNorm, then each row times gain.
func RMSNormGain(d device.Core, out, rstd, x, gain device.Buffer, rows, cols int, eps float64) {
	if f, ok := d.(device.RMSNormGainer); ok {
		f.RMSNormGain(out, rstd, x, gain, rows, cols, float32(eps))
		return
	}
	RMSNorm(d, out, rstd, x, rows, cols, eps)
	dims := device.DimsOf(rows, cols)
	d.BinaryStrided(device.Mul, dims, out, device.Contiguous(out, dims), view(gain, 0, 0, 1))
}

// RMSNormGainBackward is device.RMSNormGainer's RMSNormGainBackward on
// any backend: dx = RMSNormBackward(dy gain), dgain = the column sums of
// dy (x rstd) (none when dgain is nil).
func RMSNormGainBackward(d device.Core, dx, dgain, dy, x, rstd, gain device.Buffer, rows, cols int) {
	if f, ok := d.(device.RMSNormGainer); ok {
		f.RMSNormGainBackward(dx, dgain, dy, x, rstd, gain, rows, cols)
		return
	}
	const op = "RMSNormGainBackward"
	dims := device.DimsOf(rows, cols)
	t := temp(d, op, dx.DType(), rows*cols)
	d.BinaryStrided(device.Mul, dims, t, device.Contiguous(dy, dims), view(gain, 0, 0, 1))
	RMSNormBackward(d, dx, t, x, rstd, rows, cols)
	if dgain != nil {
		rowsTimes(d, t, x, rstd, rows, cols)
		d.BinaryStrided(device.Mul, dims, t, device.Contiguous(t, dims), device.Contiguous(dy, dims))
		d.ReduceAxis(device.Sum, dgain, t, 1, rows, cols)
	}
	d.Free(t)
}

// SwiGLU is device.SwiGLUer's SwiGLU on any backend.
func SwiGLU(d device.Core, out, a, b device.Buffer) {
	if f, ok := d.(device.SwiGLUer); ok {
		f.SwiGLU(out, a, b)
		return
	}
	n := device.DimsOf(out.Len())
	d.Unary(device.Sigmoid, out, a)
	d.BinaryStrided(device.Mul, n, out, flat(a), flat(out))
	d.BinaryStrided(device.Mul, n, out, flat(out), flat(b))
}

// SwiGLUBackward is device.SwiGLUer's SwiGLUBackward on any backend:
// db = dout * silu(a), da = dout * b * (s + silu(a) * (1 - s)) with
// s = sigmoid(a).
func SwiGLUBackward(d device.Core, da, db, dout, a, b device.Buffer) {
	if f, ok := d.(device.SwiGLUer); ok {
		f.SwiGLUBackward(da, db, dout, a, b)
		return
	}
	const op = "SwiGLUBackward"
	n := device.DimsOf(a.Len())
	s := temp(d, op, a.DType(), a.Len())
	silu := temp(d, op, a.DType(), a.Len())
	d.Unary(device.Sigmoid, s, a)
	d.BinaryStrided(device.Mul, n, silu, flat(a), flat(s))
	d.BinaryStrided(device.Mul, n, db, flat(dout), flat(silu))
	one := scalar(d, op, a.DType(), 1)
	d.BinaryStrided(device.Sub, n, da, bcast(one), flat(s)) // 1 - s
	d.BinaryStrided(device.Mul, n, da, flat(da), flat(silu))
	d.BinaryStrided(device.Add, n, da, flat(da), flat(s))
	d.BinaryStrided(device.Mul, n, da, flat(da), flat(dout))
	d.BinaryStrided(device.Mul, n, da, flat(da), flat(b))
	free(d, one, s, silu)
}

// RoPE is device.RoPEr's RoPE on any backend.
func RoPE(d device.Core, out, x, cos, sin device.Buffer, s device.AttentionShape, inverse bool) {
	if f, ok := d.(device.RoPEr); ok {
		f.RoPE(out, x, cos, sin, s, inverse)
		return
	}
	const op = "RoPE"
	D, half := s.HeadDim, s.HeadDim/2
	dims := device.DimsOf(s.Batch, s.Seq, s.Heads, half)
	st := []int{s.Seq * s.Heads * D, s.Heads * D, D, 1}
	l, r := view(x, 0, st...), view(x, half, st...)
	c, sn := view(cos, 0, 0, half, 0, 1), view(sin, 0, 0, half, 0, 1)
	n := dims.Numel()
	left := temp(d, op, x.DType(), n)
	right := temp(d, op, x.DType(), n)
	t := temp(d, op, x.DType(), n)
	lo, ro, tv := device.Contiguous(left, dims), device.Contiguous(right, dims), device.Contiguous(t, dims)
	combine := device.Sub // left = l cos - r sin, right = r cos + l sin
	if inverse {
		combine = device.Add // the opposite angle: left = l cos + r sin, right = r cos - l sin
	}
	d.BinaryStrided(device.Mul, dims, left, l, c)
	d.BinaryStrided(device.Mul, dims, t, r, sn)
	d.BinaryStrided(combine, dims, left, lo, tv)
	d.BinaryStrided(device.Mul, dims, right, r, c)
	d.BinaryStrided(device.Mul, dims, t, l, sn)
	d.BinaryStrided(opposite(combine), dims, right, ro, tv)
	d.CopyStrided(dims, view(out, 0, st...), lo)
	d.CopyStrided(dims, view(out, half, st...), ro)
	free(d, left, right, t)
}

func opposite(op device.BinaryOp) device.BinaryOp {
	if op == device.Add {
		return device.Sub
	}
	return device.Add
}

// LayerNorm is device.LayerNormer's LayerNorm on any backend (w, b nil:
// no gain, no bias). The backend's kernel takes eps rounded to float32;
// the composition adds eps rounded once to the buffers' dtype.
func LayerNorm(d device.Core, out, mean, rstd, x, w, b device.Buffer, rows, cols int, eps float64) {
	if f, ok := d.(device.LayerNormer); ok {
		f.LayerNorm(out, mean, rstd, x, w, b, rows, cols, float32(eps))
		return
	}
	const op = "LayerNorm"
	dims := device.DimsOf(rows, cols)
	d.ReduceAxis(device.Sum, mean, x, rows, cols, 1)
	scalarInto(d, op, device.Mul, mean, mean, 1/float64(cols))
	d.BinaryStrided(device.Sub, dims, out, device.Contiguous(x, dims), view(mean, 0, 1, 0))
	d.ReduceAxis(device.SumSquares, rstd, out, rows, cols, 1)
	scalarInto(d, op, device.Mul, rstd, rstd, 1/float64(cols))
	scalarInto(d, op, device.Add, rstd, rstd, eps)
	d.Unary(device.Rsqrt, rstd, rstd)
	rowsTimes(d, out, out, rstd, rows, cols)
	if w != nil {
		d.BinaryStrided(device.Mul, dims, out, device.Contiguous(out, dims), view(w, 0, 0, 1))
	}
	if b != nil {
		d.BinaryStrided(device.Add, dims, out, device.Contiguous(out, dims), view(b, 0, 0, 1))
	}
}

// LayerNormBackward is device.LayerNormer's LayerNormBackward on any
// backend: with xhat = (x - mean) rstd and g = dy w,
// dx = rstd (g - mean(g) - xhat mean(g xhat)); dw and db (where not nil)
// the column sums of dy xhat and of dy. dx may not alias dy.
func LayerNormBackward(d device.Core, dx, dw, db, dy, x, w, mean, rstd device.Buffer, rows, cols int) {
	if f, ok := d.(device.LayerNormer); ok {
		f.LayerNormBackward(dx, dw, db, dy, x, w, mean, rstd, rows, cols)
		return
	}
	const op = "LayerNormBackward"
	dt, n, dims := dx.DType(), rows*cols, device.DimsOf(rows, cols)
	flat2 := func(b device.Buffer) device.View { return device.Contiguous(b, dims) }
	xhat, g, t := temp(d, op, dt, n), temp(d, op, dt, n), temp(d, op, dt, n)
	c1, c2 := temp(d, op, dt, rows), temp(d, op, dt, rows)
	d.BinaryStrided(device.Sub, dims, xhat, flat2(x), view(mean, 0, 1, 0))
	rowsTimes(d, xhat, xhat, rstd, rows, cols)
	if db != nil {
		d.ReduceAxis(device.Sum, db, dy, 1, rows, cols)
	}
	if dw != nil {
		d.BinaryStrided(device.Mul, dims, t, flat2(dy), flat2(xhat))
		d.ReduceAxis(device.Sum, dw, t, 1, rows, cols)
	}
	if w != nil {
		d.BinaryStrided(device.Mul, dims, g, flat2(dy), view(w, 0, 0, 1))
	} else {
		d.Copy(g, dy)
	}
	d.ReduceAxis(device.Sum, c1, g, rows, cols, 1)
	scalarInto(d, op, device.Mul, c1, c1, 1/float64(cols))
	d.BinaryStrided(device.Mul, dims, t, flat2(g), flat2(xhat))
	d.ReduceAxis(device.Sum, c2, t, rows, cols, 1)
	scalarInto(d, op, device.Mul, c2, c2, 1/float64(cols))
	rowsTimes(d, t, xhat, c2, rows, cols)
	d.BinaryStrided(device.Sub, dims, dx, flat2(g), flat2(t))
	d.BinaryStrided(device.Sub, dims, dx, flat2(dx), view(c1, 0, 1, 0))
	rowsTimes(d, dx, dx, rstd, rows, cols)
	free(d, xhat, g, t, c1, c2)
}

// Constants of GELU's tanh approximation: u = geluK (z + geluC z^3).
const (
	geluK = 0.7978845608028654 // sqrt(2/pi)
	geluC = 0.044715
)

// geluInput writes z = x + bias (bias broadcast over rows; nil: z = x)
// into a temporary and returns it.
func geluInput(d device.Core, op string, x, bias device.Buffer, rows, cols int) device.Buffer {
	z := temp(d, op, x.DType(), rows*cols)
	if bias == nil {
		d.Copy(z, x)
		return z
	}
	dims := device.DimsOf(rows, cols)
	d.BinaryStrided(device.Add, dims, z, device.Contiguous(x, dims), view(bias, 0, 0, 1))
	return z
}

// GELUTanh is device.GELUer's GELUTanh on any backend:
// out = z/2 (1 + tanh(sqrt(2/pi) (z + 0.044715 z^3))), z = x + bias.
func GELUTanh(d device.Core, out, x, bias device.Buffer, rows, cols int) {
	if f, ok := d.(device.GELUer); ok {
		f.GELUTanh(out, x, bias, rows, cols)
		return
	}
	const op = "GELUTanh"
	n := device.DimsOf(rows * cols)
	z := geluInput(d, op, x, bias, rows, cols)
	u := temp(d, op, x.DType(), rows*cols)
	d.Unary(device.Square, u, z)
	d.BinaryStrided(device.Mul, n, u, flat(u), flat(z))
	scalarInto(d, op, device.Mul, u, u, geluC)
	d.BinaryStrided(device.Add, n, u, flat(u), flat(z))
	scalarInto(d, op, device.Mul, u, u, geluK)
	d.Unary(device.Tanh, u, u)
	scalarInto(d, op, device.Add, u, u, 1)
	d.BinaryStrided(device.Mul, n, out, flat(z), flat(u))
	scalarInto(d, op, device.Mul, out, out, 0.5)
	free(d, z, u)
}

// GELUTanhBackward is device.GELUer's GELUTanhBackward on any backend:
// dx = dout (1/2 (1 + t) + z/2 (1 - t^2) sqrt(2/pi) (1 + 3 0.044715 z^2))
// with t = tanh(sqrt(2/pi) (z + 0.044715 z^3)), z = x + bias.
func GELUTanhBackward(d device.Core, dx, dout, x, bias device.Buffer, rows, cols int) {
	if f, ok := d.(device.GELUer); ok {
		f.GELUTanhBackward(dx, dout, x, bias, rows, cols)
		return
	}
	const op = "GELUTanhBackward"
	dt, n := x.DType(), device.DimsOf(rows*cols)
	z := geluInput(d, op, x, bias, rows, cols)
	z2, t, s := temp(d, op, dt, rows*cols), temp(d, op, dt, rows*cols), temp(d, op, dt, rows*cols)
	d.Unary(device.Square, z2, z)
	// t = tanh(geluK (z + geluC z^3))
	d.BinaryStrided(device.Mul, n, t, flat(z2), flat(z))
	scalarInto(d, op, device.Mul, t, t, geluC)
	d.BinaryStrided(device.Add, n, t, flat(t), flat(z))
	scalarInto(d, op, device.Mul, t, t, geluK)
	d.Unary(device.Tanh, t, t)
	// s = z/2 (1 - t^2) geluK (1 + 3 geluC z^2)
	scalarInto(d, op, device.Mul, z2, z2, 3*geluC)
	scalarInto(d, op, device.Add, z2, z2, 1)
	scalarInto(d, op, device.Mul, z2, z2, geluK/2)
	d.Unary(device.Square, s, t)
	scalarInto(d, op, device.Mul, s, s, -1)
	scalarInto(d, op, device.Add, s, s, 1)
	d.BinaryStrided(device.Mul, n, s, flat(s), flat(z2))
	d.BinaryStrided(device.Mul, n, s, flat(s), flat(z))
	// dx = dout (s + (1 + t)/2)
	scalarInto(d, op, device.Add, t, t, 1)
	scalarInto(d, op, device.Mul, t, t, 0.5)
	d.BinaryStrided(device.Add, n, s, flat(s), flat(t))
	d.BinaryStrided(device.Mul, n, dx, flat(dout), flat(s))
	free(d, z, z2, t, s)
}
