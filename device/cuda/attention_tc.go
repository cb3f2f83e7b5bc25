package cuda

import (
	"fmt"
	"slices"

	"github.com/hilbert-ml/hilbert/device"
)

// Tensor-core attention tile sizes; they must match attention_tc.cu.
const (
	attTCBQ      = 64  // queries per forward block
	attTCThreads = 128 // four warps of 16 queries
)

// attentionTCHeadDims are the head dimensions attention_tc.cu instantiates;
// other head dims take the SIMT kernels of attention.cu.
var attentionTCHeadDims = []int{64, 128}

// attentionTC reports whether the forward of shape s runs on tensor cores
// (bf16 operands, f32 accumulation) rather than the f32 SIMT kernel.
func (d *Device) attentionTC(s device.AttentionShape) bool {
	return !d.simtAttention && slices.Contains(attentionTCHeadDims, s.HeadDim)
}

// launchAttentionTC runs the tensor-core forward: one block of four warps
// per 64 queries of one (batch, head).
func (d *Device) launchAttentionTC(out, lse, q, k, v device.Buffer, s device.AttentionShape, scale float32) {
	grid := [3]uint32{uint32((s.Seq + attTCBQ - 1) / attTCBQ), uint32(s.Batch * s.Heads), 1}
	d.launch(fmt.Sprintf("h_attn_fwd_tc_d%d", s.HeadDim), grid, [3]uint32{attTCThreads, 1, 1}, 0,
		ptrArg(out), ptrArg(lse), ptrArg(q), ptrArg(k), ptrArg(v), i32arg(s.Seq), i32arg(s.Heads), f32arg(scale))
}
