package nn

import (
	"cmp"
	"fmt"
	"strings"

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
// one matrix product). An input whose last axis is not in, or whose dtype
// is not the weight's, fails g with an error naming the layer (by its
// weight's name, once Parameters has named it), the weight and the shapes.
func (l *Linear) Forward(g *autograd.Graph, x *tensor.Tensor) *tensor.Tensor {
	y := l.product(g, x)
	if l.Bias != nil {
		y = g.Add(y, l.Bias) // nil, adding no error, when product failed
	}
	return y
}

// ForwardAct returns act(l.Forward(x)) with the bias added inside the
// activation's kernel where it takes one (GELUTanh: one pass each way
// instead of an add and the activation).
func (l *Linear) ForwardAct(g *autograd.Graph, x *tensor.Tensor, act Activation) *tensor.Tensor {
	if act != GELUTanh || l.Bias == nil {
		return act.Forward(g, l.Forward(g, x))
	}
	return g.GELUTanh(l.product(g, x), l.Bias)
}

// product returns x W^T, or nil with g failed (by check's error, unless g
// had failed already).
func (l *Linear) product(g *autograd.Graph, x *tensor.Tensor) *tensor.Tensor {
	if g.Err() != nil {
		return nil
	}
	if err := l.check(x); err != nil {
		g.Fail(err)
		return nil
	}
	return g.MatMul(x, l.Weight, false, true)
}

// check reports why x cannot go through l.
func (l *Linear) check(x *tensor.Tensor) error {
	name := moduleName("Linear", l.Weight, "weight")
	w := l.Weight
	switch {
	case x == nil:
		return fmt.Errorf("nn: %s: nil input", name)
	case w == nil || w.Rank() != 2:
		return fmt.Errorf("nn: %s: weight %v: want a matrix [out, in]", name, tensor.ShapeOf(w))
	case x.Rank() < 1 || x.Dim(-1) != w.Dim(1):
		return fmt.Errorf("nn: %s (%d -> %d features): input %v has %s features (weight %s)", name, w.Dim(1), w.Dim(0), x.Shape(), lastAxis(x), paramDesc(w))
	case l.Bias != nil && (l.Bias.Rank() != 1 || l.Bias.Dim(0) != w.Dim(0)):
		return fmt.Errorf("nn: %s: bias %s for weight %s: want [%d]", name, paramDesc(l.Bias), paramDesc(w), w.Dim(0))
	case !x.Released() && !w.Released() && x.DType() != w.DType():
		return fmt.Errorf("nn: %s: input %v is %v, its weight %s %v (build the model in the input's dtype, or Cast the input)", name, x.Shape(), x.DType(), paramDesc(w), w.DType())
	}
	return nil
}

// moduleName names a module of kind by its parameter p's name without the
// field ("Linear blocks.0.attn.q" for blocks.0.attn.q.weight), or the kind
// alone before Parameters has named p.
func moduleName(kind string, p *tensor.Tensor, field string) string {
	if p == nil || p.Name == "" {
		return kind
	}
	return kind + " " + strings.TrimSuffix(p.Name, "."+field)
}

// paramDesc is a parameter's name and shape, or its shape alone.
func paramDesc(p *tensor.Tensor) string {
	if p == nil {
		return "nil"
	}
	if p.Name == "" {
		return p.Shape().String()
	}
	return p.Name + " " + p.Shape().String()
}

// lastAxis is the size of x's last axis as text ("no" for a scalar).
func lastAxis(x *tensor.Tensor) string {
	if x.Rank() == 0 {
		return "no"
	}
	return fmt.Sprint(x.Dim(-1))
}

// checkVector reports a parameter p of module name (nil: absent) that is
// not a vector of x's last axis.
func checkVector(name, field string, p, x *tensor.Tensor) error {
	if p == nil || x == nil || x.Rank() == 0 || (p.Rank() == 1 && p.Dim(0) == x.Dim(-1)) {
		return nil
	}
	return fmt.Errorf("nn: %s: %s %s for input %v: want [%d], one per feature of the last axis", name, field, paramDesc(p), x.Shape(), x.Dim(-1))
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

// Forward normalises x over its last axis; a Gain that is not [dim] of
// x's last axis fails g naming the RMSNorm and its gain.
func (n RMSNorm) Forward(g *autograd.Graph, x *tensor.Tensor) *tensor.Tensor {
	if g.Err() != nil {
		return nil
	}
	if err := checkVector(moduleName("RMSNorm", n.Gain, "gain"), "gain", n.Gain, x); err != nil {
		g.Fail(err)
		return nil
	}
	return g.RMSNorm(x, n.Gain, cmp.Or(n.Eps, DefaultEps))
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
