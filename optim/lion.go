package optim

import (
	"fmt"
	"math"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/tensor"
)

// LionConfig holds Lion's hyper-parameters (Chen et al. 2023, "Symbolic
// Discovery of Optimization Algorithms"). The zero value is not useful;
// start from DefaultLion.
type LionConfig struct {
	// LR is the peak learning rate; a step uses LR * the schedule multiplier.
	LR float64
	// Beta1 mixes the momentum and the gradient into the step's sign;
	// Beta2 is the momentum's EMA factor.
	Beta1, Beta2 float64
	// WeightDecay is decoupled: p *= 1 - lr_t*WeightDecay before the step.
	WeightDecay float64
	// KeepStep keeps the last applied step per parameter (LastStep).
	KeepStep bool
}

// DefaultLion returns the paper's defaults at peak learning rate lr:
// betas (0.9, 0.99), no weight decay.
func DefaultLion(lr float64) LionConfig {
	return LionConfig{LR: lr, Beta1: 0.9, Beta2: 0.99}
}

func (c LionConfig) validate() error {
	switch {
	case !(c.LR >= 0) || math.IsInf(c.LR, 0):
		return fmt.Errorf("optim: lion: learning rate %v", c.LR)
	case !(c.Beta1 >= 0 && c.Beta1 <= 1) || !(c.Beta2 >= 0 && c.Beta2 < 1):
		return fmt.Errorf("optim: lion: betas (%v, %v) must lie in [0, 1] and [0, 1)", c.Beta1, c.Beta2)
	case !(c.WeightDecay >= 0) || math.IsInf(c.WeightDecay, 0):
		return fmt.Errorf("optim: lion: weight decay %v", c.WeightDecay)
	}
	return nil
}

// New returns a Lion optimizer over params with zeroed momentum.
func (c LionConfig) New(params []*tensor.Tensor) (Optimizer, error) {
	return NewLion(c, params)
}

// Lion takes the sign of an interpolation of momentum and gradient as its
// step. Per parameter and step:
//
//	S = -lr_t sign(b1 m + (1-b1) g);  p = p (1 - lr_t wd) + S
//	m = b2 m + (1-b2) g
//
// in the parameter's dtype (float32, or float64 on the CPU with the
// scalars exact). Its state is the momentum ("lion.m.<name>").
type Lion struct {
	*perParam
	cfg LionConfig
}

// NewLion returns a Lion optimizer over params with zeroed momentum.
func NewLion(c LionConfig, params []*tensor.Tensor) (*Lion, error) {
	return newPerParam(c.validate, lionRule{c}, params,
		func(pp *perParam) *Lion { return &Lion{perParam: pp, cfg: c} })
}

// Config returns the optimizer's hyper-parameters.
func (o *Lion) Config() LionConfig { return o.cfg }

type lionRule struct{ cfg LionConfig }

func (r lionRule) spec() ruleSpec {
	return ruleSpec{kind: "lion", peak: r.cfg.LR, keepStep: r.cfg.KeepStep, slots: []string{"m"}}
}

func (r lionRule) update(u *paramUpdate) error {
	dev, p, g, m := u.P.Device(), u.P, u.G, u.Slots[0]
	c, err := tensor.NewPooled(dev, p.DType(), p.Len())
	if err != nil {
		return err
	}
	defer c.Release()
	cb := c.Buffer()
	// c = sign(b1 m + (1-b1) g)
	dev.Copy(cb, m.Buffer())
	if err := axpby(dev, cb, g.Buffer(), 1-r.cfg.Beta1, r.cfg.Beta1); err != nil {
		return err
	}
	dev.Unary(device.Sign, cb, cb)
	if err := decayBuf(dev, p.Buffer(), 1-u.LR*r.cfg.WeightDecay); err != nil {
		return err
	}
	if err := axpby(dev, p.Buffer(), cb, -u.LR, 1); err != nil {
		return err
	}
	if u.Step != nil {
		if err := scaleBuf(dev, u.Step.Buffer(), cb, -u.LR); err != nil {
			return err
		}
	}
	return axpby(dev, m.Buffer(), g.Buffer(), 1-r.cfg.Beta2, r.cfg.Beta2)
}
