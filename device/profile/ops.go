package profile

import (
	"fmt"

	"github.com/hilbert-ml/hilbert/device"
)

// The timed methods: each runs the wrapped device's method between start
// and stop; the details are formatted only while recording.

func rowsCols(rows, cols int) string { return fmt.Sprintf("%d x %d", rows, cols) }

func length(b device.Buffer) string { return fmt.Sprintf("n %d %s", b.Len(), b.DType()) }

func attention(s device.AttentionShape) string {
	return fmt.Sprintf("B%d T%d H%d D%d", s.Batch, s.Seq, s.Heads, s.HeadDim)
}

// tr names a transpose flag.
func tr(t bool) string {
	if t {
		return "T"
	}
	return "N"
}

// Name returns the wrapped device's name (not timed).
func (p *Device) Name() string { return p.inner.Name() }

// Alloc is timed by dtype.
func (p *Device) Alloc(dtype device.DType, n int) (device.Buffer, error) {
	t := p.start()
	b, err := p.inner.Alloc(dtype, n)
	if !t.IsZero() {
		p.stop(t, "Alloc", dtype.String(), 0)
	}
	return b, err
}

// Free is timed as "Free".
func (p *Device) Free(b device.Buffer) {
	t := p.start()
	p.inner.Free(b)
	if !t.IsZero() {
		p.stop(t, "Free", "", 0)
	}
}

// Synchronize is timed as "Synchronize": while recording, every call is
// already synchronized, so it measures only the call itself.
func (p *Device) Synchronize() error {
	t := p.start()
	err := p.inner.Synchronize()
	if !t.IsZero() {
		p.stop(t, "Synchronize", "", 0)
	}
	return err
}

// CopyFromHost is timed as "CopyFromHost".
func (p *Device) CopyFromHost(dst device.Buffer, src []float32) {
	t := p.start()
	p.inner.CopyFromHost(dst, src)
	if !t.IsZero() {
		p.stop(t, "CopyFromHost", "", 0)
	}
}

// CopyToHost is timed as "CopyToHost".
func (p *Device) CopyToHost(dst []float32, src device.Buffer) {
	t := p.start()
	p.inner.CopyToHost(dst, src)
	if !t.IsZero() {
		p.stop(t, "CopyToHost", "", 0)
	}
}

// CopyInt32FromHost is timed as "CopyInt32FromHost".
func (p *Device) CopyInt32FromHost(dst device.Buffer, src []int32) {
	t := p.start()
	p.inner.CopyInt32FromHost(dst, src)
	if !t.IsZero() {
		p.stop(t, "CopyInt32FromHost", "", 0)
	}
}

// CopyInt32ToHost is timed as "CopyInt32ToHost".
func (p *Device) CopyInt32ToHost(dst []int32, src device.Buffer) {
	t := p.start()
	p.inner.CopyInt32ToHost(dst, src)
	if !t.IsZero() {
		p.stop(t, "CopyInt32ToHost", "", 0)
	}
}

// Copy is timed as "Copy".
func (p *Device) Copy(dst, src device.Buffer) {
	t := p.start()
	p.inner.Copy(dst, src)
	if !t.IsZero() {
		p.stop(t, "Copy", "", 0)
	}
}

// Cast is timed as "Cast", by destination dtype.
func (p *Device) Cast(dst, src device.Buffer) {
	t := p.start()
	p.inner.Cast(dst, src)
	if !t.IsZero() {
		p.stop(t, "Cast", src.DType().String()+" -> "+dst.DType().String(), 0)
	}
}

// Gemm is timed by shape, transposes, dtypes and batch, with 2 M N K flops
// per product.
func (p *Device) Gemm(g device.GemmArgs) {
	t := p.start()
	p.inner.Gemm(g)
	if !t.IsZero() {
		batch := max(g.Batch, 1)
		detail := fmt.Sprintf("%dx%dx%d %s%s %s", g.M, g.N, g.K, tr(g.TransA), tr(g.TransB), g.A.DType())
		if batch > 1 {
			detail += fmt.Sprintf(" x%d", batch)
		}
		p.stop(t, "Gemm", detail, 2*float64(g.M)*float64(g.N)*float64(g.K)*float64(batch))
	}
}

// Transpose is timed as "Transpose".
func (p *Device) Transpose(dst, src device.Buffer, batch, rows, cols, inner int) {
	t := p.start()
	p.inner.Transpose(dst, src, batch, rows, cols, inner)
	if !t.IsZero() {
		p.stop(t, "Transpose", "", 0)
	}
}

// Fill is timed as "Fill".
func (p *Device) Fill(dst device.Buffer, v float32) {
	t := p.start()
	p.inner.Fill(dst, v)
	if !t.IsZero() {
		p.stop(t, "Fill", "", 0)
	}
}

// FillFrom is timed as "FillFrom".
func (p *Device) FillFrom(dst, src device.Buffer, alpha float32) {
	t := p.start()
	p.inner.FillFrom(dst, src, alpha)
	if !t.IsZero() {
		p.stop(t, "FillFrom", "", 0)
	}
}

// Binary is timed by operation.
func (p *Device) Binary(op device.BinaryOp, dst, a, b device.Buffer) {
	t := p.start()
	p.inner.Binary(op, dst, a, b)
	if !t.IsZero() {
		p.stop(t, "Binary/"+op.String(), "", 0)
	}
}

// Scale is timed as "Scale".
func (p *Device) Scale(dst, src device.Buffer, alpha float32) {
	t := p.start()
	p.inner.Scale(dst, src, alpha)
	if !t.IsZero() {
		p.stop(t, "Scale", "", 0)
	}
}

// Axpby is timed as "Axpby".
func (p *Device) Axpby(dst, x device.Buffer, alpha, beta float32) {
	t := p.start()
	p.inner.Axpby(dst, x, alpha, beta)
	if !t.IsZero() {
		p.stop(t, "Axpby", "", 0)
	}
}

// Reduce is timed by operation and axis.
func (p *Device) Reduce(op device.ReduceOp, axis int, dst, src device.Buffer, rows, cols int) {
	t := p.start()
	p.inner.Reduce(op, axis, dst, src, rows, cols)
	if !t.IsZero() {
		p.stop(t, fmt.Sprintf("Reduce/%s/%d", op, axis), "", 0)
	}
}

// RowScale is timed as "RowScale".
func (p *Device) RowScale(dst, src device.Buffer, rows, cols int, alpha, eps float32) {
	t := p.start()
	p.inner.RowScale(dst, src, rows, cols, alpha, eps)
	if !t.IsZero() {
		p.stop(t, "RowScale", rowsCols(rows, cols), 0)
	}
}

// AddRow is timed as "AddRow".
func (p *Device) AddRow(dst, v device.Buffer, rows, cols int, alpha float32) {
	t := p.start()
	p.inner.AddRow(dst, v, rows, cols, alpha)
	if !t.IsZero() {
		p.stop(t, "AddRow", "", 0)
	}
}

// PairDistanceMax is timed as "PairDistanceMax".
func (p *Device) PairDistanceMax(best, arg, g, na, nb device.Buffer, rows, cols, r0, c0 int) {
	t := p.start()
	p.inner.PairDistanceMax(best, arg, g, na, nb, rows, cols, r0, c0)
	if !t.IsZero() {
		p.stop(t, "PairDistanceMax", "", 0)
	}
}

// Gather is timed as "Gather".
func (p *Device) Gather(dst, table, idx device.Buffer, cols int) {
	t := p.start()
	p.inner.Gather(dst, table, idx, cols)
	if !t.IsZero() {
		p.stop(t, "Gather", "", 0)
	}
}

// ScatterAdd is timed as "ScatterAdd".
func (p *Device) ScatterAdd(dst, src, idx device.Buffer, cols int) {
	t := p.start()
	p.inner.ScatterAdd(dst, src, idx, cols)
	if !t.IsZero() {
		p.stop(t, "ScatterAdd", "", 0)
	}
}

// RMSNorm is timed by shape.
func (p *Device) RMSNorm(out, rstd, x device.Buffer, rows, cols int, eps float32) {
	t := p.start()
	p.inner.RMSNorm(out, rstd, x, rows, cols, eps)
	if !t.IsZero() {
		p.stop(t, "RMSNorm", rowsCols(rows, cols), 0)
	}
}

// RMSNormBackward is timed by shape.
func (p *Device) RMSNormBackward(dx, dy, x, rstd device.Buffer, rows, cols int) {
	t := p.start()
	p.inner.RMSNormBackward(dx, dy, x, rstd, rows, cols)
	if !t.IsZero() {
		p.stop(t, "RMSNormBackward", rowsCols(rows, cols), 0)
	}
}

// RoPE is timed by direction.
func (p *Device) RoPE(out, x, cos, sin device.Buffer, s device.AttentionShape, inverse bool) {
	t := p.start()
	p.inner.RoPE(out, x, cos, sin, s, inverse)
	name := "RoPE"
	if inverse {
		name = "RoPE/inverse"
	}
	if !t.IsZero() {
		p.stop(t, name, attention(s), 0)
	}
}

// SwiGLU is timed by length.
func (p *Device) SwiGLU(out, a, b device.Buffer) {
	t := p.start()
	p.inner.SwiGLU(out, a, b)
	if !t.IsZero() {
		p.stop(t, "SwiGLU", length(out), 0)
	}
}

// SwiGLUBackward is timed by length.
func (p *Device) SwiGLUBackward(da, db, dout, a, b device.Buffer) {
	t := p.start()
	p.inner.SwiGLUBackward(da, db, dout, a, b)
	if !t.IsZero() {
		p.stop(t, "SwiGLUBackward", length(dout), 0)
	}
}

// Attention is timed by shape.
func (p *Device) Attention(out, lse, q, k, v device.Buffer, s device.AttentionShape, scale float32) {
	t := p.start()
	p.inner.Attention(out, lse, q, k, v, s, scale)
	if !t.IsZero() {
		p.stop(t, "Attention", attention(s), 0)
	}
}

// AttentionBackward is timed by shape.
func (p *Device) AttentionBackward(dq, dk, dv, dout, q, k, v, out, lse device.Buffer, s device.AttentionShape, scale float32) {
	t := p.start()
	p.inner.AttentionBackward(dq, dk, dv, dout, q, k, v, out, lse, s, scale)
	if !t.IsZero() {
		p.stop(t, "AttentionBackward", attention(s), 0)
	}
}

// CrossEntropy is timed by shape.
func (p *Device) CrossEntropy(loss, lse, logits, targets device.Buffer, rows, vocab int) {
	t := p.start()
	p.inner.CrossEntropy(loss, lse, logits, targets, rows, vocab)
	if !t.IsZero() {
		p.stop(t, "CrossEntropy", rowsCols(rows, vocab), 0)
	}
}

// CrossEntropyBackward is timed by shape.
func (p *Device) CrossEntropyBackward(dlogits, dloss, logits, lse, targets device.Buffer, rows, vocab int) {
	t := p.start()
	p.inner.CrossEntropyBackward(dlogits, dloss, logits, lse, targets, rows, vocab)
	if !t.IsZero() {
		p.stop(t, "CrossEntropyBackward", rowsCols(rows, vocab), 0)
	}
}

// CrossEntropyWithGrad is timed by shape.
func (p *Device) CrossEntropyWithGrad(loss, lse, logits, targets device.Buffer, rows, vocab int, gradScale float32) {
	t := p.start()
	p.inner.CrossEntropyWithGrad(loss, lse, logits, targets, rows, vocab, gradScale)
	if !t.IsZero() {
		p.stop(t, "CrossEntropyWithGrad", rowsCols(rows, vocab), 0)
	}
}

// AdamWStep is timed as "AdamWStep".
func (p *Device) AdamWStep(pm, g, m, v, step device.Buffer, h device.AdamW) {
	t := p.start()
	p.inner.AdamWStep(pm, g, m, v, step, h)
	if !t.IsZero() {
		p.stop(t, "AdamWStep", "", 0)
	}
}

// CopyFloat64FromHost is timed as "CopyFloat64FromHost".
func (p *Device) CopyFloat64FromHost(dst device.Buffer, src []float64) {
	t := p.start()
	p.inner.CopyFloat64FromHost(dst, src)
	if !t.IsZero() {
		p.stop(t, "CopyFloat64FromHost", "", 0)
	}
}

// CopyFloat64ToHost is timed as "CopyFloat64ToHost".
func (p *Device) CopyFloat64ToHost(dst []float64, src device.Buffer) {
	t := p.start()
	p.inner.CopyFloat64ToHost(dst, src)
	if !t.IsZero() {
		p.stop(t, "CopyFloat64ToHost", "", 0)
	}
}

// CopyStrided is timed by dims and dtype.
func (p *Device) CopyStrided(dims device.Dims, dst, src device.View) {
	t := p.start()
	p.inner.CopyStrided(dims, dst, src)
	if !t.IsZero() {
		p.stop(t, "CopyStrided", dims.String()+" "+dst.Buf.DType().String(), 0)
	}
}

// Unary is timed by operation and length.
func (p *Device) Unary(op device.UnaryOp, dst, src device.Buffer) {
	t := p.start()
	p.inner.Unary(op, dst, src)
	if !t.IsZero() {
		p.stop(t, "Unary/"+op.String(), length(dst), 0)
	}
}

// BinaryStrided is timed by operation and dims.
func (p *Device) BinaryStrided(op device.BinaryOp, dims device.Dims, dst device.Buffer, a, b device.View) {
	t := p.start()
	p.inner.BinaryStrided(op, dims, dst, a, b)
	if !t.IsZero() {
		p.stop(t, "BinaryStrided/"+op.String(), dims.String()+" "+dst.DType().String(), 0)
	}
}

// Where is timed by dims.
func (p *Device) Where(dims device.Dims, dst device.Buffer, cond, a, b device.View) {
	t := p.start()
	p.inner.Where(dims, dst, cond, a, b)
	if !t.IsZero() {
		p.stop(t, "Where", dims.String()+" "+dst.DType().String(), 0)
	}
}

// ReduceAxis is timed by operation and [outer, n, inner].
func (p *Device) ReduceAxis(op device.ReduceOp, dst, src device.Buffer, outer, n, inner int) {
	t := p.start()
	p.inner.ReduceAxis(op, dst, src, outer, n, inner)
	if !t.IsZero() {
		p.stop(t, "ReduceAxis/"+op.String(), fmt.Sprintf("[%d %d %d] %s", outer, n, inner, src.DType()), 0)
	}
}

// GatherAxis is timed by [outer, m, inner].
func (p *Device) GatherAxis(dst, src device.Buffer, idx device.View, outer, n, inner, m int) {
	t := p.start()
	p.inner.GatherAxis(dst, src, idx, outer, n, inner, m)
	if !t.IsZero() {
		p.stop(t, "GatherAxis", fmt.Sprintf("[%d %d %d] of %d", outer, m, inner, n), 0)
	}
}

// ScatterAddAxis is timed by [outer, m, inner].
func (p *Device) ScatterAddAxis(dst, src device.Buffer, idx device.View, outer, n, inner, m int) {
	t := p.start()
	p.inner.ScatterAddAxis(dst, src, idx, outer, n, inner, m)
	if !t.IsZero() {
		p.stop(t, "ScatterAddAxis", fmt.Sprintf("[%d %d %d] into %d", outer, m, inner, n), 0)
	}
}

// Random is timed by distribution and length.
func (p *Device) Random(dist device.Distribution, dst device.Buffer, seed, offset uint64, a, b float32) {
	t := p.start()
	p.inner.Random(dist, dst, seed, offset, a, b)
	if !t.IsZero() {
		p.stop(t, "Random/"+dist.String(), length(dst), 0)
	}
}
