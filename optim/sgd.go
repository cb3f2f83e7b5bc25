package optim

import (
	"fmt"
	"math"

	"github.com/hilbert-ml/hilbert/tensor"
)

// SGDConfig holds SGD's hyper-parameters, those of torch.optim.SGD. The
// zero value with LR set is plain gradient descent.
type SGDConfig struct {
	// LR is the peak learning rate; a step uses LR * the schedule multiplier.
	LR float64
	// Momentum is the buffer's factor (0: no buffer).
	Momentum float64
	// Dampening scales the gradient added to the buffer by 1 - Dampening
	// (not on the first step, which copies the gradient into the buffer).
	Dampening float64
	// Nesterov uses d + Momentum*buf as the direction instead of buf; it
	// needs Momentum > 0 and Dampening 0.
	Nesterov bool
	// WeightDecay is coupled (L2), as in torch.optim.SGD: d = g + WeightDecay*p
	// before the momentum.
	WeightDecay float64
	// KeepStep keeps the last applied step per parameter (LastStep).
	KeepStep bool
}

func (c SGDConfig) validate() error {
	switch {
	case !(c.LR >= 0) || math.IsInf(c.LR, 0):
		return fmt.Errorf("optim: sgd: learning rate %v", c.LR)
	case !(c.Momentum >= 0) || math.IsInf(c.Momentum, 0):
		return fmt.Errorf("optim: sgd: momentum %v", c.Momentum)
	case !(c.Dampening >= 0 && c.Dampening <= 1):
		return fmt.Errorf("optim: sgd: dampening %v must lie in [0, 1]", c.Dampening)
	case !(c.WeightDecay >= 0) || math.IsInf(c.WeightDecay, 0):
		return fmt.Errorf("optim: sgd: weight decay %v", c.WeightDecay)
	case c.Nesterov && (c.Momentum == 0 || c.Dampening != 0):
		return fmt.Errorf("optim: sgd: Nesterov needs a momentum and zero dampening (momentum %v, dampening %v)", c.Momentum, c.Dampening)
	}
	return nil
}

// New returns an SGD optimizer over params.
func (c SGDConfig) New(params []*tensor.Tensor) (Optimizer, error) {
	return NewSGD(c, params)
}

// SGD is stochastic gradient descent with momentum, exactly as
// torch.optim.SGD (maximize off). Per parameter and step t from 1:
//
//	d = g + wd p
//	buf = d (t = 1) or m buf + (1 - dampening) d;  d = d + m buf (Nesterov) or buf
//	S = -lr_t d;  p = p + S
//
// (without momentum, d is used directly). It runs in the parameter's dtype
// (float32, or float64 on the CPU with the scalars exact).
type SGD struct {
	*perParam
	cfg SGDConfig
}

// NewSGD returns an SGD optimizer over params with empty momentum buffers.
func NewSGD(c SGDConfig, params []*tensor.Tensor) (*SGD, error) {
	return newPerParam(c.validate, sgdRule{c}, params,
		func(pp *perParam) *SGD { return &SGD{perParam: pp, cfg: c} })
}

// Config returns the optimizer's hyper-parameters.
func (o *SGD) Config() SGDConfig { return o.cfg }

// sgdRule is SGD's update; its state is the momentum buffer (with
// momentum: "sgd.buf.<name>") and the step counter ("sgd.t.<name>"). Its
// LastStep has the coupled weight decay in it.
type sgdRule struct{ cfg SGDConfig }

func (r sgdRule) spec() ruleSpec {
	s := ruleSpec{kind: "sgd", peak: r.cfg.LR, keepStep: r.cfg.KeepStep, counted: true}
	if r.cfg.Momentum != 0 {
		s.slots = []string{"buf"}
	}
	return s
}

func (r sgdRule) update(u *paramUpdate) error {
	dev, p := u.P.Device(), u.P
	d, err := tensor.NewPooled(dev, p.DType(), p.Len())
	if err != nil {
		return err
	}
	defer d.Release()
	db := d.Buffer()
	dev.Copy(db, u.G.Buffer())
	if wd := r.cfg.WeightDecay; wd != 0 {
		if err := axpby(dev, db, p.Buffer(), wd, 1); err != nil {
			return err
		}
	}
	if m := r.cfg.Momentum; m != 0 {
		buf := u.Slots[0].Buffer()
		if u.T == 1 {
			dev.Copy(buf, db)
		} else if err := axpby(dev, buf, db, 1-r.cfg.Dampening, m); err != nil {
			return err
		}
		if r.cfg.Nesterov {
			err = axpby(dev, db, buf, m, 1)
		} else {
			dev.Copy(db, buf)
		}
		if err != nil {
			return err
		}
	}
	if err := axpby(dev, p.Buffer(), db, -u.LR, 1); err != nil {
		return err
	}
	if u.Step != nil {
		return scaleBuf(dev, u.Step.Buffer(), db, -u.LR)
	}
	return nil
}
