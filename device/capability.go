package device

// The optional capabilities: kernels a backend may implement beside the
// Core because they are faster fused than composed. None is required.
// Callers never assert them directly: device/compose has one function per
// method (compose.RMSNorm, compose.Attention, ...) that runs the backend's
// kernel when it has the capability and the composition from the Core
// otherwise; the composition is the definition, and devicetest checks
// every capability a backend has against it. Each interface below names
// its composition. Kernels follow the package conventions (no allocation,
// no validation, outputs written, not accumulated, unless stated).
//
// These are the capabilities of the model (its layers, loss and
// gradients) and a few data movements every layer above uses. A kernel
// that serves one package is declared by that package, in the same
// pattern (an interface a backend satisfies by its method alone, run
// through compose.Run with the composition beside it): optim's AdamWStep
// and RowScale, optim/geometry's PairDistanceMax.

// Transposer swaps two middle axes with one kernel.
// Composition: one CopyStrided over [batch, cols, rows, inner].
type Transposer interface {
	// Transpose swaps the two middle axes of src viewed as
	// [batch, rows, cols, inner]: dst[b, c, r, i] = src[b, r, c, i]. A 2-D
	// transpose is batch = inner = 1; splitting heads [B, T, H, D] into
	// [B, H, T, D] is batch = B, rows = T, cols = H, inner = D.
	Transpose(dst, src Buffer, batch, rows, cols, inner int)
}

// Axpbyer is dst = alpha x + beta dst with the scalars from the host, in
// one pass. It is the one elementwise capability: the Core takes scalars
// only as device buffers, so its composition costs a scalar buffer (an
// allocation, and on CUDA a copy from the host) and two more passes per
// call, and autograd's backward, gradient accumulation, clipping and the
// optimizers scale buffers many times a step. Composition: BinaryStrided
// Mul by a one-element buffer read as a stride-0 view, and Add.
type Axpbyer interface {
	// Axpby computes dst = alpha * x + beta * dst elementwise (equal
	// lengths); with beta 0 it is dst = alpha * x and dst is not read (a
	// NaN there does not propagate). dst may alias x.
	Axpby(dst, x Buffer, alpha, beta float32)
}

// Reducer reduces a matrix along one of its two axes.
// Composition: ReduceAxis with (outer, n, inner) = (rows, cols, 1) for
// axis 1 and (1, rows, cols) for axis 0.
type Reducer interface {
	// Reduce reduces src, viewed as rows x cols, along axis 1 (each row to
	// one value, dst has rows elements) or axis 0 (each column, dst has
	// cols elements), for Sum, SumSquares and Max. Sums accumulate in
	// float64 on the CPU backend.
	Reduce(op ReduceOp, axis int, dst, src Buffer, rows, cols int)
}

// RowGatherer gathers and scatter-adds whole rows (embedding lookups and
// their gradient). Composition: GatherAxis and ScatterAddAxis with outer 1
// and an index view of strides (0, 1, 0).
type RowGatherer interface {
	// Gather copies rows of table (tableRows x cols) into dst: dst[i,:] =
	// table[idx[i],:]. idx is Int32 and every entry is in [0, tableRows).
	Gather(dst, table, idx Buffer, cols int)
	// ScatterAdd adds rows of src into dst: dst[idx[i],:] += src[i,:],
	// accumulating repeated indices.
	ScatterAdd(dst, src, idx Buffer, cols int)
}

// RMSNormer is the gain-less RMS norm and its gradient in one pass each.
// Composition: ReduceAxis(SumSquares), times 1/cols, add eps, Rsqrt, and
// a broadcast Mul; the backward dx = rstd * (dy - x * rstd^2 * mean(dy*x))
// in the same ops.
type RMSNormer interface {
	// RMSNorm normalises each row of x (rows x cols) without a gain:
	// out = x / sqrt(mean(x^2) + eps), and stores 1/sqrt(mean(x^2)+eps) in
	// rstd (rows elements) for the backward pass.
	RMSNorm(out, rstd, x Buffer, rows, cols int, eps float32)
	// RMSNormBackward computes dx from dy, x and the saved rstd.
	RMSNormBackward(dx, dy, x, rstd Buffer, rows, cols int)
}

// RMSNormGainer is the RMS norm with a gain (Llama's norms) and its
// gradients in one pass each. Composition: RMSNormer's kernels, a Mul by
// the gain broadcast over the rows, and the gain's gradient as a
// ReduceAxis over the rows of dy times the normalised x.
type RMSNormGainer interface {
	// RMSNormGain computes out = (x rstd) gain for each row of x (rows x
	// cols; gain of cols elements; each product rounded, as the
	// composition's two passes), storing rstd = 1/sqrt(mean(x^2) + eps).
	RMSNormGain(out, rstd, x, gain Buffer, rows, cols int, eps float32)
	// RMSNormGainBackward computes dx (RMSNormBackward of dy gain) and,
	// unless dgain is nil, the gain's gradient dgain = the sum over the
	// rows of dy (x rstd), summed in float64.
	RMSNormGainBackward(dx, dgain, dy, x, rstd, gain Buffer, rows, cols int)
}

// LayerNormer is LayerNorm, with an optional gain and bias, and its
// gradient in one pass each. Composition: the mean by ReduceAxis Sum, a
// broadcast Sub, the biased variance by ReduceAxis SumSquares, eps and
// Rsqrt, broadcast Muls by rstd and the gain and an Add of the bias; the
// backward, with xhat = (x - mean) rstd and g = dy w,
// dx = rstd (g - mean(g) - xhat mean(g xhat)), dw = the column sums of
// dy xhat and db those of dy, in the same ops.
type LayerNormer interface {
	// LayerNorm normalises each row of x (rows x cols):
	// out = (x - mean) rstd w + b with rstd = 1/sqrt(var + eps), var the
	// row's biased variance, w and b of cols elements (nil: a gain of 1, a
	// bias of 0). It stores each row's mean and rstd (rows elements each)
	// for the backward pass.
	LayerNorm(out, mean, rstd, x, w, b Buffer, rows, cols int, eps float32)
	// LayerNormBackward computes dx from dy, x, w (nil: a gain of 1) and
	// the saved mean and rstd, and, where not nil, dw (the column sums of
	// dy xhat) and db (those of dy), overwriting them.
	LayerNormBackward(dx, dw, db, dy, x, w, mean, rstd Buffer, rows, cols int)
}

// GELUer is GPT-2's GELU, the tanh approximation, of x plus a bias, and
// its gradient, in one pass each:
// gelu(z) = z/2 (1 + tanh(u)) = z sigmoid(2u), u = sqrt(2/pi) (z + 0.044715 z^3).
// Composition: a broadcast Add of the bias, Square, Mul, scalar Adds and
// Muls, Tanh; the backward
// dx = dout (1/2 (1 + tanh u) + z/2 (1 - tanh^2 u) sqrt(2/pi) (1 + 3 0.044715 z^2))
// in the same ops.
type GELUer interface {
	// GELUTanh computes out[r, c] = gelu(x[r, c] + bias[c]) for x of rows x
	// cols (bias nil: none). out may alias x.
	GELUTanh(out, x, bias Buffer, rows, cols int)
	// GELUTanhBackward computes dx = dout gelu'(x + bias) (bias nil:
	// none). dx may alias dout.
	GELUTanhBackward(dx, dout, x, bias Buffer, rows, cols int)
}

// RoPEr is half-split rotary embedding in one pass. Composition:
// broadcast Mul, Sub and Add on the two halves read through strided views
// (the tables broadcast over batch and heads), and two CopyStrided into
// the halves of out.
type RoPEr interface {
	// RoPE applies half-split rotary embedding to x laid out as
	// [Batch, Seq, Heads, HeadDim]: for each head vector [l, r] (halves of
	// HeadDim/2) at position t, out = [l*cos - r*sin, r*cos + l*sin] with
	// cos, sin read from tables of Seq x HeadDim/2 (row t). With inverse
	// set it rotates by the opposite angle, which is the backward pass.
	// out may alias x.
	RoPE(out, x, cos, sin Buffer, s AttentionShape, inverse bool)
}

// SwiGLUer is the SwiGLU gate and its gradient in one pass each.
// Composition: Sigmoid and Mul (silu(a) = a * sigmoid(a)); the backward
// da = dout * b * (s + silu(a) * (1 - s)), s = sigmoid(a), db = dout * silu(a).
type SwiGLUer interface {
	// SwiGLU computes out = silu(a) * b elementwise, silu(a) = a*sigmoid(a).
	SwiGLU(out, a, b Buffer)
	// SwiGLUBackward computes da and db from dout, a and b.
	SwiGLUBackward(da, db, dout, a, b Buffer)
}

// Attender is fused attention (no T x T matrix kept). Composition,
// per batch: batched Gemm of the scores over heads, a causal -Inf mask
// added by broadcast (none when unmasked), a softmax from ReduceAxis Max
// and Sum, Exp and Log (giving lse), and a batched Gemm with v; the
// backward recomputes the probabilities from lse and runs the four Gemms
// of the softmax gradient.
type Attender interface {
	// Attention computes scaled-dot-product attention per batch and
	// head: out_t = sum_{u<s.Visible(t)} softmax_u(scale * q_t.k_u) v_u,
	// for q, k, v and out laid out as s describes (k and v have s.Keys()
	// positions: device/attention.go). It stores the log-sum-exp of each
	// query's scaled scores in lse ([Batch, Heads, Seq]) for the backward
	// pass.
	Attention(out, lse, q, k, v Buffer, s AttentionShape, scale float32)
	// AttentionBackward computes dq, dk and dv from dout and the forward
	// inputs, output and lse.
	AttentionBackward(dq, dk, dv, dout, q, k, v, out, lse Buffer, s AttentionShape, scale float32)
}

// GroupedAttender is an Attender whose kernels take grouped-query shapes
// (s.Grouped(): k and v with fewer heads than q) as they are. compose
// gives any other Attender, and the composition, such a shape's k and v
// repeated to s.Heads heads, and sums dk and dv back over each group.
type GroupedAttender interface {
	Attender
	// AttendsGrouped marks the capability; it does nothing.
	AttendsGrouped()
}

// CrossEntropier is the softmax cross-entropy of logits against targets,
// and its gradient. Composition: log-sum-exp from ReduceAxis Max and Sum,
// Exp and Log; the target logit by GatherAxis; the gradient as
// exp(logits - lse) * dloss with -dloss scatter-added at the targets.
type CrossEntropier interface {
	// CrossEntropy computes, for each row r of logits (rows x vocab), the
	// loss lse_r - logits[r, targets[r]] into loss and the log-sum-exp into
	// lse (both rows elements). targets is Int32 with entries in [0, vocab).
	CrossEntropy(loss, lse, logits, targets Buffer, rows, vocab int)
	// CrossEntropyBackward writes dlogits[r,:] = dloss[r] * (softmax(logits[r,:])
	// - onehot(targets[r])) using the saved lse. dlogits may alias logits.
	CrossEntropyBackward(dlogits, dloss, logits, lse, targets Buffer, rows, vocab int)
	// CrossEntropyWithGrad is CrossEntropy and CrossEntropyBackward in one
	// pass over the logits, for training: it writes loss and lse, and
	// overwrites logits in place with gradScale * (softmax - onehot), the
	// gradient of gradScale times each row's loss.
	CrossEntropyWithGrad(loss, lse, logits, targets Buffer, rows, vocab int, gradScale float32)
}

// Fused is every capability: what the CPU and CUDA backends implement.
type Fused interface {
	Transposer
	Axpbyer
	Reducer
	RowGatherer
	RMSNormer
	LayerNormer
	GELUer
	RoPEr
	SwiGLUer
	Attender
	CrossEntropier
}
