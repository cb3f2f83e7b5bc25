package cuda

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/hilbert-ml/hilbert/device"
)

// Tensor-core attention tile sizes; they must match attention_tc.cu.
const (
	attTCBQ      = 64  // queries per forward and dq block
	attTCThreads = 128 // four warps of 16 queries
)

// attTCKeyWarps is the number of warps (16 keys each) of a dk, dv block,
// by head dim.
var attTCKeyWarps = map[int]int{64: 4, 128: 2}

// attentionTCHeadDims are the head dimensions attention_tc.cu instantiates;
// other head dims take the SIMT kernels of attention.cu.
var attentionTCHeadDims = []int{64, 128}

// attentionTC reports whether the forward and backward of shape s run on
// tensor cores (bf16 operands, f32 accumulation) rather than the f32 SIMT
// kernels: only when the caller allows bf16 operands (autocast), and bf16
// mma.sync needs compute capability 8.0 (sm_80) or newer.
func (d *Device) attentionTC(s device.AttentionShape) bool {
	return s.BFloat16Operands && !d.simtAttention && archAtLeast(d.arch, 80) && slices.Contains(attentionTCHeadDims, s.HeadDim)
}

// AttentionKernel names the kernels that Attention and AttentionBackward
// run for shape s on this device (device/profile adds the name to its
// attention rows): "mma.sync bf16" for the tensor-core kernels of
// attention_tc.cu, "simt f32" for the SIMT kernels of attention.cu, and
// "composed" for a shape without a fused kernel (a head dim without an
// instance, keys of another length, unmasked: the Core composition).
func (d *Device) AttentionKernel(s device.AttentionShape) string {
	switch {
	case !attentionKernel(s):
		return "composed"
	case d.attentionTC(s):
		return "mma.sync bf16"
	default:
		return "simt f32"
	}
}

// archAtLeast reports whether an architecture name such as "sm_90" is at
// least sm_<min>; a name it cannot read is not.
func archAtLeast(arch string, min int) bool {
	n, err := strconv.Atoi(strings.TrimPrefix(arch, "sm_"))
	return err == nil && strings.HasPrefix(arch, "sm_") && n >= min
}

// launchAttentionTC runs the tensor-core forward: one block of four warps
// per 64 queries of one (batch, head).
func (d *Device) launchAttentionTC(out, lse, q, k, v device.Buffer, s device.AttentionShape, scale float32) {
	grid := [3]uint32{uint32((s.Seq + attTCBQ - 1) / attTCBQ), uint32(s.Batch * s.Heads), 1}
	d.launch(fmt.Sprintf("h_attn_fwd_tc_d%d", s.HeadDim), grid, [3]uint32{attTCThreads, 1, 1}, 0,
		ptrArg(out), ptrArg(lse), ptrArg(q), ptrArg(k), ptrArg(v), i32arg(s.Seq), i32arg(s.Heads), f32arg(scale))
}

// launchAttentionBackwardTC runs the tensor-core backward: dq per 64
// queries, which also writes delta_i = dO_i . O_i (once per backward) to
// the scratch buffer delta of B H T floats, then dk and dv per 16 keys a
// warp, which read it (the same stream orders them).
func (d *Device) launchAttentionBackwardTC(dq, dk, dv, dout, q, k, v, out, lse, delta device.Buffer, s device.AttentionShape, scale float32) {
	bh := uint32(s.Batch * s.Heads)
	d.launch(fmt.Sprintf("h_attn_bwd_dq_tc_d%d", s.HeadDim), [3]uint32{uint32((s.Seq + attTCBQ - 1) / attTCBQ), bh, 1}, [3]uint32{attTCThreads, 1, 1}, 0,
		ptrArg(dq), ptrArg(delta), ptrArg(dout), ptrArg(q), ptrArg(k), ptrArg(v), ptrArg(out), ptrArg(lse),
		i32arg(s.Seq), i32arg(s.Heads), f32arg(scale))
	w := attTCKeyWarps[s.HeadDim]
	d.launch(fmt.Sprintf("h_attn_bwd_dkdv_tc_d%d", s.HeadDim), [3]uint32{uint32((s.Seq + 16*w - 1) / (16 * w)), bh, 1}, [3]uint32{uint32(32 * w), 1, 1}, 0,
		ptrArg(dk), ptrArg(dv), ptrArg(dout), ptrArg(q), ptrArg(k), ptrArg(v), ptrArg(delta), ptrArg(lse),
		i32arg(s.Seq), i32arg(s.Heads), f32arg(scale))
}
