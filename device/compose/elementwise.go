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

// FillFrom is device.Elementwise's FillFrom on any backend.
func FillFrom(d device.Core, dst, src device.Buffer, alpha float32) {
	if f, ok := d.(device.Elementwise); ok {
		f.FillFrom(dst, src, alpha)
		return
	}
	s := scalar(d, "FillFrom", dst.DType(), float64(alpha))
	d.BinaryStrided(device.Mul, device.DimsOf(dst.Len()), dst, bcast(src.Slice(0, 1)), bcast(s))
	d.Free(s)
}

// Binary is device.Elementwise's Binary on any backend.
func Binary(d device.Core, op device.BinaryOp, dst, a, b device.Buffer) {
	if f, ok := d.(device.Elementwise); ok {
		f.Binary(op, dst, a, b)
		return
	}
	d.BinaryStrided(op, device.DimsOf(dst.Len()), dst, flat(a), flat(b))
}

// Scale is device.Elementwise's Scale on any backend.
func Scale(d device.Core, dst, src device.Buffer, alpha float32) {
	if f, ok := d.(device.Elementwise); ok {
		f.Scale(dst, src, alpha)
		return
	}
	scaleInto(d, "Scale", dst, src, float64(alpha))
}

// Axpby is device.Elementwise's Axpby on any backend.
func Axpby(d device.Core, dst, x device.Buffer, alpha, beta float32) {
	if f, ok := d.(device.Elementwise); ok {
		f.Axpby(dst, x, alpha, beta)
		return
	}
	t := temp(d, "Axpby", dst.DType(), dst.Len())
	scaleInto(d, "Axpby", t, x, float64(alpha))
	scaleInto(d, "Axpby", dst, dst, float64(beta))
	d.BinaryStrided(device.Add, device.DimsOf(dst.Len()), dst, flat(dst), flat(t))
	d.Free(t)
}

// AddRow is device.Elementwise's AddRow on any backend.
func AddRow(d device.Core, dst, v device.Buffer, rows, cols int, alpha float32) {
	if f, ok := d.(device.Elementwise); ok {
		f.AddRow(dst, v, rows, cols, alpha)
		return
	}
	t := temp(d, "AddRow", dst.DType(), cols)
	scaleInto(d, "AddRow", t, v.Slice(0, cols), float64(alpha))
	dims := device.DimsOf(rows, cols)
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
