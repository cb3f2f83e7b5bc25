package profile

import (
	"fmt"
	"time"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/compose"
)

// The timed methods: each runs the wrapped device's method between start
// and stop; the details are formatted only while recording.
//
// The capability methods (device/capability.go) run the wrapped device's
// kernel when it has the capability, and otherwise the composition that
// device/compose would have run on it, recorded under the method's name
// with the suffix "/composed": a profile of a backend of the Core alone
// shows what its compositions cost, and a caller (which goes through
// device/compose) runs the same kernels with or without the wrapper.

// composed marks an operation run as its composition.
const composed = "/composed"

// stopAs is stop with a suffix to the name (composed or empty).
func (p *Device) stopAs(t0 time.Time, suffix, name, detail string, flops float64) {
	p.stop(t0, name+suffix, detail, flops)
}

func rowsCols(rows, cols int) string { return fmt.Sprintf("%d x %d", rows, cols) }

func length(b device.Buffer) string { return fmt.Sprintf("n %d %s", b.Len(), b.DType()) }

func attention(s device.AttentionShape) string {
	d := fmt.Sprintf("B%d T%d H%d D%d", s.Batch, s.Seq, s.Heads, s.HeadDim)
	if s.Keys() != s.Seq {
		d += fmt.Sprintf(" Tk%d", s.Keys())
	}
	if s.Unmasked {
		d += " unmasked"
	}
	return d
}

// AttentionKerneler is implemented by a device that can name the kernels
// its Attention and AttentionBackward run for a shape, e.g. the CUDA
// backend's "mma.sync bf16" (tensor cores) or "simt f32". The wrapper
// appends the name to the detail of its attention rows, so that a profile
// says which kernel it timed.
type AttentionKerneler interface {
	AttentionKernel(s device.AttentionShape) string
}

// attentionDetail is the detail of an attention row: the shape, then the
// kernel where the wrapped device names it.
func (p *Device) attentionDetail(s device.AttentionShape) string {
	if k, ok := p.inner.(AttentionKerneler); ok {
		if name := k.AttentionKernel(s); name != "" {
			return attention(s) + " " + name
		}
	}
	return attention(s)
}

// CausalPairs is the number of (query, key) pairs causal attention over seq
// tokens computes per (batch, head): seq (seq + 1) / 2, the diagonal
// included.
func CausalPairs(seq int) float64 { return float64(seq) * float64(seq+1) / 2 }

// AttentionFlops returns the floating-point operations the profile charges
// to an attention call of shape s: the matrix products over the (query,
// key) pairs it computes (s.Pairs(): CausalPairs of the sequence for causal
// self-attention), 2 head-dim flops (a multiply and an add) per pair and
// product. The forward has two products (S = Q K^T, O = P V): 4 D per
// pair. The backward has five (S recomputed, dV = P^T dO, dP = dO V^T,
// dQ = dS K, dK = dS^T Q): 10 D per pair, FlashAttention-2's count (2.5
// times the forward). Softmax exponentials and the row sums are not
// counted, nor a kernel's own repeats (a backward that recomputes S and dP
// in separate dq and dk, dv kernels executes 14 D per pair).
func AttentionFlops(s device.AttentionShape, backward bool) float64 {
	per := 4.0
	if backward {
		per = 10
	}
	return per * float64(s.HeadDim) * s.Pairs() * float64(s.Batch) * float64(s.Heads)
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

// Description returns the wrapped device's (device.Describe; not timed).
func (p *Device) Description() device.Description { return device.Describe(p.inner) }

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
	c := ""
	if f, ok := p.inner.(device.Transposer); ok {
		f.Transpose(dst, src, batch, rows, cols, inner)
	} else {
		compose.Transpose(compose.CoreOnly(p.inner), dst, src, batch, rows, cols, inner)
		c = composed
	}
	if !t.IsZero() {
		p.stopAs(t, c, "Transpose", "", 0)
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
	c := ""
	if f, ok := p.inner.(device.Elementwise); ok {
		f.FillFrom(dst, src, alpha)
	} else {
		compose.FillFrom(compose.CoreOnly(p.inner), dst, src, alpha)
		c = composed
	}
	if !t.IsZero() {
		p.stopAs(t, c, "FillFrom", "", 0)
	}
}

// Binary is timed by operation.
func (p *Device) Binary(op device.BinaryOp, dst, a, b device.Buffer) {
	t := p.start()
	c := ""
	if f, ok := p.inner.(device.Elementwise); ok {
		f.Binary(op, dst, a, b)
	} else {
		compose.Binary(compose.CoreOnly(p.inner), op, dst, a, b)
		c = composed
	}
	if !t.IsZero() {
		p.stopAs(t, c, "Binary/"+op.String(), "", 0)
	}
}

// Scale is timed as "Scale".
func (p *Device) Scale(dst, src device.Buffer, alpha float32) {
	t := p.start()
	c := ""
	if f, ok := p.inner.(device.Elementwise); ok {
		f.Scale(dst, src, alpha)
	} else {
		compose.Scale(compose.CoreOnly(p.inner), dst, src, alpha)
		c = composed
	}
	if !t.IsZero() {
		p.stopAs(t, c, "Scale", "", 0)
	}
}

// Axpby is timed as "Axpby".
func (p *Device) Axpby(dst, x device.Buffer, alpha, beta float32) {
	t := p.start()
	c := ""
	if f, ok := p.inner.(device.Elementwise); ok {
		f.Axpby(dst, x, alpha, beta)
	} else {
		compose.Axpby(compose.CoreOnly(p.inner), dst, x, alpha, beta)
		c = composed
	}
	if !t.IsZero() {
		p.stopAs(t, c, "Axpby", "", 0)
	}
}

// Reduce is timed by operation and axis.
func (p *Device) Reduce(op device.ReduceOp, axis int, dst, src device.Buffer, rows, cols int) {
	t := p.start()
	c := ""
	if f, ok := p.inner.(device.Reducer); ok {
		f.Reduce(op, axis, dst, src, rows, cols)
	} else {
		compose.Reduce(compose.CoreOnly(p.inner), op, axis, dst, src, rows, cols)
		c = composed
	}
	if !t.IsZero() {
		p.stopAs(t, c, fmt.Sprintf("Reduce/%s/%d", op, axis), "", 0)
	}
}

// RowScale is timed as "RowScale".
func (p *Device) RowScale(dst, src device.Buffer, rows, cols int, alpha, eps float32) {
	t := p.start()
	c := ""
	if f, ok := p.inner.(device.RowScaler); ok {
		f.RowScale(dst, src, rows, cols, alpha, eps)
	} else {
		compose.RowScale(compose.CoreOnly(p.inner), dst, src, rows, cols, alpha, eps)
		c = composed
	}
	if !t.IsZero() {
		p.stopAs(t, c, "RowScale", rowsCols(rows, cols), 0)
	}
}

// AddRow is timed as "AddRow".
func (p *Device) AddRow(dst, v device.Buffer, rows, cols int, alpha float32) {
	t := p.start()
	c := ""
	if f, ok := p.inner.(device.Elementwise); ok {
		f.AddRow(dst, v, rows, cols, alpha)
	} else {
		compose.AddRow(compose.CoreOnly(p.inner), dst, v, rows, cols, alpha)
		c = composed
	}
	if !t.IsZero() {
		p.stopAs(t, c, "AddRow", "", 0)
	}
}

// PairDistanceMax is timed as "PairDistanceMax".
func (p *Device) PairDistanceMax(best, arg, g, na, nb device.Buffer, rows, cols, r0, c0 int) {
	t := p.start()
	c := ""
	if f, ok := p.inner.(device.PairDistanceMaxer); ok {
		f.PairDistanceMax(best, arg, g, na, nb, rows, cols, r0, c0)
	} else {
		compose.PairDistanceMax(compose.CoreOnly(p.inner), best, arg, g, na, nb, rows, cols, r0, c0)
		c = composed
	}
	if !t.IsZero() {
		p.stopAs(t, c, "PairDistanceMax", "", 0)
	}
}

// Gather is timed as "Gather".
func (p *Device) Gather(dst, table, idx device.Buffer, cols int) {
	t := p.start()
	c := ""
	if f, ok := p.inner.(device.RowGatherer); ok {
		f.Gather(dst, table, idx, cols)
	} else {
		compose.Gather(compose.CoreOnly(p.inner), dst, table, idx, cols)
		c = composed
	}
	if !t.IsZero() {
		p.stopAs(t, c, "Gather", "", 0)
	}
}

// ScatterAdd is timed as "ScatterAdd".
func (p *Device) ScatterAdd(dst, src, idx device.Buffer, cols int) {
	t := p.start()
	c := ""
	if f, ok := p.inner.(device.RowGatherer); ok {
		f.ScatterAdd(dst, src, idx, cols)
	} else {
		compose.ScatterAdd(compose.CoreOnly(p.inner), dst, src, idx, cols)
		c = composed
	}
	if !t.IsZero() {
		p.stopAs(t, c, "ScatterAdd", "", 0)
	}
}

// RMSNorm is timed by shape.
func (p *Device) RMSNorm(out, rstd, x device.Buffer, rows, cols int, eps float32) {
	t := p.start()
	c := ""
	if f, ok := p.inner.(device.RMSNormer); ok {
		f.RMSNorm(out, rstd, x, rows, cols, eps)
	} else {
		compose.RMSNorm(compose.CoreOnly(p.inner), out, rstd, x, rows, cols, float64(eps))
		c = composed
	}
	if !t.IsZero() {
		p.stopAs(t, c, "RMSNorm", rowsCols(rows, cols), 0)
	}
}

// RMSNormBackward is timed by shape.
func (p *Device) RMSNormBackward(dx, dy, x, rstd device.Buffer, rows, cols int) {
	t := p.start()
	c := ""
	if f, ok := p.inner.(device.RMSNormer); ok {
		f.RMSNormBackward(dx, dy, x, rstd, rows, cols)
	} else {
		compose.RMSNormBackward(compose.CoreOnly(p.inner), dx, dy, x, rstd, rows, cols)
		c = composed
	}
	if !t.IsZero() {
		p.stopAs(t, c, "RMSNormBackward", rowsCols(rows, cols), 0)
	}
}

// RoPE is timed by direction.
func (p *Device) RoPE(out, x, cos, sin device.Buffer, s device.AttentionShape, inverse bool) {
	t := p.start()
	c := ""
	if f, ok := p.inner.(device.RoPEr); ok {
		f.RoPE(out, x, cos, sin, s, inverse)
	} else {
		compose.RoPE(compose.CoreOnly(p.inner), out, x, cos, sin, s, inverse)
		c = composed
	}
	name := "RoPE"
	if inverse {
		name = "RoPE/inverse"
	}
	if !t.IsZero() {
		p.stopAs(t, c, name, attention(s), 0)
	}
}

// SwiGLU is timed by length.
func (p *Device) SwiGLU(out, a, b device.Buffer) {
	t := p.start()
	c := ""
	if f, ok := p.inner.(device.SwiGLUer); ok {
		f.SwiGLU(out, a, b)
	} else {
		compose.SwiGLU(compose.CoreOnly(p.inner), out, a, b)
		c = composed
	}
	if !t.IsZero() {
		p.stopAs(t, c, "SwiGLU", length(out), 0)
	}
}

// SwiGLUBackward is timed by length.
func (p *Device) SwiGLUBackward(da, db, dout, a, b device.Buffer) {
	t := p.start()
	c := ""
	if f, ok := p.inner.(device.SwiGLUer); ok {
		f.SwiGLUBackward(da, db, dout, a, b)
	} else {
		compose.SwiGLUBackward(compose.CoreOnly(p.inner), da, db, dout, a, b)
		c = composed
	}
	if !t.IsZero() {
		p.stopAs(t, c, "SwiGLUBackward", length(dout), 0)
	}
}

// Attention is timed by shape (and kernel, see AttentionKerneler), with
// AttentionFlops.
func (p *Device) Attention(out, lse, q, k, v device.Buffer, s device.AttentionShape, scale float32) {
	t := p.start()
	c := ""
	if f, ok := p.inner.(device.Attender); ok {
		f.Attention(out, lse, q, k, v, s, scale)
	} else {
		compose.Attention(compose.CoreOnly(p.inner), out, lse, q, k, v, s, scale)
		c = composed
	}
	if !t.IsZero() {
		p.stopAs(t, c, "Attention", p.attentionDetail(s), AttentionFlops(s, false))
	}
}

// AttentionBackward is timed by shape (and kernel, see
// AttentionKerneler), with AttentionFlops.
func (p *Device) AttentionBackward(dq, dk, dv, dout, q, k, v, out, lse device.Buffer, s device.AttentionShape, scale float32) {
	t := p.start()
	c := ""
	if f, ok := p.inner.(device.Attender); ok {
		f.AttentionBackward(dq, dk, dv, dout, q, k, v, out, lse, s, scale)
	} else {
		compose.AttentionBackward(compose.CoreOnly(p.inner), dq, dk, dv, dout, q, k, v, out, lse, s, scale)
		c = composed
	}
	if !t.IsZero() {
		p.stopAs(t, c, "AttentionBackward", p.attentionDetail(s), AttentionFlops(s, true))
	}
}

// CrossEntropy is timed by shape.
func (p *Device) CrossEntropy(loss, lse, logits, targets device.Buffer, rows, vocab int) {
	t := p.start()
	c := ""
	if f, ok := p.inner.(device.CrossEntropier); ok {
		f.CrossEntropy(loss, lse, logits, targets, rows, vocab)
	} else {
		compose.CrossEntropy(compose.CoreOnly(p.inner), loss, lse, logits, targets, rows, vocab)
		c = composed
	}
	if !t.IsZero() {
		p.stopAs(t, c, "CrossEntropy", rowsCols(rows, vocab), 0)
	}
}

// CrossEntropyBackward is timed by shape.
func (p *Device) CrossEntropyBackward(dlogits, dloss, logits, lse, targets device.Buffer, rows, vocab int) {
	t := p.start()
	c := ""
	if f, ok := p.inner.(device.CrossEntropier); ok {
		f.CrossEntropyBackward(dlogits, dloss, logits, lse, targets, rows, vocab)
	} else {
		compose.CrossEntropyBackward(compose.CoreOnly(p.inner), dlogits, dloss, logits, lse, targets, rows, vocab)
		c = composed
	}
	if !t.IsZero() {
		p.stopAs(t, c, "CrossEntropyBackward", rowsCols(rows, vocab), 0)
	}
}

// CrossEntropyWithGrad is timed by shape.
func (p *Device) CrossEntropyWithGrad(loss, lse, logits, targets device.Buffer, rows, vocab int, gradScale float32) {
	t := p.start()
	c := ""
	if f, ok := p.inner.(device.CrossEntropier); ok {
		f.CrossEntropyWithGrad(loss, lse, logits, targets, rows, vocab, gradScale)
	} else {
		compose.CrossEntropyWithGrad(compose.CoreOnly(p.inner), loss, lse, logits, targets, rows, vocab, gradScale)
		c = composed
	}
	if !t.IsZero() {
		p.stopAs(t, c, "CrossEntropyWithGrad", rowsCols(rows, vocab), 0)
	}
}

// AdamWStep is timed as "AdamWStep".
func (p *Device) AdamWStep(pm, g, m, v, step device.Buffer, h device.AdamW) {
	t := p.start()
	c := ""
	if f, ok := p.inner.(device.AdamWStepper); ok {
		f.AdamWStep(pm, g, m, v, step, h)
	} else {
		compose.AdamWStep(compose.CoreOnly(p.inner), pm, g, m, v, step, h)
		c = composed
	}
	if !t.IsZero() {
		p.stopAs(t, c, "AdamWStep", "", 0)
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
