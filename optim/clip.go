package optim

import (
	"fmt"
	"math"

	"github.com/hilbert-ml/hilbert/tensor"
)

// ClipGradNorm computes the global L2 norm of the gradients of params (one
// norm over all of them; parameters without a gradient count as zero) and,
// when it exceeds maxNorm, scales every gradient by maxNorm/(norm + 1e-6),
// as torch.nn.utils.clip_grad_norm_ does. It returns the norm before
// clipping. Gradients are float32 or float64 (each scaled in its dtype).
//
// A non-finite norm is an error that names the first parameter, in the
// order given, whose gradient has a non-finite sum of squares; gradients
// are then left untouched.
func ClipGradNorm(params []*tensor.Tensor, maxNorm float64) (float64, error) {
	if !(maxNorm > 0) {
		return 0, fmt.Errorf("optim: ClipGradNorm: threshold %v must be positive", maxNorm)
	}
	var total float64
	for _, p := range params {
		g := p.Grad()
		if g == nil {
			continue
		}
		cols := 1
		if g.Rank() > 0 {
			cols = g.Dim(-1)
		}
		ss, err := sumSquares(g.Device(), g.Buffer(), g.Len(), cols)
		if err != nil {
			return 0, fmt.Errorf("optim: ClipGradNorm: %s: %w", p.Name, err)
		}
		if math.IsNaN(ss) || math.IsInf(ss, 0) {
			return ss, fmt.Errorf("optim: ClipGradNorm: non-finite gradient norm: gradient of %s has sum of squares %v", p.Name, ss)
		}
		total += ss
	}
	norm := math.Sqrt(total)
	if math.IsInf(norm, 0) {
		return norm, fmt.Errorf("optim: ClipGradNorm: gradient norm overflows (every parameter finite)")
	}
	if coef := maxNorm / (norm + 1e-6); coef < 1 {
		for _, p := range params {
			if g := p.Grad(); g != nil {
				if err := scaleBuf(g.Device(), g.Buffer(), g.Buffer(), coef); err != nil {
					return norm, fmt.Errorf("optim: ClipGradNorm: %s: %w", p.Name, err)
				}
			}
		}
	}
	return norm, nil
}
