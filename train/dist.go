package train

import (
	"fmt"
	"strings"

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

// anyRank reports whether stop holds on any rank, so that every rank of a
// data-parallel run stops (on a signal, which mpirun forwards to each at
// its own moment) after the same update.
func (t *Trainer) anyRank(stop bool) (bool, error) {
	if t.loop.comm == nil {
		return stop, nil
	}
	v := 0.0
	if stop {
		v = 1
	}
	sum, err := t.loop.comm.reduce(v)
	if err != nil {
		return false, fmt.Errorf("train: update %d: %w", t.step+1, err)
	}
	return sum > 0, nil
}

// agree checks that every rank runs the same settings on the same data;
// where they differ, the error names each setting that does.
func (t *Trainer) agree() error {
	settings, err := t.settings()
	if err != nil {
		return fmt.Errorf("train: data-parallel: %w", err)
	}
	var b strings.Builder
	for _, s := range settings {
		fmt.Fprintf(&b, "%s=%s\n", s.name, s.value)
	}
	whole := dist.AgreeOn(t.comm, t.dev, "run configuration (settings and data fingerprints)", []byte(b.String()))
	if whole == nil {
		return nil
	}
	// Which ones: setting by setting, when every rank has the same list.
	if err := dist.AgreeOn(t.comm, t.dev, "number of settings", []byte(fmt.Sprint(len(settings)))); err != nil {
		return fmt.Errorf("train: data-parallel: %w", whole)
	}
	var differ []string
	for _, s := range settings {
		if err := dist.AgreeOn(t.comm, t.dev, s.name, []byte(s.name+"="+s.value)); err != nil {
			differ = append(differ, fmt.Sprintf("%s (here %s)", s.name, s.value))
		}
	}
	return fmt.Errorf("train: data-parallel: %w; differing: %s", whole, strings.Join(differ, ", "))
}

// agreeStart checks, before the first update of a data-parallel run, that
// every rank starts from the same point: all from the same checkpoint
// (its update and the digest of its state and weights) or all fresh. A
// rank that resumed beside one that did not would train a model that is
// neither run's.
func (t *Trainer) agreeStart() error {
	if t.comm == nil || t.comm.Size() < 2 {
		return nil
	}
	here := "a fresh start (no resume)"
	if t.resumed {
		here = t.resumeAt
	}
	if err := dist.AgreeOn(t.comm, t.dev, "starting point (resumed checkpoint or fresh start)", []byte(here)); err != nil {
		return fmt.Errorf("train: data-parallel: %w; here: %s: start every rank with -resume, or none", err, here)
	}
	return nil
}
