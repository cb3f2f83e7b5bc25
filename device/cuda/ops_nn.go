package cuda

import (
	"fmt"
	"github.com/hilbert-ml/hilbert/device/compose"
	"slices"

	"github.com/hilbert-ml/hilbert/device"
)

// RMSNorm normalises each row without a gain and saves 1/rms in rstd.
func (d *Device) RMSNorm(out, rstd, x device.Buffer, rows, cols int, eps float32) {
	d.kernelRows("RMSNorm", "h_rmsnorm_f32", rows, 256, []device.Buffer{out, rstd, x}, nil, i64arg(int64(rows)), i64arg(int64(cols)), f32arg(eps))
}

// RMSNormBackward computes dx from dy, x and the saved rstd.
func (d *Device) RMSNormBackward(dx, dy, x, rstd device.Buffer, rows, cols int) {
	d.kernelRows("RMSNormBackward", "h_rmsnorm_bwd_f32", rows, 256, []device.Buffer{dx, dy, x, rstd}, nil, i64arg(int64(rows)), i64arg(int64(cols)))
}

// LayerNorm normalises each row (w, b nil: no gain, no bias) and saves
// the rows' mean and rstd.
func (d *Device) LayerNorm(out, mean, rstd, x, w, b device.Buffer, rows, cols int, eps float32) {
	d.kernelRows("LayerNorm", "h_layernorm_f32", rows, 256, []device.Buffer{out, mean, rstd, x, w, b}, nil,
		i64arg(int64(rows)), i64arg(int64(cols)), f32arg(eps))
}

// LayerNormBackward computes dx, and dw and db where not nil.
func (d *Device) LayerNormBackward(dx, dw, db, dy, x, w, mean, rstd device.Buffer, rows, cols int) {
	d.enter()
	defer d.leave()
	if !d.want("LayerNormBackward", f32Only, dx, dw, db, dy, x, w, mean, rstd) {
		return
	}
	d.launchRows("h_layernorm_bwd_f32", rows, 256, ptrArg(dx), ptrArg(dy), ptrArg(x), ptrArg(w), ptrArg(mean), ptrArg(rstd),
		i64arg(int64(rows)), i64arg(int64(cols)))
	if dw != nil || db != nil {
		d.launch1D("h_layernorm_params_bwd_f32", int64(cols), ptrArg(dw), ptrArg(db), ptrArg(dy), ptrArg(x), ptrArg(mean), ptrArg(rstd),
			i64arg(int64(rows)), i64arg(int64(cols)))
	}
}

// GELUTanh computes out = gelu(x + bias) (bias nil: none).
func (d *Device) GELUTanh(out, x, bias device.Buffer, rows, cols int) {
	n := int64(rows) * int64(cols)
	d.kernel1D("GELUTanh", "h_gelu_tanh_f32", n, []device.Buffer{out, x, bias}, nil, i64arg(n), i64arg(int64(cols)))
}

// GELUTanhBackward computes dx = dout gelu'(x + bias).
func (d *Device) GELUTanhBackward(dx, dout, x, bias device.Buffer, rows, cols int) {
	n := int64(rows) * int64(cols)
	d.kernel1D("GELUTanhBackward", "h_gelu_tanh_bwd_f32", n, []device.Buffer{dx, dout, x, bias}, nil, i64arg(n), i64arg(int64(cols)))
}

// RoPE applies half-split rotary embedding; out may alias x.
func (d *Device) RoPE(out, x, cos, sin device.Buffer, s device.AttentionShape, inverse bool) {
	inv := 0
	if inverse {
		inv = 1
	}
	n := int64(s.Batch) * int64(s.Seq) * int64(s.Heads) * int64(s.HeadDim/2)
	d.kernel1D("RoPE", "h_rope_f32", n, []device.Buffer{out, x, cos, sin}, nil,
		i32arg(s.Batch), i32arg(s.Seq), i32arg(s.Heads), i32arg(s.HeadDim), i32arg(inv))
}

// SwiGLU computes out = silu(a) * b.
func (d *Device) SwiGLU(out, a, b device.Buffer) {
	n := int64(out.Len())
	d.kernel1D("SwiGLU", "h_swiglu_f32", n, []device.Buffer{out, a, b}, nil, i64arg(n))
}

// SwiGLUBackward computes da and db from dout, a and b.
func (d *Device) SwiGLUBackward(da, db, dout, a, b device.Buffer) {
	n := int64(dout.Len())
	d.kernel1D("SwiGLUBackward", "h_swiglu_bwd_f32", n, []device.Buffer{da, db, dout, a, b}, nil, i64arg(n))
}

// Attention tile sizes; they must match attention.cu.
const (
	attBQ = 64 // queries per forward and dq block
	attBK = 32 // keys per dk/dv block
)

// attentionHeadDims are the head dimensions attention.cu instantiates.
var attentionHeadDims = []int{16, 32, 48, 64, 80, 96, 128}

// attentionKernel reports whether shape s has a kernel: causal
// self-attention (keys as long as the queries) at a head dimension with a
// kernel instance. The others (other head dims, keys of another length,
// unmasked attention) run attention's composition from the Core
// (device/compose) on this device, forward and backward, rather than
// failing.
func attentionKernel(s device.AttentionShape) bool {
	return slices.Contains(attentionHeadDims, s.HeadDim) && s.Keys() == s.Seq && !s.Unmasked
}

// Attention runs causal flash attention forward and saves lse: on tensor
// cores for the head dims of attentionTCHeadDims, else the SIMT kernel.
func (d *Device) Attention(out, lse, q, k, v device.Buffer, s device.AttentionShape, scale float32) {
	if s.Grouped() { // compose repeats k and v to every head and calls back
		compose.Attention(d, out, lse, q, k, v, s, scale)
		return
	}
	if !attentionKernel(s) {
		compose.Attention(compose.CoreOnly(d), out, lse, q, k, v, s, scale)
		return
	}
	d.enter()
	defer d.leave()
	if !d.want("Attention", f32Only, out, lse, q, k, v) || s.Seq == 0 {
		return
	}
	if d.attentionTC(s) {
		d.launchAttentionTC(out, lse, q, k, v, s, scale)
		return
	}
	grid := [3]uint32{uint32((s.Seq + attBQ - 1) / attBQ), uint32(s.Batch * s.Heads), 1}
	d.launch(fmt.Sprintf("h_attn_fwd_d%d", s.HeadDim), grid, [3]uint32{attBQ, 1, 1}, 0,
		ptrArg(out), ptrArg(lse), ptrArg(q), ptrArg(k), ptrArg(v), i32arg(s.Seq), i32arg(s.Heads), f32arg(scale))
}

// AttentionBackward computes dq and dk, dv, recomputing probabilities from
// lse: on tensor cores for the head dims of attentionTCHeadDims, else one
// thread per query (dq) and per key (dk, dv).
func (d *Device) AttentionBackward(dq, dk, dv, dout, q, k, v, out, lse device.Buffer, s device.AttentionShape, scale float32) {
	if s.Grouped() { // as Attention
		compose.AttentionBackward(d, dq, dk, dv, dout, q, k, v, out, lse, s, scale)
		return
	}
	if !attentionKernel(s) {
		compose.AttentionBackward(compose.CoreOnly(d), dq, dk, dv, dout, q, k, v, out, lse, s, scale)
		return
	}
	var delta device.Buffer // the tensor-core backward's dO . O per query
	if d.attentionTC(s) && s.Seq > 0 {
		// Allocated before enter (Alloc takes the device) and freed after
		// leave: the cache hands the block out again only to work queued
		// later on the same stream.
		var err error
		if delta, err = d.Alloc(device.Float32, s.Batch*s.Heads*s.Seq); err != nil {
			d.fail(err)
			return
		}
		defer d.Free(delta)
	}
	d.enter()
	defer d.leave()
	if !d.want("AttentionBackward", f32Only, dq, dk, dv, dout, q, k, v, out, lse) || s.Seq == 0 {
		return
	}
	if delta != nil {
		d.launchAttentionBackwardTC(dq, dk, dv, dout, q, k, v, out, lse, delta, s, scale)
		return
	}
	bh := uint32(s.Batch * s.Heads)
	d.launch(fmt.Sprintf("h_attn_bwd_dq_d%d", s.HeadDim), [3]uint32{uint32((s.Seq + attBQ - 1) / attBQ), bh, 1}, [3]uint32{attBQ, 1, 1}, 0,
		ptrArg(dq), ptrArg(dout), ptrArg(q), ptrArg(k), ptrArg(v), ptrArg(out), ptrArg(lse),
		i32arg(s.Seq), i32arg(s.Heads), f32arg(scale))
	d.launch(fmt.Sprintf("h_attn_bwd_dkdv_d%d", s.HeadDim), [3]uint32{uint32((s.Seq + attBK - 1) / attBK), bh, 1}, [3]uint32{attBK, 1, 1}, 0,
		ptrArg(dk), ptrArg(dv), ptrArg(dout), ptrArg(q), ptrArg(k), ptrArg(v), ptrArg(out), ptrArg(lse),
		i32arg(s.Seq), i32arg(s.Heads), f32arg(scale))
}

// CrossEntropy computes per-row loss and lse, one block per row.
func (d *Device) CrossEntropy(loss, lse, logits, targets device.Buffer, rows, vocab int) {
	d.kernelRows("CrossEntropy", "h_xent_f32", rows, 512, []device.Buffer{loss, lse, logits}, []device.Buffer{targets},
		i64arg(int64(rows)), i64arg(int64(vocab)))
}

// CrossEntropyBackward writes dlogits from dloss and the saved lse;
// dlogits may alias logits.
func (d *Device) CrossEntropyBackward(dlogits, dloss, logits, lse, targets device.Buffer, rows, vocab int) {
	d.kernelRows("CrossEntropyBackward", "h_xent_bwd_f32", rows, 512, []device.Buffer{dlogits, dloss, logits, lse}, []device.Buffer{targets},
		i64arg(int64(rows)), i64arg(int64(vocab)))
}

// AdamWStep applies one AdamW update in place; step may be nil
// (optim.AdamWStepper).
func (d *Device) AdamWStep(p, g, m, v, step device.Buffer, lr, beta1, beta2, oneMinusBeta1, oneMinusBeta2, eps, decay, bc1, bc2 float32) {
	n := int64(p.Len())
	d.kernel1D("AdamWStep", "h_adamw_f32", n, []device.Buffer{p, g, m, v, step}, nil, i64arg(n),
		f32arg(lr), f32arg(beta1), f32arg(beta2), f32arg(oneMinusBeta1), f32arg(oneMinusBeta2), f32arg(eps), f32arg(decay),
		f32arg(bc1), f32arg(bc2))
}

// CrossEntropyWithGrad computes loss and lse and overwrites logits with
// gradScale * (softmax - onehot), reading the logits once for the
// statistics and once for the gradient.
func (d *Device) CrossEntropyWithGrad(loss, lse, logits, targets device.Buffer, rows, vocab int, gradScale float32) {
	d.kernelRows("CrossEntropyWithGrad", "h_xent_grad_f32", rows, 512, []device.Buffer{loss, lse, logits}, []device.Buffer{targets},
		i64arg(int64(rows)), i64arg(int64(vocab)), f32arg(gradScale))
}
