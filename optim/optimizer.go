package optim

import (
	"fmt"
	"math"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/compose"
	"github.com/hilbert-ml/hilbert/tensor"
)

// Optimizer updates a fixed list of parameters from their gradients.
//
// The learning rate of a step is the optimizer's peak learning rate times
// the schedule's multiplier: Step(scale) uses lr_t = LR * scale.
type Optimizer interface {
	// Kind names the update rule: "adamw", "muon", "rownorm", "sgd" or "lion". It is the
	// first word of every state name.
	Kind() string
	// Params returns the parameters the optimizer updates, in order.
	Params() []*tensor.Tensor
	// Step applies one update with learning rate LR*scale to every
	// parameter that has a gradient. Optimizer state advances even when
	// scale is 0.
	Step(scale float64) error
	// LastStep returns the step most recently applied to p, excluding
	// weight decay (S_t in the paper: p_t = (1 - lr_t wd) p_{t-1} + S_t),
	// or nil when p is not the optimizer's, no step has run yet, or the
	// optimizer was not asked to keep steps (KeepStep).
	LastStep(p *tensor.Tensor) *tensor.Tensor
	// State returns the optimizer's state by stable names, for
	// checkpoints; see StateEntry.
	State() []StateEntry
}

// StateEntry is one piece of optimizer state under a stable name.
//
// Tensor state (moments, momentum buffers) has Tensor set, in the
// parameter's dtype: a checkpoint saves Tensor.Float32s() (Float64s() for
// float64 state) and restores with Tensor.SetFloat32 (SetFloat64), which
// is bit-exact. Step counters have Counter set instead: a pointer to the
// counter, read to save and written to restore.
//
// Names are "<kind>.<slot>.<parameter name>", for example
// "adamw.m.embed.weight", "adamw.v.embed.weight", "adamw.t.embed.weight",
// "muon.buf.blocks.0.attn.q.weight", "rownorm.b.head.weight" and
// "rownorm.t.head.weight".
type StateEntry struct {
	Name    string
	Tensor  *tensor.Tensor
	Counter *int64
}

// checkParams refuses parameters an optimizer cannot update: missing,
// unnamed, neither float32 nor float64, listed twice.
func checkParams(kind string, params []*tensor.Tensor) error {
	seen := map[*tensor.Tensor]bool{}
	for i, p := range params {
		if p == nil {
			return fmt.Errorf("optim: %s: parameter %d is nil", kind, i)
		}
		if p.Name == "" {
			return fmt.Errorf("optim: %s: parameter %d (%v) has no name", kind, i, p.Shape())
		}
		if dt := p.DType(); dt != device.Float32 && dt != device.Float64 {
			return fmt.Errorf("optim: %s: parameter %s is %v; optimizers update float32 and float64 parameters", kind, p.Name, dt)
		}
		if seen[p] {
			return fmt.Errorf("optim: %s: parameter %s listed twice", kind, p.Name)
		}
		seen[p] = true
	}
	return nil
}

// gradOf returns p's gradient, checking its shape; nil when p has none
// (a parameter that took no part in the loss is skipped, as in PyTorch).
func gradOf(kind string, p *tensor.Tensor) (*tensor.Tensor, error) {
	g := p.Grad()
	if g == nil {
		return nil, nil
	}
	if g.Len() != p.Len() || g.DType() != p.DType() {
		return nil, fmt.Errorf("optim: %s: gradient of %s is %v %v, parameter is %v", kind, p.Name, g.DType(), g.Shape(), p.Shape())
	}
	if g.Device() != p.Device() {
		return nil, fmt.Errorf("optim: %s: gradient of %s is on %s, parameter on %s", kind, p.Name, g.Device().Name(), p.Device().Name())
	}
	return g, nil
}

// matrixShape views a parameter of rank >= 2 as rows x cols with rows the
// leading dimension ([out, in] for a linear weight).
func matrixShape(kind string, p *tensor.Tensor) (rows, cols int, err error) {
	if p.Rank() < 2 {
		return 0, 0, fmt.Errorf("optim: %s: parameter %s has shape %v; %s updates matrices", kind, p.Name, p.Shape(), kind)
	}
	rows = p.Dim(0)
	if rows == 0 {
		return 0, 0, nil
	}
	return rows, p.Len() / rows, nil
}

// lrOf returns the scheduled learning rate, refusing a non-finite or
// negative schedule value.
func lrOf(kind string, peak, scale float64) (float64, error) {
	if math.IsNaN(scale) || math.IsInf(scale, 0) || scale < 0 {
		return 0, fmt.Errorf("optim: %s: schedule multiplier %v is not a finite non-negative number", kind, scale)
	}
	return peak * scale, nil
}

// sumSquares returns sum(x^2) of a buffer of n elements on its device,
// read back to the host. It reduces in two passes (per row of width cols,
// then the row results) so that the backend can parallelise, and the CPU
// backend accumulates both in float64. A buffer of another dtype than
// float32 (float64) is reduced in its dtype through the Core.
func sumSquares(dev device.Device, x device.Buffer, n, cols int) (float64, error) {
	if n == 0 {
		return 0, nil
	}
	if cols <= 0 || n%cols != 0 {
		cols = n
	}
	rows := n / cols
	if !is32(x) {
		return sumSquaresCore(dev, x, rows, cols)
	}
	part, err := tensor.NewPooled(dev, device.Float32, rows)
	if err != nil {
		return 0, err
	}
	defer part.Release()
	compose.Reduce(dev, device.SumSquares, 1, part.Buffer(), x, rows, cols)
	if rows == 1 {
		var v [1]float32
		dev.CopyToHost(v[:], part.Buffer())
		return float64(v[0]), nil
	}
	one, err := tensor.NewPooled(dev, device.Float32, 1)
	if err != nil {
		return 0, err
	}
	defer one.Release()
	compose.Reduce(dev, device.Sum, 1, one.Buffer(), part.Buffer(), 1, rows)
	var v [1]float32
	dev.CopyToHost(v[:], one.Buffer())
	return float64(v[0]), nil
}

// sumSquaresCore is sumSquares in x's dtype through the Core's ReduceAxis.
func sumSquaresCore(dev device.Device, x device.Buffer, rows, cols int) (float64, error) {
	part, err := tensor.NewPooled(dev, x.DType(), rows)
	if err != nil {
		return 0, err
	}
	defer part.Release()
	dev.ReduceAxis(device.SumSquares, part.Buffer(), x, rows, cols, 1)
	one, err := tensor.NewPooled(dev, x.DType(), 1)
	if err != nil {
		return 0, err
	}
	defer one.Release()
	dev.ReduceAxis(device.Sum, one.Buffer(), part.Buffer(), 1, rows, 1)
	var v [1]float64
	dev.CopyFloat64ToHost(v[:], one.Buffer())
	return v[0], nil
}
