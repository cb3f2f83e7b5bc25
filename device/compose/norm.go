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
	scaleInto(d, "RMSNorm", rstd, rstd, 1/float64(cols))
	addScalar(d, "RMSNorm", rstd, rstd, eps)
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
	scaleInto(d, op, c, c, 1/float64(cols))
	rowsTimes(d, dx, x, c, rows, cols)
	d.BinaryStrided(device.Sub, n, dx, flat(dy), flat(dx))
	rowsTimes(d, dx, dx, rstd, rows, cols)
	d.Free(c)
	d.Free(r2)
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
	d.Free(one)
	d.Free(s)
	d.Free(silu)
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
	d.Free(left)
	d.Free(right)
	d.Free(t)
}

func opposite(op device.BinaryOp) device.BinaryOp {
	if op == device.Add {
		return device.Sub
	}
	return device.Add
}
