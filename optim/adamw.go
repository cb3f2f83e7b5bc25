package optim

import (
	"fmt"
	"math"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/compose"
	"github.com/hilbert-ml/hilbert/tensor"
)

// AdamWConfig holds AdamW's hyper-parameters. The zero value is not
// useful; start from PaperAdamW.
type AdamWConfig struct {
	// LR is the peak learning rate; a step uses LR * the schedule multiplier.
	LR float64
	// Beta1 and Beta2 are the EMA factors of the first and second moments.
	Beta1, Beta2 float64
	// Eps is added to sqrt(vhat), outside the square root.
	Eps float64
	// WeightDecay is decoupled: p *= 1 - lr_t*WeightDecay before the step.
	WeightDecay float64
	// KeepStep keeps the last applied step per parameter (LastStep).
	KeepStep bool
}

// PaperAdamW returns the paper's AdamW settings at peak learning rate lr:
// betas (0.9, 0.999), eps 1e-10, weight decay 0.1.
func PaperAdamW(lr float64) AdamWConfig {
	return AdamWConfig{LR: lr, Beta1: 0.9, Beta2: 0.999, Eps: 1e-10, WeightDecay: 0.1}
}

func (c AdamWConfig) validate() error {
	switch {
	case !(c.LR >= 0) || math.IsInf(c.LR, 0):
		return fmt.Errorf("optim: adamw: learning rate %v", c.LR)
	case !(c.Beta1 >= 0 && c.Beta1 < 1) || !(c.Beta2 >= 0 && c.Beta2 < 1):
		return fmt.Errorf("optim: adamw: betas (%v, %v) must lie in [0, 1)", c.Beta1, c.Beta2)
	case !(c.Eps >= 0):
		return fmt.Errorf("optim: adamw: eps %v", c.Eps)
	case !(c.WeightDecay >= 0):
		return fmt.Errorf("optim: adamw: weight decay %v", c.WeightDecay)
	}
	return nil
}

// New returns an AdamW optimizer over params with zeroed moments.
func (c AdamWConfig) New(params []*tensor.Tensor) (Optimizer, error) {
	return NewAdamW(c, params)
}

// AdamW is Adam with decoupled weight decay, run by the device's AdamWStep
// kernel: m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
// S = -lr_t (m/(1-b1^t)) / (sqrt(v/(1-b2^t)) + eps); p = p (1 - lr_t wd) + S.
// Float32 parameters take the kernel (scalars in float32); float64 ones
// (on the CPU) take the same update through the Core in float64, the
// hyper-parameters exact, as torch.optim.AdamW computes it.
type AdamW struct {
	cfg   AdamWConfig
	state []*adamState
	index map[*tensor.Tensor]*adamState
}

type adamState struct {
	paramState
	m, v *tensor.Tensor
}

// NewAdamW returns an AdamW optimizer over params with zeroed moments.
func NewAdamW(c AdamWConfig, params []*tensor.Tensor) (*AdamW, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	if err := checkParams("adamw", params); err != nil {
		return nil, err
	}
	o := &AdamW{cfg: c, index: map[*tensor.Tensor]*adamState{}}
	for _, p := range params {
		ps, err := newParamState(p, c.KeepStep)
		if err != nil {
			return nil, fmt.Errorf("optim: adamw: state of %s: %w", p.Name, err)
		}
		st := &adamState{paramState: *ps}
		if st.m, err = tensor.NewOf(p.Device(), p.DType(), p.Shape()...); err == nil {
			st.v, err = tensor.NewOf(p.Device(), p.DType(), p.Shape()...)
		}
		if err != nil {
			return nil, fmt.Errorf("optim: adamw: state of %s: %w", p.Name, err)
		}
		o.state = append(o.state, st)
		o.index[p] = st
	}
	return o, nil
}

// Kind returns "adamw".
func (o *AdamW) Kind() string { return "adamw" }

// Config returns the optimizer's hyper-parameters.
func (o *AdamW) Config() AdamWConfig { return o.cfg }

// Params returns the parameters in order.
func (o *AdamW) Params() []*tensor.Tensor {
	ps := make([]*tensor.Tensor, len(o.state))
	for i, st := range o.state {
		ps[i] = st.p
	}
	return ps
}

// Step applies one AdamW update at learning rate LR*scale.
func (o *AdamW) Step(scale float64) error {
	lr, err := lrOf("adamw", o.cfg.LR, scale)
	if err != nil {
		return err
	}
	for _, st := range o.state {
		g, err := gradOf("adamw", st.p)
		if err != nil {
			return err
		}
		if g == nil {
			continue
		}
		st.t++
		if g.DType() != device.Float32 {
			if err := o.stepCore(st, g, lr); err != nil {
				return fmt.Errorf("optim: adamw: %s: %w", st.p.Name, err)
			}
			continue
		}
		h := device.AdamW{
			LR:              float32(lr),
			Beta1:           float32(o.cfg.Beta1),
			Beta2:           float32(o.cfg.Beta2),
			Eps:             float32(o.cfg.Eps),
			WeightDecay:     float32(o.cfg.WeightDecay),
			BiasCorrection1: float32(1 - math.Pow(o.cfg.Beta1, float64(st.t))),
			BiasCorrection2: float32(1 - math.Pow(o.cfg.Beta2, float64(st.t))),
			// 1 - beta from the config's float64 betas, not the float32 ones.
			ExactBeta1: o.cfg.Beta1, ExactBeta2: o.cfg.Beta2, ExactWeightDecay: o.cfg.WeightDecay,
		}
		var step device.Buffer
		if st.step != nil {
			step = st.step.Buffer()
		}
		compose.AdamWStep(st.p.Device(), st.p.Buffer(), g.Buffer(), st.m.Buffer(), st.v.Buffer(), step, h)
		st.p.MarkModified() // a graph that saved p for its backward must not use the new values
		st.done = true
	}
	return nil
}

// stepCore is Step's update of one parameter in its dtype through the
// Core, in torch.optim.AdamW's order: p *= 1 - lr wd; m = b1 m + (1-b1) g;
// v = b2 v + (1-b2) g^2; S = -(lr/bc1) m / (sqrt(v)/sqrt(bc2) + eps).
func (o *AdamW) stepCore(st *adamState, g *tensor.Tensor, lr float64) error {
	dev, dt, n := st.p.Device(), st.p.DType(), st.p.Len()
	b1, b2 := o.cfg.Beta1, o.cfg.Beta2
	bc1 := 1 - math.Pow(b1, float64(st.t))
	bc2 := 1 - math.Pow(b2, float64(st.t))
	t, err := tensor.NewPooled(dev, dt, n)
	if err != nil {
		return err
	}
	defer t.Release()
	u, err := tensor.NewPooled(dev, dt, n)
	if err != nil {
		return err
	}
	defer u.Release()
	dims := device.DimsOf(n)
	tb, ub := t.Buffer(), u.Buffer()
	if err := decayBuf(dev, st.p.Buffer(), 1-lr*o.cfg.WeightDecay); err != nil {
		return err
	}
	if err := axpby(dev, st.m.Buffer(), g.Buffer(), 1-b1, b1); err != nil {
		return err
	}
	dev.BinaryStrided(device.Mul, dims, tb, flatView(g.Buffer()), flatView(g.Buffer()))
	if err := axpby(dev, st.v.Buffer(), tb, 1-b2, b2); err != nil {
		return err
	}
	dev.Unary(device.Sqrt, ub, st.v.Buffer())
	if err := opScalar(dev, device.Div, ub, ub, math.Sqrt(bc2)); err != nil {
		return err
	}
	if err := opScalar(dev, device.Add, ub, ub, o.cfg.Eps); err != nil {
		return err
	}
	dev.BinaryStrided(device.Div, dims, tb, flatView(st.m.Buffer()), flatView(ub))
	if err := scaleBuf(dev, tb, tb, -lr/bc1); err != nil {
		return err
	}
	dev.BinaryStrided(device.Add, dims, st.p.Buffer(), flatView(st.p.Buffer()), flatView(tb))
	if st.step != nil {
		dev.Copy(st.step.Buffer(), tb)
	}
	st.p.MarkModified()
	st.done = true
	return nil
}

// LastStep returns the step last applied to p excluding weight decay, or
// nil (see Optimizer).
func (o *AdamW) LastStep(p *tensor.Tensor) *tensor.Tensor {
	if st := o.index[p]; st != nil {
		return st.lastStep()
	}
	return nil
}

// State returns m, v and the step counter of every parameter:
// "adamw.m.<name>", "adamw.v.<name>", "adamw.t.<name>".
func (o *AdamW) State() []StateEntry {
	var es []StateEntry
	for _, st := range o.state {
		es = append(es,
			StateEntry{Name: "adamw.m." + st.p.Name, Tensor: st.m},
			StateEntry{Name: "adamw.v." + st.p.Name, Tensor: st.v},
			StateEntry{Name: "adamw.t." + st.p.Name, Counter: &st.t})
	}
	return es
}
