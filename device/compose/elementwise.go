package compose

import "github.com/hilbert-ml/hilbert/device"

// Transpose is device.Transposer's Transpose on any backend.
func Transpose(d device.Core, dst, src device.Buffer, batch, rows, cols, inner int) {
	if f, ok := d.(device.Transposer); ok {
		f.Transpose(dst, src, batch, rows, cols, inner)
		return
	}
	dims := device.DimsOf(batch, cols, rows, inner)
	d.CopyStrided(dims, device.Contiguous(dst, dims), view(src, 0, rows*cols*inner, inner, cols*inner, 1))
}

// FillFrom sets every element of dst to alpha * src[0], src being read
// on the device (a broadcast of a device scalar without a host trip).
func FillFrom(d device.Core, dst, src device.Buffer, alpha float32) {
	dims := device.DimsOf(dst.Len())
	d.CopyStrided(dims, device.Contiguous(dst, dims), bcast(src.Slice(0, 1)))
	if alpha != 1 {
		Axpby(d, dst, dst, alpha, 0)
	}
}

// Scale computes dst = alpha * src (Axpby with beta 0); dst may alias src.
func Scale(d device.Core, dst, src device.Buffer, alpha float32) { Axpby(d, dst, src, alpha, 0) }

// Axpby is device.Axpbyer's Axpby on any backend.
func Axpby(d device.Core, dst, x device.Buffer, alpha, beta float32) {
	if f, ok := d.(device.Axpbyer); ok {
		f.Axpby(dst, x, alpha, beta)
		return
	}
	if beta == 0 {
		scalarInto(d, "Axpby", device.Mul, dst, x, float64(alpha))
		return
	}
	t := temp(d, "Axpby", dst.DType(), dst.Len())
	scalarInto(d, "Axpby", device.Mul, t, x, float64(alpha))
	if beta != 1 {
		scalarInto(d, "Axpby", device.Mul, dst, dst, float64(beta))
	}
	d.BinaryStrided(device.Add, device.DimsOf(dst.Len()), dst, flat(dst), flat(t))
	d.Free(t)
}

// AddRow computes dst[i,:] += alpha * v for each row i of a rows x cols
// matrix, v having cols elements.
func AddRow(d device.Core, dst, v device.Buffer, rows, cols int, alpha float32) {
	dims := device.DimsOf(rows, cols)
	if alpha == 1 || alpha == -1 { // no scaled copy of v
		op := device.Add
		if alpha == -1 {
			op = device.Sub
		}
		d.BinaryStrided(op, dims, dst, device.Contiguous(dst, dims), view(v, 0, 0, 1))
		return
	}
	t := temp(d, "AddRow", dst.DType(), cols)
	Axpby(d, t, v.Slice(0, cols), alpha, 0)
	d.BinaryStrided(device.Add, dims, dst, device.Contiguous(dst, dims), view(t, 0, 0, 1))
	d.Free(t)
}

// Reduce is device.Reducer's Reduce on any backend.
func Reduce(d device.Core, op device.ReduceOp, axis int, dst, src device.Buffer, rows, cols int) {
	if f, ok := d.(device.Reducer); ok {
		f.Reduce(op, axis, dst, src, rows, cols)
		return
	}
	if axis == 1 {
		d.ReduceAxis(op, dst, src, rows, cols, 1)
	} else {
		d.ReduceAxis(op, dst, src, 1, rows, cols)
	}
}

// Gather is device.RowGatherer's Gather on any backend.
func Gather(d device.Core, dst, table, idx device.Buffer, cols int) {
	if f, ok := d.(device.RowGatherer); ok {
		f.Gather(dst, table, idx, cols)
		return
	}
	d.GatherAxis(dst, table, view(idx, 0, 0, 1, 0), 1, table.Len()/max(cols, 1), cols, idx.Len())
}

// ScatterAdd is device.RowGatherer's ScatterAdd on any backend.
func ScatterAdd(d device.Core, dst, src, idx device.Buffer, cols int) {
	if f, ok := d.(device.RowGatherer); ok {
		f.ScatterAdd(dst, src, idx, cols)
		return
	}
	d.ScatterAddAxis(dst, src, view(idx, 0, 0, 1, 0), 1, dst.Len()/max(cols, 1), cols, idx.Len())
}
