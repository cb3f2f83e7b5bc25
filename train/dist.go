package train

import (
	"fmt"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/dist"
	"github.com/hilbert-ml/hilbert/tensor"
)

// gradComm averages a data-parallel loop's gradients over the ranks.
type gradComm struct {
	c      dist.Communicator
	size   int
	params []*tensor.Tensor
	scalar *tensor.Tensor // one float32, for the loss
}

func newGradComm(dev device.Device, c dist.Communicator, params []*tensor.Tensor) (*gradComm, error) {
	buf, err := tensor.New(dev, 1)
	if err != nil {
		return nil, fmt.Errorf("train: data-parallel: %w", err)
	}
	return &gradComm{c: c, size: c.Size(), params: params, scalar: buf}, nil
}

// average replaces every parameter's gradient by its mean over the ranks.
// A parameter without a gradient on this rank gets a zero one first, so
// that every rank makes the same calls.
func (gc *gradComm) average() error {
	for _, p := range gc.params {
		g := p.Grad()
		if g == nil {
			z, err := tensor.NewOf(p.Device(), p.DType(), p.Shape()...)
			if err != nil {
				return fmt.Errorf("train: data-parallel: gradient of %q: %w", p.Name, err)
			}
			z.Device().Fill(z.Buffer(), 0)
			p.SetGrad(z)
			g = z
		}
		if g.Buffer().Len() != g.Len() {
			return fmt.Errorf("train: data-parallel: the gradient of %q is a view (%d of %d elements); want a whole buffer", p.Name, g.Len(), g.Buffer().Len())
		}
		if err := gc.c.AllReduce(g.Buffer(), dist.Average); err != nil {
			return fmt.Errorf("train: data-parallel: gradient of %q: %w", p.Name, err)
		}
	}
	return nil
}

// reduce returns the sum of v over the ranks (in float32).
func (gc *gradComm) reduce(v float64) (float64, error) {
	gc.scalar.SetFloat32([]float32{float32(v)})
	if err := gc.c.AllReduce(gc.scalar.Buffer(), dist.Sum); err != nil {
		return 0, fmt.Errorf("train: data-parallel: loss: %w", err)
	}
	return float64(gc.scalar.Item()), nil
}
