package devicetest

import (
	"fmt"
	"math"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/compose"
)

// attentionKVShapes are attention shapes whose keys are not the queries'
// (their sequence or their heads): causal queries that are the last positions of a longer
// sequence (prefix caching; one new token; more than one query block of
// the CPU kernel), and unmasked cross-attention with more keys, fewer keys
// and one key.
var attentionKVShapes = []device.AttentionShape{
	{Batch: 2, Seq: 5, KVSeq: 12, Heads: 3, HeadDim: 16},
	{Batch: 2, Seq: 1, KVSeq: 20, Heads: 2, HeadDim: 32},
	{Batch: 1, Seq: 70, KVSeq: 100, Heads: 2, HeadDim: 16},
	{Batch: 2, Seq: 7, KVSeq: 11, Heads: 3, HeadDim: 32, Unmasked: true},
	{Batch: 1, Seq: 67, KVSeq: 9, Heads: 2, HeadDim: 16, Unmasked: true},
	{Batch: 2, Seq: 6, KVSeq: 1, Heads: 1, HeadDim: 16, Unmasked: true},
	{Batch: 1, Seq: 8, Heads: 2, HeadDim: 16, Unmasked: true}, // KVSeq 0: Seq
	// Grouped-query attention: causal over two query blocks, one new
	// token after a prefix, and unmasked with one key head for three.
	{Batch: 2, Seq: 70, Heads: 4, KVHeads: 2, HeadDim: 16},
	{Batch: 2, Seq: 1, KVSeq: 20, Heads: 6, KVHeads: 2, HeadDim: 32},
	{Batch: 1, Seq: 7, KVSeq: 11, Heads: 3, KVHeads: 1, HeadDim: 16, Unmasked: true},
}

// attentionKVCases checks Attender's forward and backward on
// attentionKVShapes against the composition, as the self-attention case
// of capCases does: buffers out, lse, q, k, v, dout, dq, dk, dv.
func attentionKVCases() []Capability {
	var cs []Capability
	for i, s := range attentionKVShapes {
		nq, nk := s.Batch*s.Seq*s.Heads*s.HeadDim, s.Batch*s.Keys()*s.KeyHeads()*s.HeadDim
		seed := uint64(300 + 10*i)
		r := func(k uint64, n int, sd float64) Data { return floats(randoms(seed+k, n, sd)) }
		scale := float32(1 / math.Sqrt(float64(s.HeadDim)))
		name := fmt.Sprintf("Attention/%dx%dx%dx%d/keys%d", s.Batch, s.Seq, s.Heads, s.HeadDim, s.Keys())
		if s.Grouped() {
			name += fmt.Sprintf("/kv%d", s.KVHeads)
		}
		if s.Unmasked {
			name += "/unmasked"
		}
		cs = append(cs, Capability{Name: name, Has: compose.Has[device.Attender],
			Buffers: []Data{r(0, nq, 1), r(1, s.Batch*s.Heads*s.Seq, 1), r(2, nq, 2), r(3, nk, 2), r(4, nk, 1),
				r(5, nq, 1), r(6, nq, 1), r(7, nk, 1), r(8, nk, 1)},
			Run: func(d device.Core, b []device.Buffer) {
				compose.Attention(d, b[0], b[1], b[2], b[3], b[4], s, scale)
				compose.AttentionBackward(d, b[6], b[7], b[8], b[5], b[2], b[3], b[4], b[0], b[1], s, scale)
			}})
	}
	return cs
}
