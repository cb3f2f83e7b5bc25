package nn

import (
	"cmp"
	"errors"
	"fmt"
	"math"

	"github.com/hilbert-ml/hilbert/autograd"
	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/tensor"
)

// RoPE holds half-split rotary position tables for up to MaxSeq positions
// (built once per model). It has no parameters.
type RoPE struct {
	cos, sin        *tensor.Tensor
	maxSeq, headDim int
}

// NewRoPE builds the tables for positions 0..maxSeq-1 and head dimension
// headDim with angle(t, j) = t * base^(-2j/headDim), computed in float64
// and stored in dtype, the model's: float32 (also the zero value) or
// float64.
func NewRoPE(dev device.Device, dtype device.DType, maxSeq, headDim int, base float64) (*RoPE, error) {
	if headDim <= 0 || headDim%2 != 0 || maxSeq <= 0 {
		return nil, fmt.Errorf("nn: RoPE: head dim %d (want even, > 0), max seq %d", headDim, maxSeq)
	}
	dtype = cmp.Or(dtype, device.Float32)
	cos, sin, err := autograd.RoPETables(dev, dtype, maxSeq, headDim, base)
	if err != nil {
		return nil, fmt.Errorf("nn: RoPE tables: %w", err)
	}
	return &RoPE{cos: cos, sin: sin, maxSeq: maxSeq, headDim: headDim}, nil
}

// NewRoPEScaled is NewRoPE with every frequency f_j = base^(-2j/headDim)
// replaced by scale(f_j), as Llama 3 rescales its long wavelengths.
func NewRoPEScaled(dev device.Device, dtype device.DType, maxSeq, headDim int, base float64, scale func(float64) float64) (*RoPE, error) {
	if headDim <= 0 || headDim%2 != 0 || maxSeq <= 0 {
		return nil, fmt.Errorf("nn: RoPE: head dim %d (want even, > 0), max seq %d", headDim, maxSeq)
	}
	half := headDim / 2
	cos, sin := make([]float64, maxSeq*half), make([]float64, maxSeq*half)
	for j := range half {
		f := scale(math.Pow(base, -2*float64(j)/float64(headDim)))
		for t := range maxSeq {
			cos[t*half+j], sin[t*half+j] = math.Cos(float64(t)*f), math.Sin(float64(t)*f)
		}
	}
	r := &RoPE{maxSeq: maxSeq, headDim: headDim}
	var err error
	if r.cos, err = tensor.NewOf(dev, cmp.Or(dtype, device.Float32), maxSeq, half); err == nil {
		if r.sin, err = tensor.NewOf(dev, r.cos.DType(), maxSeq, half); err == nil {
			err = errors.Join(r.cos.SetFloat64(cos), r.sin.SetFloat64(sin))
		}
	}
	if err != nil {
		return nil, fmt.Errorf("nn: RoPE tables: %w", err)
	}
	return r, nil
}

// MaxSeq returns the number of positions the tables cover.
func (r *RoPE) MaxSeq() int { return r.maxSeq }

// Forward rotates x [B, T, H, D] by position (T <= MaxSeq).
func (r *RoPE) Forward(g *autograd.Graph, x *tensor.Tensor) *tensor.Tensor {
	return g.RoPE(x, r.cos, r.sin)
}

// At rotates x [B, T, H, D] as positions pos..pos+T-1 (pos+T <= MaxSeq).
func (r *RoPE) At(g *autograd.Graph, x *tensor.Tensor, pos int) *tensor.Tensor {
	if pos == 0 {
		return r.Forward(g, x)
	}
	if g.Err() != nil {
		return nil
	}
	if pos+x.Dim(1) > r.maxSeq {
		g.Fail(fmt.Errorf("nn: RoPE: positions %d..%d exceed the tables' %d", pos, pos+x.Dim(1)-1, r.maxSeq))
		return nil
	}
	return g.RoPE(x, g.Slice(r.cos, 0, pos, pos+x.Dim(1)), g.Slice(r.sin, 0, pos, pos+x.Dim(1)))
}
