package nn

import (
	"fmt"

	"github.com/hilbert-ml/hilbert/autograd"
	"github.com/hilbert-ml/hilbert/tensor"
)

// Linear is a bias-free affine map y = x W^T with Weight [out, in] (the
// PyTorch layout, so state dicts load unchanged).
type Linear struct {
	Weight *tensor.Tensor
}

// NewLinear returns a Linear from in to out features initialised by init.
func NewLinear(init *Init, in, out int) Linear {
	return Linear{Weight: init.Normal(out, in)}
}

// Forward maps x [..., in] to [..., out] (leading axes are folded into
// one matrix product).
func (l *Linear) Forward(g *autograd.Graph, x *tensor.Tensor) *tensor.Tensor {
	return g.MatMul(x, l.Weight, false, true)
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

// RMSNorm normalises the last axis without a learned gain:
// x / sqrt(mean(x^2) + Eps), in float32. It has no parameters.
type RMSNorm struct {
	// Eps is added to the mean square; zero means DefaultEps.
	Eps float32
}

// Forward normalises x over its last axis.
func (n RMSNorm) Forward(g *autograd.Graph, x *tensor.Tensor) *tensor.Tensor {
	eps := n.Eps
	if eps == 0 {
		eps = DefaultEps
	}
	return g.RMSNorm(x, eps)
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
