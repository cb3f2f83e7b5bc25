package cuda

import (
	"fmt"

	"github.com/hilbert-ml/hilbert/device"
)

// The core ops (device.Core) on CUDA: the kernels of kernels/core.cu,
// float32 only (Alloc refuses Float64). Strided ops are simplified on the
// host (device.NewPlan) and pass the plan to the kernel as a struct Geo.

// geoWords is struct Geo of kernels/core.cu: rank, total, n[6], off[4],
// st[4][6], each a 64-bit integer.
type geoWords [2 + device.MaxDims + device.MaxOperands + device.MaxOperands*device.MaxDims]uint64

// setGeo writes plan p into the launch's Geo parameter and returns the
// number of elements.
func (d *Device) setGeo(p *device.Plan) int64 {
	g := &d.args.geo
	*g = geoWords{}
	total := int64(p.Numel())
	g[0], g[1] = uint64(p.Rank), uint64(total)
	for i := range p.Rank {
		g[2+i] = uint64(p.N[i])
	}
	for k := range p.Operands {
		l := &p.Layouts[k]
		g[2+device.MaxDims+k] = uint64(int64(l.Offset))
		for i := range p.Rank {
			g[2+device.MaxDims+device.MaxOperands+k*device.MaxDims+i] = uint64(int64(l.Strides[i]))
		}
	}
	return total
}

// launchPlan queues a strided kernel over plan p with a grid-stride loop.
func (d *Device) launchPlan(name string, p *device.Plan, args ...uint64) {
	n := d.setGeo(p)
	if n == 0 {
		return
	}
	grid, block := d.grid1D(n)
	d.launchArgs(name, grid, block, 0, true, args)
}

// CopyFloat64FromHost rounds src to the buffer's float32 or bfloat16.
func (d *Device) CopyFloat64FromHost(dst device.Buffer, src []float64) {
	f := make([]float32, len(src))
	for i, v := range src {
		f[i] = float32(v)
	}
	d.CopyFromHost(dst, f)
}

// CopyFloat64ToHost widens the buffer's float32 or bfloat16 values.
func (d *Device) CopyFloat64ToHost(dst []float64, src device.Buffer) {
	f := make([]float32, len(dst))
	d.CopyToHost(f, src)
	for i, v := range f {
		dst[i] = float64(v)
	}
}

// CopyStrided copies dims' elements through the two layouts, as raw
// words of the dtype's size.
func (d *Device) CopyStrided(dims device.Dims, dst, src device.View) {
	d.enter()
	defer d.leave()
	if !d.want("CopyStrided", []device.DType{dst.Buf.DType()}, src.Buf) || !d.want("CopyStrided", []device.DType{src.Buf.DType()}, dst.Buf) {
		return
	}
	name := "h_copy_nd_u32"
	switch dst.Buf.DType().Size() {
	case 2:
		name = "h_copy_nd_u16"
	case 8:
		name = "h_copy_nd_u64"
	}
	p := device.NewPlan(dims, dst.Layout, src.Layout)
	d.launchPlan(name, &p, ptrArg(dst.Buf), ptrArg(src.Buf))
}

// Unary computes dst = op(src) elementwise (float32).
func (d *Device) Unary(op device.UnaryOp, dst, src device.Buffer) {
	d.enter()
	defer d.leave()
	if !d.want("Unary", f32Only, dst, src) {
		return
	}
	if !op.Valid() {
		d.unsupported("Unary", "unknown op "+op.String())
		return
	}
	n := int64(dst.Len())
	d.launch1D("h_unary_f32", n, ptrArg(dst), ptrArg(src), i64arg(n), i32arg(int(op)))
}

// BinaryStrided computes dst = a op b over dims with broadcasting strides
// (float32).
func (d *Device) BinaryStrided(op device.BinaryOp, dims device.Dims, dst device.Buffer, a, b device.View) {
	d.enter()
	defer d.leave()
	if !d.want("BinaryStrided", f32Only, dst, a.Buf, b.Buf) {
		return
	}
	if op < device.Add || op > device.Ge {
		d.unsupported("BinaryStrided", "unknown op "+op.String())
		return
	}
	p := device.NewPlan(dims, dims.RowMajor(), a.Layout, b.Layout)
	d.launchPlan("h_binary_nd_f32", &p, ptrArg(dst), ptrArg(a.Buf), ptrArg(b.Buf), i32arg(int(op)))
}

// Where computes dst = cond != 0 ? a : b over dims (float32).
func (d *Device) Where(dims device.Dims, dst device.Buffer, cond, a, b device.View) {
	d.enter()
	defer d.leave()
	if !d.want("Where", f32Only, dst, cond.Buf, a.Buf, b.Buf) {
		return
	}
	p := device.NewPlan(dims, dims.RowMajor(), cond.Layout, a.Layout, b.Layout)
	d.launchPlan("h_where_nd_f32", &p, ptrArg(dst), ptrArg(cond.Buf), ptrArg(a.Buf), ptrArg(b.Buf))
}

// ReduceAxis reduces the middle axis of [outer, n, inner]: one block per
// row when inner is 1, else one thread per output.
func (d *Device) ReduceAxis(op device.ReduceOp, dst, src device.Buffer, outer, n, inner int) {
	d.enter()
	defer d.leave()
	if op < device.Sum || op > device.ArgMin {
		d.unsupported("ReduceAxis", "unknown op "+op.String())
		return
	}
	out := f32Only
	var df, di device.Buffer = dst, nil
	if op == device.ArgMax || op == device.ArgMin {
		out, df, di = i32Only, nil, dst
	}
	if !d.want("ReduceAxis", f32Only, src) || !d.want("ReduceAxis", out, dst) {
		return
	}
	if inner == 1 && n > 32 {
		d.launchRows("h_reduce_rows_nd_f32", outer, 256, ptrArg(df), ptrArg(di), ptrArg(src), i64arg(int64(outer)), i64arg(int64(n)), i32arg(int(op)))
		return
	}
	d.launch1D("h_reduce_axis_f32", int64(outer)*int64(inner), ptrArg(df), ptrArg(di), ptrArg(src),
		i64arg(int64(outer)), i64arg(int64(n)), i64arg(int64(inner)), i32arg(int(op)))
}

// launchIndex queues the gather or scatter kernel name over the
// outer*m*inner elements of the indexed side.
func (d *Device) launchIndex(name string, dst, src device.Buffer, idx device.View, outer, n, inner, m int) {
	d.launch1D(name, int64(outer)*int64(m)*int64(inner), ptrArg(dst), ptrArg(src), ptrArg(idx.Buf),
		i64arg(int64(outer)), i64arg(int64(n)), i64arg(int64(inner)), i64arg(int64(m)),
		i64arg(int64(idx.Offset)), i64arg(int64(idx.Strides[0])), i64arg(int64(idx.Strides[1])), i64arg(int64(idx.Strides[2])))
}

// GatherAxis reads dst[o,j,i] = src[o, idx[o,j,i], i] (float32 or int32).
func (d *Device) GatherAxis(dst, src device.Buffer, idx device.View, outer, n, inner, m int) {
	d.enter()
	defer d.leave()
	if !d.want("GatherAxis", []device.DType{device.Float32, device.Int32}, dst) ||
		!d.want("GatherAxis", []device.DType{dst.DType()}, src) || !d.want("GatherAxis", i32Only, idx.Buf) {
		return
	}
	d.launchIndex("h_gather_axis_u32", dst, src, idx, outer, n, inner, m)
}

// ScatterAddAxis adds dst[o, idx[o,j,i], i] += src[o,j,i] with atomic
// adds (float32): repeated indices accumulate in an unspecified order.
func (d *Device) ScatterAddAxis(dst, src device.Buffer, idx device.View, outer, n, inner, m int) {
	d.enter()
	defer d.leave()
	if !d.want("ScatterAddAxis", f32Only, dst, src) || !d.want("ScatterAddAxis", i32Only, idx.Buf) {
		return
	}
	d.launchIndex("h_scatter_add_axis_f32", dst, src, idx, outer, n, inner, m)
}

// Random fills dst from the Philox4x32-10 stream (float32).
func (d *Device) Random(dist device.Distribution, dst device.Buffer, seed, offset uint64, a, b float32) {
	d.enter()
	defer d.leave()
	if !d.want("Random", f32Only, dst) {
		return
	}
	if dist < device.Uniform || dist > device.Bernoulli {
		d.unsupported("Random", fmt.Sprintf("unknown distribution %v", dist))
		return
	}
	n := int64(dst.Len())
	d.launch1D("h_random_f32", n, ptrArg(dst), i64arg(n), seed, offset, i32arg(int(dist)), f32arg(a), f32arg(b))
}
