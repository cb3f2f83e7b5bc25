package nn

import (
	"fmt"

	"github.com/hilbert-ml/hilbert/autograd"
	"github.com/hilbert-ml/hilbert/tensor"
)

// Linear is the affine map y = x W^T + b with Weight [out, in] (the
// PyTorch layout, so state dicts load unchanged) and an optional Bias
// [out]; a nil Bias is a bias-free map.
type Linear struct {
	Weight *tensor.Tensor
	Bias   *tensor.Tensor
}

// NewLinear returns a bias-free Linear from in to out features with its
// weight drawn by init.Normal.
func NewLinear(init *Init, in, out int) Linear {
	return Linear{Weight: init.Normal(out, in)}
}

// NewLinearBias returns a Linear from in to out features with its weight
// drawn by init.Normal and a zero bias.
func NewLinearBias(init *Init, in, out int) Linear {
	return Linear{Weight: init.Normal(out, in), Bias: init.Zeros(out)}
}

// Forward maps x [..., in] to [..., out] (leading axes are folded into
// one matrix product).
func (l *Linear) Forward(g *autograd.Graph, x *tensor.Tensor) *tensor.Tensor {
	y := g.MatMul(x, l.Weight, false, true)
	if l.Bias != nil {
		y = g.Add(y, l.Bias)
	}
	return y
}

// Embedding maps token ids to rows of Weight [vocab, dim].
type Embedding struct {
	Weight *tensor.Tensor
}

// NewEmbedding returns an Embedding of vocab rows of dim features.
func NewEmbedding(init *Init, vocab, dim int) Embedding {
	return Embedding{Weight: init.Normal(vocab, dim)}
}

// Forward returns the rows for ids (int32, any shape): shape
// ids.Shape() + [dim].
func (e *Embedding) Forward(g *autograd.Graph, ids *tensor.Tensor) *tensor.Tensor {
	return g.Embedding(e.Weight, ids)
}

// DefaultEps is the RMSNorm epsilon of the paper's model.
const DefaultEps = 1e-6

// RMSNorm normalises the last axis: x / sqrt(mean(x^2) + Eps), times an
// optional learned Gain [dim]. With a nil Gain (the paper's) it has no
// parameters.
type RMSNorm struct {
	// Gain multiplies the normalised input; nil means none.
	Gain *tensor.Tensor
	// Eps is added to the mean square, rounded once to the input's dtype;
	// zero means DefaultEps.
	Eps float64
}

// NewRMSNorm returns an RMSNorm over dim features with a gain of ones.
func NewRMSNorm(init *Init, dim int) RMSNorm {
	return RMSNorm{Gain: init.Ones(dim)}
}

// Forward normalises x over its last axis.
func (n RMSNorm) Forward(g *autograd.Graph, x *tensor.Tensor) *tensor.Tensor {
	eps := n.Eps
	if eps == 0 {
		eps = DefaultEps
	}
	y := g.RMSNorm(x, eps)
	if n.Gain != nil {
		y = g.Mul(y, n.Gain)
	}
	return y
}

// dims3 returns the sizes of a [B, T, d] activation, recording an error
// in g (and returning ok false) when x is not rank 3 with last axis d.
func dims3(g *autograd.Graph, op string, x *tensor.Tensor, d int) (b, t int, ok bool) {
	if g.Err() != nil || x == nil {
		g.Fail(fmt.Errorf("nn: %s: nil input", op))
		return 0, 0, false
	}
	if x.Rank() != 3 || x.Dim(2) != d {
		g.Fail(fmt.Errorf("nn: %s: input %v: want [batch, seq, %d]", op, x.Shape(), d))
		return 0, 0, false
	}
	return x.Dim(0), x.Dim(1), true
}
