package profile

import (
	"fmt"
	"time"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/compose"
)

// The timed methods: each runs the wrapped device's method between start
// and end; names and details are formatted only while recording.
//
// The capability methods (device/capability.go) run what device/compose
// runs on the wrapped device: its kernel when it has the capability, and
// otherwise the composition, recorded under the method's name with the
// suffix "/composed". So a caller (which goes through device/compose)
// runs the same kernels with or without the wrapper, and a profile of a
// backend of the Core alone shows what its compositions cost. Capabilities
// declared outside package device (optim's AdamWStep, ...) reach the
// wrapped device through compose.Run and Around, timed alike.

// Around runs call, one call of the capability method name that
// compose.Run found on the wrapped device (composed: run as its
// composition), timed as name, or "name/composed" (compose.Wrapper).
func (p *Device) Around(name string, composed bool, call func()) {
	p.timed(name, composed, nil, 0, call)
}

// timed runs call between start and end (which see).
func (p *Device) timed(name string, composed bool, detail func() string, flops float64, call func()) {
	t := p.start()
	call()
	p.end(t, name, composed, detail, flops)
}

// end charges the call started at t0 (start) to name, with the suffix
// "/composed" when composed, and to the detail detail returns (none when
// nil; called only while recording), with flops.
func (p *Device) end(t0 time.Time, name string, composed bool, detail func() string, flops float64) {
	if t0.IsZero() {
		return
	}
	if composed {
		name += "/composed"
	}
	d := ""
	if detail != nil {
		d = detail()
	}
	p.stop(t0, name, d, flops)
}

// lacks reports whether compose runs capability C's composition on d.
func lacks[C any](d device.Core) bool { return !compose.Has[C](d) }

func rowsCols(rows, cols int) string { return fmt.Sprintf("%d x %d", rows, cols) }

func length(b device.Buffer) string { return fmt.Sprintf("n %d %s", b.Len(), b.DType()) }

func attention(s device.AttentionShape) string {
	d := fmt.Sprintf("B%d T%d H%d D%d", s.Batch, s.Seq, s.Heads, s.HeadDim)
	if s.Keys() != s.Seq {
		d += fmt.Sprintf(" Tk%d", s.Keys())
	}
	if s.Grouped() {
		d += fmt.Sprintf(" KV%d", s.KeyHeads())
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
	p.end(t, "Alloc", false, dtype.String, 0)
	return b, err
}

// Free is timed as "Free".
func (p *Device) Free(b device.Buffer) { p.timed("Free", false, nil, 0, func() { p.inner.Free(b) }) }

// Synchronize is timed as "Synchronize": while recording, every call is
// already synchronized, so it measures only the call itself.
func (p *Device) Synchronize() error {
	t := p.start()
	err := p.inner.Synchronize()
	p.end(t, "Synchronize", false, nil, 0)
	return err
}

// CopyFromHost is timed as "CopyFromHost".
func (p *Device) CopyFromHost(dst device.Buffer, src []float32) {
	p.timed("CopyFromHost", false, nil, 0, func() { p.inner.CopyFromHost(dst, src) })
}

// CopyToHost is timed as "CopyToHost".
func (p *Device) CopyToHost(dst []float32, src device.Buffer) {
	p.timed("CopyToHost", false, nil, 0, func() { p.inner.CopyToHost(dst, src) })
}

// CopyInt32FromHost is timed as "CopyInt32FromHost".
func (p *Device) CopyInt32FromHost(dst device.Buffer, src []int32) {
	p.timed("CopyInt32FromHost", false, nil, 0, func() { p.inner.CopyInt32FromHost(dst, src) })
}

// CopyInt32ToHost is timed as "CopyInt32ToHost".
func (p *Device) CopyInt32ToHost(dst []int32, src device.Buffer) {
	p.timed("CopyInt32ToHost", false, nil, 0, func() { p.inner.CopyInt32ToHost(dst, src) })
}

// CopyFloat64FromHost is timed as "CopyFloat64FromHost".
func (p *Device) CopyFloat64FromHost(dst device.Buffer, src []float64) {
	p.timed("CopyFloat64FromHost", false, nil, 0, func() { p.inner.CopyFloat64FromHost(dst, src) })
}

// CopyFloat64ToHost is timed as "CopyFloat64ToHost".
func (p *Device) CopyFloat64ToHost(dst []float64, src device.Buffer) {
	p.timed("CopyFloat64ToHost", false, nil, 0, func() { p.inner.CopyFloat64ToHost(dst, src) })
}

// Copy is timed as "Copy".
func (p *Device) Copy(dst, src device.Buffer) {
	p.timed("Copy", false, nil, 0, func() { p.inner.Copy(dst, src) })
}

// Cast is timed as "Cast", by the dtypes.
func (p *Device) Cast(dst, src device.Buffer) {
	p.timed("Cast", false, func() string { return src.DType().String() + " -> " + dst.DType().String() }, 0, func() { p.inner.Cast(dst, src) })
}

// Fill is timed as "Fill".
func (p *Device) Fill(dst device.Buffer, v float32) {
	p.timed("Fill", false, nil, 0, func() { p.inner.Fill(dst, v) })
}

// Gemm is timed by shape, transposes, dtypes and batch, with 2 M N K flops
// per product.
func (p *Device) Gemm(g device.GemmArgs) {
	t := p.start()
	p.inner.Gemm(g)
	batch := max(g.Batch, 1)
	p.end(t, "Gemm", false, func() string {
		detail := fmt.Sprintf("%dx%dx%d %s%s %s", g.M, g.N, g.K, tr(g.TransA), tr(g.TransB), g.A.DType())
		if batch > 1 {
			detail += fmt.Sprintf(" x%d", batch)
		}
		return detail
	}, 2*float64(g.M)*float64(g.N)*float64(g.K)*float64(batch))
}

// CopyStrided is timed by dims and dtype.
func (p *Device) CopyStrided(dims device.Dims, dst, src device.View) {
	p.timed("CopyStrided", false, func() string { return dims.String() + " " + dst.Buf.DType().String() }, 0,
		func() { p.inner.CopyStrided(dims, dst, src) })
}

// Unary is timed by operation and length.
func (p *Device) Unary(op device.UnaryOp, dst, src device.Buffer) {
	t := p.start()
	p.inner.Unary(op, dst, src)
	if !t.IsZero() {
		p.end(t, "Unary/"+op.String(), false, func() string { return length(dst) }, 0)
	}
}

// BinaryStrided is timed by operation and dims.
func (p *Device) BinaryStrided(op device.BinaryOp, dims device.Dims, dst device.Buffer, a, b device.View) {
	t := p.start()
	p.inner.BinaryStrided(op, dims, dst, a, b)
	if !t.IsZero() {
		p.end(t, "BinaryStrided/"+op.String(), false, func() string { return dims.String() + " " + dst.DType().String() }, 0)
	}
}

// Where is timed by dims.
func (p *Device) Where(dims device.Dims, dst device.Buffer, cond, a, b device.View) {
	p.timed("Where", false, func() string { return dims.String() + " " + dst.DType().String() }, 0, func() { p.inner.Where(dims, dst, cond, a, b) })
}

// ReduceAxis is timed by operation and [outer, n, inner].
func (p *Device) ReduceAxis(op device.ReduceOp, dst, src device.Buffer, outer, n, inner int) {
	t := p.start()
	p.inner.ReduceAxis(op, dst, src, outer, n, inner)
	if !t.IsZero() {
		p.end(t, "ReduceAxis/"+op.String(), false, func() string { return fmt.Sprintf("[%d %d %d] %s", outer, n, inner, src.DType()) }, 0)
	}
}

// GatherAxis is timed by [outer, m, inner].
func (p *Device) GatherAxis(dst, src device.Buffer, idx device.View, outer, n, inner, m int) {
	p.timed("GatherAxis", false, func() string { return fmt.Sprintf("[%d %d %d] of %d", outer, m, inner, n) }, 0,
		func() { p.inner.GatherAxis(dst, src, idx, outer, n, inner, m) })
}

// ScatterAddAxis is timed by [outer, m, inner].
func (p *Device) ScatterAddAxis(dst, src device.Buffer, idx device.View, outer, n, inner, m int) {
	p.timed("ScatterAddAxis", false, func() string { return fmt.Sprintf("[%d %d %d] into %d", outer, m, inner, n) }, 0,
		func() { p.inner.ScatterAddAxis(dst, src, idx, outer, n, inner, m) })
}

// Random is timed by distribution and length.
func (p *Device) Random(dist device.Distribution, dst device.Buffer, seed, offset uint64, a, b float32) {
	t := p.start()
	p.inner.Random(dist, dst, seed, offset, a, b)
	if !t.IsZero() {
		p.end(t, "Random/"+dist.String(), false, func() string { return length(dst) }, 0)
	}
}

// Transpose is timed as "Transpose".
func (p *Device) Transpose(dst, src device.Buffer, batch, rows, cols, inner int) {
	p.timed("Transpose", lacks[device.Transposer](p.inner), nil, 0, func() { compose.Transpose(p.inner, dst, src, batch, rows, cols, inner) })
}

// Axpby is timed as "Axpby".
func (p *Device) Axpby(dst, x device.Buffer, alpha, beta float32) {
	p.timed("Axpby", lacks[device.Axpbyer](p.inner), nil, 0, func() { compose.Axpby(p.inner, dst, x, alpha, beta) })
}

// Reduce is timed by operation and axis.
func (p *Device) Reduce(op device.ReduceOp, axis int, dst, src device.Buffer, rows, cols int) {
	t := p.start()
	compose.Reduce(p.inner, op, axis, dst, src, rows, cols)
	if !t.IsZero() {
		p.end(t, fmt.Sprintf("Reduce/%s/%d", op, axis), lacks[device.Reducer](p.inner), nil, 0)
	}
}

// Gather is timed as "Gather".
func (p *Device) Gather(dst, table, idx device.Buffer, cols int) {
	p.timed("Gather", lacks[device.RowGatherer](p.inner), nil, 0, func() { compose.Gather(p.inner, dst, table, idx, cols) })
}

// ScatterAdd is timed as "ScatterAdd".
func (p *Device) ScatterAdd(dst, src, idx device.Buffer, cols int) {
	p.timed("ScatterAdd", lacks[device.RowGatherer](p.inner), nil, 0, func() { compose.ScatterAdd(p.inner, dst, src, idx, cols) })
}

// RMSNorm is timed by shape.
func (p *Device) RMSNorm(out, rstd, x device.Buffer, rows, cols int, eps float32) {
	p.timed("RMSNorm", lacks[device.RMSNormer](p.inner), func() string { return rowsCols(rows, cols) }, 0,
		func() { compose.RMSNorm(p.inner, out, rstd, x, rows, cols, float64(eps)) })
}

// RMSNormBackward is timed by shape.
func (p *Device) RMSNormBackward(dx, dy, x, rstd device.Buffer, rows, cols int) {
	p.timed("RMSNormBackward", lacks[device.RMSNormer](p.inner), func() string { return rowsCols(rows, cols) }, 0,
		func() { compose.RMSNormBackward(p.inner, dx, dy, x, rstd, rows, cols) })
}

// RMSNormGain is timed by shape.
func (p *Device) RMSNormGain(out, rstd, x, gain device.Buffer, rows, cols int, eps float32) {
	p.timed("RMSNormGain", lacks[device.RMSNormGainer](p.inner), func() string { return rowsCols(rows, cols) }, 0,
		func() { compose.RMSNormGain(p.inner, out, rstd, x, gain, rows, cols, float64(eps)) })
}

// RMSNormGainBackward is timed by shape.
func (p *Device) RMSNormGainBackward(dx, dgain, dy, x, rstd, gain device.Buffer, rows, cols int) {
	p.timed("RMSNormGainBackward", lacks[device.RMSNormGainer](p.inner), func() string { return rowsCols(rows, cols) }, 0,
		func() { compose.RMSNormGainBackward(p.inner, dx, dgain, dy, x, rstd, gain, rows, cols) })
}

// LayerNorm is timed by shape.
func (p *Device) LayerNorm(out, mean, rstd, x, w, b device.Buffer, rows, cols int, eps float32) {
	p.timed("LayerNorm", lacks[device.LayerNormer](p.inner), func() string { return rowsCols(rows, cols) }, 0,
		func() { compose.LayerNorm(p.inner, out, mean, rstd, x, w, b, rows, cols, float64(eps)) })
}

// LayerNormBackward is timed by shape.
func (p *Device) LayerNormBackward(dx, dw, db, dy, x, w, mean, rstd device.Buffer, rows, cols int) {
	p.timed("LayerNormBackward", lacks[device.LayerNormer](p.inner), func() string { return rowsCols(rows, cols) }, 0,
		func() { compose.LayerNormBackward(p.inner, dx, dw, db, dy, x, w, mean, rstd, rows, cols) })
}

// GELUTanh is timed by shape.
func (p *Device) GELUTanh(out, x, bias device.Buffer, rows, cols int) {
	p.timed("GELUTanh", lacks[device.GELUer](p.inner), func() string { return rowsCols(rows, cols) }, 0,
		func() { compose.GELUTanh(p.inner, out, x, bias, rows, cols) })
}

// GELUTanhBackward is timed by shape.
func (p *Device) GELUTanhBackward(dx, dout, x, bias device.Buffer, rows, cols int) {
	p.timed("GELUTanhBackward", lacks[device.GELUer](p.inner), func() string { return rowsCols(rows, cols) }, 0,
		func() { compose.GELUTanhBackward(p.inner, dx, dout, x, bias, rows, cols) })
}

// RoPE is timed by direction.
func (p *Device) RoPE(out, x, cos, sin device.Buffer, s device.AttentionShape, inverse bool) {
	name := "RoPE"
	if inverse {
		name = "RoPE/inverse"
	}
	p.timed(name, lacks[device.RoPEr](p.inner), func() string { return attention(s) }, 0,
		func() { compose.RoPE(p.inner, out, x, cos, sin, s, inverse) })
}

// SwiGLU is timed by length.
func (p *Device) SwiGLU(out, a, b device.Buffer) {
	p.timed("SwiGLU", lacks[device.SwiGLUer](p.inner), func() string { return length(out) }, 0, func() { compose.SwiGLU(p.inner, out, a, b) })
}

// SwiGLUBackward is timed by length.
func (p *Device) SwiGLUBackward(da, db, dout, a, b device.Buffer) {
	p.timed("SwiGLUBackward", lacks[device.SwiGLUer](p.inner), func() string { return length(dout) }, 0,
		func() { compose.SwiGLUBackward(p.inner, da, db, dout, a, b) })
}

// Attention is timed by shape (and kernel, see AttentionKerneler), with
// AttentionFlops.
func (p *Device) Attention(out, lse, q, k, v device.Buffer, s device.AttentionShape, scale float32) {
	p.timed("Attention", lacks[device.Attender](p.inner), func() string { return p.attentionDetail(s) }, AttentionFlops(s, false),
		func() { compose.Attention(p.inner, out, lse, q, k, v, s, scale) })
}

// AttendsGrouped passes grouped-query shapes to the inner device as they
// are (device.GroupedAttender): compose repeats the heads there if it
// must, so the profile times what runs without the profile.
func (p *Device) AttendsGrouped() {}

// AttentionBackward is timed by shape (and kernel, see
// AttentionKerneler), with AttentionFlops.
func (p *Device) AttentionBackward(dq, dk, dv, dout, q, k, v, out, lse device.Buffer, s device.AttentionShape, scale float32) {
	p.timed("AttentionBackward", lacks[device.Attender](p.inner), func() string { return p.attentionDetail(s) }, AttentionFlops(s, true),
		func() { compose.AttentionBackward(p.inner, dq, dk, dv, dout, q, k, v, out, lse, s, scale) })
}

// CrossEntropy is timed by shape.
func (p *Device) CrossEntropy(loss, lse, logits, targets device.Buffer, rows, vocab int) {
	p.timed("CrossEntropy", lacks[device.CrossEntropier](p.inner), func() string { return rowsCols(rows, vocab) }, 0,
		func() { compose.CrossEntropy(p.inner, loss, lse, logits, targets, rows, vocab) })
}

// CrossEntropyBackward is timed by shape.
func (p *Device) CrossEntropyBackward(dlogits, dloss, logits, lse, targets device.Buffer, rows, vocab int) {
	p.timed("CrossEntropyBackward", lacks[device.CrossEntropier](p.inner), func() string { return rowsCols(rows, vocab) }, 0,
		func() { compose.CrossEntropyBackward(p.inner, dlogits, dloss, logits, lse, targets, rows, vocab) })
}

// CrossEntropyWithGrad is timed by shape.
func (p *Device) CrossEntropyWithGrad(loss, lse, logits, targets device.Buffer, rows, vocab int, gradScale float32) {
	p.timed("CrossEntropyWithGrad", lacks[device.CrossEntropier](p.inner), func() string { return rowsCols(rows, vocab) }, 0,
		func() { compose.CrossEntropyWithGrad(p.inner, loss, lse, logits, targets, rows, vocab, gradScale) })
}
