package train

import (
	"fmt"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/dist"
	"github.com/hilbert-ml/hilbert/tensor"
)

// gradComm averages a data-parallel loop's gradients over the ranks (a
// dist.Reducer, in buckets after the backward pass: on CPU ranks MPI spins
// on the cores a backward pass would need, so overlapping does not pay).
type gradComm struct {
	c      dist.Communicator
	red    *dist.Reducer
	scalar *tensor.Tensor // one float32, for the loss
}

func newGradComm(dev device.Device, c dist.Communicator, params []*tensor.Tensor) (*gradComm, error) {
	buf, err := tensor.New(dev, 1)
	if err != nil {
		return nil, fmt.Errorf("train: data-parallel: %w", err)
	}
	red, err := dist.NewReducer(c, params, dist.ReducerOptions{})
	if err != nil {
		return nil, fmt.Errorf("train: data-parallel: %w", err)
	}
	return &gradComm{c: c, red: red, scalar: buf}, nil
}

// average replaces every parameter's gradient by its mean over the ranks.
func (gc *gradComm) average() error {
	if err := gc.red.Wait(); err != nil {
		return fmt.Errorf("train: data-parallel: gradients: %w", err)
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
