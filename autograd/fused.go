package autograd

import (
	"fmt"
	"math"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/compose"
	"github.com/hilbert-ml/hilbert/tensor"
)

// kernels returns the device the fused ops of dtype dt run on: the
// backend for float32, whose fused kernels (or their compositions) take
// it; its Core alone for other float dtypes (float64 on the CPU), so that
// every fused op runs, and is gradient-checked, in float64 as its
// composition from the core.
func (g *Graph) kernels(dt device.DType) device.Core {
	if dt == device.Float32 {
		return g.dev
	}
	return compose.CoreOnly(g.dev)
}

// checkIDs verifies that ids is an int32 tensor whose values lie in
// [0, limit): by their recorded range (host data, or an op such as
// ArgMaxAxis that knows it), else by reading them back once (a device
// sync), which records the range until the ids are next modified.
func (g *Graph) checkIDs(op, what string, ids *tensor.Tensor, limit int) bool {
	if ids.DType() != device.Int32 {
		g.failf("%s: %s have dtype %v (want int32)", op, what, ids.DType())
		return false
	}
	lo, hi, known := ids.IndexRange()
	if !known {
		if err := g.dev.Synchronize(); err != nil {
			g.failf("%s: reading %s back to check their range: %v", op, what, err)
			return false
		}
		lo, hi = ids.ComputeIndexRange()
	}
	if ids.Len() > 0 && (lo < 0 || int(hi) >= limit) {
		g.failf("%s: %s range [%d, %d] outside [0, %d)", op, what, lo, hi, limit)
		return false
	}
	return true
}

// Embedding gathers rows of table ([V, d]) for each id in ids (int32, any
// shape): the result has shape ids.Shape() + [d]. Its backward adds into
// the table's gradient with a scatter-add (no dense V x d temporary).
func (g *Graph) Embedding(table, ids *tensor.Tensor) *tensor.Tensor {
	const op = "Embedding"
	if !g.ok(op, table, ids) {
		return nil
	}
	if table.Rank() != 2 || !isFloat(table) {
		return g.failf("%s: table %v %v: want a float32 or float64 matrix [vocab, dim]", op, table.DType(), table.Shape())
	}
	if !g.checkIDs(op, "ids", ids, table.Dim(0)) {
		return nil
	}
	d := table.Dim(1)
	out := g.allocOf(op, table.DType(), append(ids.Shape(), d)...)
	if out == nil {
		return nil
	}
	compose.Gather(g.kernels(table.DType()), out.Buffer(), table.Buffer(), ids.Buffer(), d)
	return g.recorded(node{op: embeddingOp{}, out: out, in: [3]*tensor.Tensor{table}, saved: [3]*tensor.Tensor{ids}})
}

// embeddingOp is a recorded Embedding (saved[0] the ids). Its backward
// scatter-adds straight into a float32 parameter's gradient, with no
// dense [vocab, dim] temporary.
type embeddingOp struct{}

func (embeddingOp) name() string      { return "Embedding" }
func (embeddingOp) reads(*node) slots { return saved0 }
func (embeddingOp) backward(g *Graph, n *node, gout *tensor.Tensor) {
	table, ids := n.in[0], n.saved[0]
	if !table.RequiresGrad() {
		return
	}
	d := table.Dim(1)
	k := g.kernels(table.DType())
	if table.IsLeaf() && table.DType() == device.Float32 {
		compose.ScatterAdd(k, g.leafGrad(table).Buffer(), gout.Buffer(), ids.Buffer(), d)
		return
	}
	dt := g.scratchLike(table, table.Shape()...)
	g.dev.Fill(dt.Buffer(), 0)
	compose.ScatterAdd(k, dt.Buffer(), gout.Buffer(), ids.Buffer(), d)
	g.accumulate(table, dt)
}

// RMSNorm normalises x over its last axis and scales by gain ([cols] of
// x's last axis; nil: none): x / sqrt(mean(x^2) + eps) gain, in x's
// float dtype (eps rounded once to it), as Hugging Face's LlamaRMSNorm
// (the paper's norms have no gain). The gain's product is rounded after
// the norm's, as a separate Mul would.
func (g *Graph) RMSNorm(x, gain *tensor.Tensor, eps float64) *tensor.Tensor {
	const op = "RMSNorm"
	rows, cols, ok := g.rowsOf(op, "gain", x, gain)
	if !ok {
		return nil
	}
	out := g.allocOf(op, x.DType(), x.Shape()...)
	rstd := g.allocOf(op, x.DType(), rows)
	if out == nil || rstd == nil {
		return nil
	}
	k := g.kernels(x.DType())
	if gain == nil {
		compose.RMSNorm(k, out.Buffer(), rstd.Buffer(), x.Buffer(), rows, cols, eps)
	} else {
		compose.RMSNormGain(k, out.Buffer(), rstd.Buffer(), x.Buffer(), gain.Buffer(), rows, cols, eps)
	}
	return g.recorded(node{op: rmsNormOp{}, out: out, in: [3]*tensor.Tensor{x, gain}, saved: [3]*tensor.Tensor{rstd}})
}

// rmsNormOp is a recorded RMSNorm (in: x and the gain, possibly nil;
// saved[0] the rows' 1/rms). Its backward is the fused capability's one
// pass over each row, and with a gain one over the columns for the gain's
// gradient; composed, it would be several passes and temporaries of x's
// size.
type rmsNormOp struct{}

func (rmsNormOp) name() string        { return "RMSNorm" }
func (rmsNormOp) reads(n *node) slots { return readsGain(n) }
func (rmsNormOp) backward(g *Graph, n *node, gout *tensor.Tensor) {
	x, gain := n.in[0], n.in[1]
	cols := x.Dim(-1)
	rows := x.Len() / cols
	k := g.kernels(x.DType())
	dx := g.scratchLike(x, x.Shape()...)
	if gain == nil {
		compose.RMSNormBackward(k, dx.Buffer(), gout.Buffer(), x.Buffer(), n.saved[0].Buffer(), rows, cols)
		g.accumulate(x, dx)
		return
	}
	var dgain *tensor.Tensor
	if gain.RequiresGrad() {
		dgain = g.scratchLike(gain, cols)
	}
	compose.RMSNormGainBackward(k, dx.Buffer(), bufferOf(dgain), gout.Buffer(), x.Buffer(), n.saved[0].Buffer(), gain.Buffer(), rows, cols)
	g.accumulate(x, dx)
	if dgain != nil {
		g.accumulate(gain, dgain)
	}
}

// LayerNorm normalises x over its last axis to zero mean and unit
// (biased) variance, then scales by w and shifts by b ([cols] each, nil:
// none): (x - mean) / sqrt(var + eps) w + b, in x's float dtype (eps
// rounded once to it), as PyTorch's layer_norm.
func (g *Graph) LayerNorm(x, w, b *tensor.Tensor, eps float64) *tensor.Tensor {
	const op = "LayerNorm"
	rows, cols, ok := g.rowsOf(op, "gain or bias", x, w, b)
	if !ok {
		return nil
	}
	out := g.allocOf(op, x.DType(), x.Shape()...)
	mean, rstd := g.allocOf(op, x.DType(), rows), g.allocOf(op, x.DType(), rows)
	if out == nil || mean == nil || rstd == nil {
		return nil
	}
	compose.LayerNorm(g.kernels(x.DType()), out.Buffer(), mean.Buffer(), rstd.Buffer(), x.Buffer(), bufferOf(w), bufferOf(b), rows, cols, eps)
	return g.recorded(node{op: layerNormOp{}, out: out, in: [3]*tensor.Tensor{x, w, b}, saved: [3]*tensor.Tensor{mean, rstd}})
}

// layerNormOp is a recorded LayerNorm (in: x, gain, bias, the last two
// possibly nil; saved: the rows' mean and rstd). Its backward is the
// fused capability's, giving the input's gradient and the gain's and
// bias's column sums; composed, it would be a dozen passes over x.
type layerNormOp struct{}

func (layerNormOp) name() string        { return "LayerNorm" }
func (layerNormOp) reads(n *node) slots { return readsGain(n) }
func (layerNormOp) backward(g *Graph, n *node, gout *tensor.Tensor) {
	x, w, b := n.in[0], n.in[1], n.in[2]
	cols := x.Dim(-1)
	dx := g.scratchLike(x, x.Shape()...)
	var dw, db *tensor.Tensor
	if w != nil && w.RequiresGrad() {
		dw = g.scratchLike(w, cols)
	}
	if b != nil && b.RequiresGrad() {
		db = g.scratchLike(b, cols)
	}
	compose.LayerNormBackward(g.kernels(x.DType()), dx.Buffer(), bufferOf(dw), bufferOf(db), gout.Buffer(), x.Buffer(), bufferOf(w),
		n.saved[0].Buffer(), n.saved[1].Buffer(), x.Len()/cols, cols)
	g.accumulate(x, dx)
	if dw != nil {
		g.accumulate(w, dw)
	}
	if db != nil {
		g.accumulate(b, db)
	}
}

// GELUTanh returns GPT-2's GELU, the tanh approximation, of x plus bias
// (nil: none; [cols] of x's last axis, broadcast over the rows):
// z/2 (1 + tanh(sqrt(2/pi) (z + 0.044715 z^3))) with z = x + bias, as
// PyTorch's gelu(approximate="tanh"). With the bias it is a Linear's
// bias add and the activation in one pass each way.
func (g *Graph) GELUTanh(x, bias *tensor.Tensor) *tensor.Tensor {
	const op = "GELUTanh"
	rows, cols, ok := g.rowsOf(op, "bias", x, bias)
	if !ok {
		return nil
	}
	out := g.allocOf(op, x.DType(), x.Shape()...)
	if out == nil {
		return nil
	}
	compose.GELUTanh(g.kernels(x.DType()), out.Buffer(), x.Buffer(), bufferOf(bias), rows, cols)
	return g.recorded(node{op: geluTanhOp{}, out: out, in: [3]*tensor.Tensor{x, bias}})
}

// geluTanhOp is a recorded GELUTanh (in: x and the bias, possibly nil).
// Its backward is the fused capability's one pass for the input's
// gradient, whose column sums are the bias's.
type geluTanhOp struct{}

func (geluTanhOp) name() string        { return "GELUTanh" }
func (geluTanhOp) reads(n *node) slots { return readsGain(n) }
func (geluTanhOp) backward(g *Graph, n *node, gout *tensor.Tensor) {
	x, bias := n.in[0], n.in[1]
	cols := x.Dim(-1)
	rows := x.Len() / cols
	k := g.kernels(x.DType())
	dx := g.scratchLike(x, x.Shape()...)
	compose.GELUTanhBackward(k, dx.Buffer(), gout.Buffer(), x.Buffer(), bufferOf(bias), rows, cols)
	if bias != nil && bias.RequiresGrad() {
		db := g.scratchLike(bias, cols)
		compose.Reduce(k, device.Sum, 0, db.Buffer(), dx.Buffer(), rows, cols)
		g.accumulate(bias, db)
	}
	g.accumulate(x, dx)
}

// rowsOf checks the operands of a row op (RMSNorm, LayerNorm, GELUTanh):
// x float32 or float64 with a non-empty last axis of cols, and each of
// params, unless nil, a [cols] vector of x's dtype (named what in the
// error). It returns x's rows and cols; false means g has failed naming
// op.
func (g *Graph) rowsOf(op, what string, x *tensor.Tensor, params ...*tensor.Tensor) (rows, cols int, ok bool) {
	in := []*tensor.Tensor{x} // and the params given
	for _, p := range params {
		if p != nil {
			in = append(in, p)
		}
	}
	if !g.ok(op, in...) {
		return 0, 0, false
	}
	if x.Rank() < 1 || x.Dim(-1) == 0 || !isFloat(x) {
		g.failf("%s: input %v %v: want float32 or float64 with a non-empty last axis", op, x.DType(), x.Shape())
		return 0, 0, false
	}
	cols = x.Dim(-1)
	for _, p := range params {
		if p != nil && (p.Rank() != 1 || p.Len() != cols || p.DType() != x.DType()) {
			g.failf("%s: %s %v %v for input %v %v: want [%d] of its dtype", op, what, p.DType(), p.Shape(), x.DType(), x.Shape(), cols)
			return 0, 0, false
		}
	}
	return x.Len() / cols, cols, true
}

// readsGain is the slots a row op with an optional gain or bias in in[1]
// reads in its backward: x, and the gain where there is one.
func readsGain(n *node) slots {
	if n.in[1] != nil {
		return in0 | in1
	}
	return in0
}

// bufferOf returns t's buffer, or nil for a nil t (an optional operand).
func bufferOf(t *tensor.Tensor) device.Buffer {
	if t == nil {
		return nil
	}
	return t.Buffer()
}

// RoPETables returns the half-split rotary tables cos and sin, each
// [seq, headDim/2], with angle(t, j) = t * base^(-2j/headDim), computed in
// float64 and stored in dtype: float32 (rounded once) or float64, the
// tables of a float64 model.
func RoPETables(dev device.Device, dtype device.DType, seq, headDim int, base float64) (cos, sin *tensor.Tensor, err error) {
	if dtype != device.Float32 && dtype != device.Float64 {
		return nil, nil, fmt.Errorf("autograd: RoPETables: dtype %v (want float32 or float64)", dtype)
	}
	if seq < 0 || headDim <= 0 || headDim%2 != 0 {
		return nil, nil, fmt.Errorf("autograd: RoPETables: %d positions, head dim %d (want >= 0 and even, > 0)", seq, headDim)
	}
	half := headDim / 2
	c := make([]float64, seq*half)
	s := make([]float64, seq*half)
	for t := 0; t < seq; t++ {
		for j := 0; j < half; j++ {
			a := float64(t) * math.Pow(base, -2*float64(j)/float64(headDim))
			c[t*half+j] = math.Cos(a)
			s[t*half+j] = math.Sin(a)
		}
	}
	if dtype == device.Float64 {
		if cos, err = tensor.FromFloat64(dev, c, seq, half); err == nil {
			sin, err = tensor.FromFloat64(dev, s, seq, half)
		}
	} else {
		if cos, err = tensor.FromFloat32(dev, round32(c), seq, half); err == nil {
			sin, err = tensor.FromFloat32(dev, round32(s), seq, half)
		}
	}
	if err != nil {
		return nil, nil, err
	}
	return cos, sin, nil
}

// round32 rounds every value to float32.
func round32(v []float64) []float32 {
	f := make([]float32, len(v))
	for i, x := range v {
		f[i] = float32(x)
	}
	return f
}

// attentionShape reads [B, T, H, D] from a rank-4 tensor; under bfloat16
// autocast the kernels may take bfloat16 operands.
func (g *Graph) attentionShape(x *tensor.Tensor) device.AttentionShape {
	return device.AttentionShape{Batch: x.Dim(0), Seq: x.Dim(1), Heads: x.Dim(2), HeadDim: x.Dim(3),
		BFloat16Operands: g.autocast == device.BFloat16}
}

// RoPE applies half-split rotary position embedding to x [B, T, H, D]
// using tables cos, sin of shape [maxT, D/2] with maxT >= T (position t
// uses row t).
func (g *Graph) RoPE(x, cos, sin *tensor.Tensor) *tensor.Tensor {
	const op = "RoPE"
	if !g.ok(op, x, cos, sin) {
		return nil
	}
	if x.Rank() != 4 || x.Dim(3)%2 != 0 || !isFloat(x) {
		return g.failf("%s: input %v %v: want float [batch, seq, heads, headDim] with an even headDim", op, x.DType(), x.Shape())
	}
	if cos.DType() != x.DType() || sin.DType() != x.DType() {
		return g.failf("%s: tables %v and %v for input %v (want the input's dtype)", op, cos.DType(), sin.DType(), x.DType())
	}
	s := g.attentionShape(x)
	half := s.HeadDim / 2
	if cos.Rank() != 2 || !cos.SameShape(sin) || cos.Dim(1) != half || cos.Dim(0) < s.Seq {
		return g.failf("%s: tables %v and %v do not cover input %v (want [>=%d %d])", op, cos.Shape(), sin.Shape(), x.Shape(), s.Seq, half)
	}
	out := g.allocOf(op, x.DType(), x.Shape()...)
	if out == nil {
		return nil
	}
	cb, sb := cos.Buffer().Slice(0, s.Seq*half), sin.Buffer().Slice(0, s.Seq*half)
	compose.RoPE(g.kernels(x.DType()), out.Buffer(), x.Buffer(), cb, sb, s, false)
	return g.recorded(node{op: ropeOp{}, out: out, in: [3]*tensor.Tensor{x}, saved: [3]*tensor.Tensor{cos, sin}})
}

// ropeOp is a recorded RoPE (saved the tables). Its backward is the fused
// rotation by the inverse angle, one pass as the forward.
type ropeOp struct{}

func (ropeOp) name() string      { return "RoPE" }
func (ropeOp) reads(*node) slots { return saved0 | saved1 }
func (ropeOp) backward(g *Graph, n *node, gout *tensor.Tensor) {
	x := n.in[0]
	s := g.attentionShape(x)
	half := s.HeadDim / 2
	dx := g.scratchLike(x, x.Shape()...)
	cb, sb := n.saved[0].Buffer().Slice(0, s.Seq*half), n.saved[1].Buffer().Slice(0, s.Seq*half)
	compose.RoPE(g.kernels(x.DType()), dx.Buffer(), gout.Buffer(), cb, sb, s, true)
	g.accumulate(x, dx)
}

// SwiGLU returns silu(a) * b elementwise (same shapes).
func (g *Graph) SwiGLU(a, b *tensor.Tensor) *tensor.Tensor {
	const op = "SwiGLU"
	if !g.ok(op, a, b) {
		return nil
	}
	if !a.SameShape(b) || !isFloat(a) || a.DType() != b.DType() {
		return g.failf("%s: %v %v and %v %v: want equal shapes of one float dtype", op, a.DType(), a.Shape(), b.DType(), b.Shape())
	}
	out := g.allocOf(op, a.DType(), a.Shape()...)
	if out == nil {
		return nil
	}
	compose.SwiGLU(g.kernels(a.DType()), out.Buffer(), a.Buffer(), b.Buffer())
	return g.recorded(node{op: swiGLUOp{}, out: out, in: [3]*tensor.Tensor{a, b}})
}

// swiGLUOp is a recorded SwiGLU. Its backward is the fused capability's
// one pass giving both gradients (composed: a sigmoid, several products
// and temporaries of the MLP's width).
type swiGLUOp struct{}

func (swiGLUOp) name() string      { return "SwiGLU" }
func (swiGLUOp) reads(*node) slots { return in0 | in1 }
func (swiGLUOp) backward(g *Graph, n *node, gout *tensor.Tensor) {
	a, b := n.in[0], n.in[1]
	da, db := g.scratchLike(a, a.Shape()...), g.scratchLike(b, b.Shape()...)
	compose.SwiGLUBackward(g.kernels(a.DType()), da.Buffer(), db.Buffer(), gout.Buffer(), a.Buffer(), b.Buffer())
	g.accumulate(a, da)
	g.accumulate(b, db)
}

// Attention returns causal scaled-dot-product attention of q [B, Tq, H, D]
// over k and v [B, Tk, Hkv, D] with Tk >= Tq (heads split by a free reshape
// of [B, T, H*D]); the result has q's layout. Hkv < H is grouped-query
// attention: Hkv divides H, and query head h reads key and value head
// h / (H/Hkv), as if each were repeated H/Hkv times (Hugging Face's
// repeat_kv), without the copies on a backend that takes the groups
// (device.GroupedAttender: the CPU). Query t is at position
// t + Tk - Tq of the keys' sequence and sees the keys up to it: Tk = Tq is
// causal self-attention, Tk > Tq the queries that follow a cached prefix
// of Tk - Tq positions. scale multiplies the scores (1/sqrt(D) usually).
// float32 attention takes scale as float32(scale), float64 attention
// exactly (a scale that is no float32 number is applied to q first, in
// float64). CrossAttention is the unmasked form (autograd/attention.go).
func (g *Graph) Attention(q, k, v *tensor.Tensor, scale float64) *tensor.Tensor {
	return g.attention("Attention", q, k, v, scale, false)
}
