package cuda

import (
	"fmt"

	"github.com/hilbert-ml/hilbert/device"
)

var storageTypes = []device.DType{device.Float32, device.BFloat16}

// suffix names the kernel instantiation for a storage dtype.
func suffix(t device.DType) string {
	if t == device.BFloat16 {
		return "_bf16"
	}
	return "_f32"
}

// Fill sets every element of dst to v (float32 or bfloat16 buffers).
func (d *Device) Fill(dst device.Buffer, v float32) {
	d.enter()
	defer d.leave()
	if !d.want("Fill", storageTypes, dst) {
		return
	}
	n := int64(dst.Len())
	d.launch1D("h_fill"+suffix(dst.DType()), n, ptrArg(dst), i64arg(n), f32arg(v))
}

// Axpby computes dst = alpha * x + beta * dst (dst not read when beta is
// 0).
func (d *Device) Axpby(dst, x device.Buffer, alpha, beta float32) {
	d.enter()
	defer d.leave()
	if !d.want("Axpby", []device.DType{dst.DType()}, x) || !d.want("Axpby", storageTypes, dst) {
		return
	}
	n := int64(dst.Len())
	d.launch1D("h_axpby"+suffix(dst.DType()), n, ptrArg(dst), ptrArg(x), i64arg(n), f32arg(alpha), f32arg(beta))
}

// Reduce reduces a rows x cols float32 matrix along axis 1 (one block per
// row) or axis 0 (one thread per column). Sums accumulate in float64.
func (d *Device) Reduce(op device.ReduceOp, axis int, dst, src device.Buffer, rows, cols int) {
	d.enter()
	defer d.leave()
	if !d.want("Reduce", f32Only, dst, src) {
		return
	}
	if op < device.Sum || op > device.Max || (axis != 0 && axis != 1) {
		d.unsupported("Reduce", "op "+op.String()+" or axis not supported")
		return
	}
	args := []uint64{ptrArg(dst), ptrArg(src), i64arg(int64(rows)), i64arg(int64(cols)), i32arg(int(op))}
	if axis == 1 {
		d.launchRows("h_reduce_rows_f32", rows, 256, args...)
	} else {
		d.launch1D("h_reduce_cols_f32", int64(cols), args...)
	}
}

// RowScale computes dst[i,:] = src[i,:] * alpha / (||src[i,:]|| + eps)
// (optim.RowScaler).
func (d *Device) RowScale(dst, src device.Buffer, rows, cols int, alpha, eps float32) {
	d.kernelRows("RowScale", "h_row_scale_f32", rows, 256, []device.Buffer{dst, src}, nil,
		i64arg(int64(rows)), i64arg(int64(cols)), f32arg(alpha), f32arg(eps))
}

// Gather copies rows of table into dst: dst[i,:] = table[idx[i],:].
func (d *Device) Gather(dst, table, idx device.Buffer, cols int) {
	rows := int64(idx.Len())
	d.kernel1D("Gather", "h_gather_f32", rows*int64(cols), []device.Buffer{dst, table}, []device.Buffer{idx}, i64arg(rows), i64arg(int64(cols)))
}

// ScatterAdd adds rows of src into dst at idx with atomic adds, so
// repeated indices accumulate (in an unspecified order).
func (d *Device) ScatterAdd(dst, src, idx device.Buffer, cols int) {
	rows := int64(idx.Len())
	d.kernel1D("ScatterAdd", "h_scatter_add_f32", rows*int64(cols), []device.Buffer{dst, src}, []device.Buffer{idx}, i64arg(rows), i64arg(int64(cols)))
}

// Transpose swaps the two middle axes of src viewed as [batch, rows, cols,
// inner] (any dtype; dst and src share it).
func (d *Device) Transpose(dst, src device.Buffer, batch, rows, cols, inner int) {
	d.enter()
	defer d.leave()
	if !d.want("Transpose", []device.DType{dst.DType()}, src) {
		return
	}
	name := "h_transpose_u32"
	if dst.DType().Size() == 2 {
		name = "h_transpose_u16"
	}
	n := int64(batch) * int64(rows) * int64(cols) * int64(inner)
	d.launch1D(name, n, ptrArg(dst), ptrArg(src), i64arg(int64(batch)), i64arg(int64(rows)), i64arg(int64(cols)), i64arg(int64(inner)))
}

// castKernels names the Cast kernel of each (destination, source) pair of
// distinct storage dtypes.
var castKernels = map[[2]device.DType]string{
	{device.BFloat16, device.Float32}: "h_cast_bf16_from_f32",
	{device.Float32, device.BFloat16}: "h_cast_f32_from_bf16",
	{device.Int32, device.Float32}:    "h_cast_i32_from_f32",
	{device.Int32, device.BFloat16}:   "h_cast_i32_from_bf16",
	{device.Float32, device.Int32}:    "h_cast_f32_from_i32",
	{device.BFloat16, device.Int32}:   "h_cast_bf16_from_i32",
}

// castTypes are the dtypes Cast converts between.
var castTypes = []device.DType{device.Float32, device.BFloat16, device.Int32}

// Cast converts between float32, bfloat16 and int32 with the semantics of
// device.Core.Cast: float32 -> bfloat16 and int32 -> float rounded to
// nearest even, float -> int32 rounded toward zero and saturated (NaN
// gives 0, as __float2int_rz); equal dtypes are a Copy.
func (d *Device) Cast(dst, src device.Buffer) {
	if dst.DType() == src.DType() {
		d.Copy(dst, src)
		return
	}
	d.enter()
	defer d.leave()
	if !d.want("Cast", castTypes, dst, src) {
		return
	}
	if dst.Len() != src.Len() {
		d.unsupported("Cast", fmt.Sprintf("lengths differ: %d <- %d", dst.Len(), src.Len()))
		return
	}
	n := int64(dst.Len())
	d.launch1D(castKernels[[2]device.DType{dst.DType(), src.DType()}], n, ptrArg(dst), ptrArg(src), i64arg(n))
}
