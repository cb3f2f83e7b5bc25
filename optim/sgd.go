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
	cfg   SGDConfig
	state []*sgdState
	index map[*tensor.Tensor]*sgdState
}

type sgdState struct {
	paramState
	buf *tensor.Tensor // nil without momentum
}

// NewSGD returns an SGD optimizer over params with empty momentum buffers.
func NewSGD(c SGDConfig, params []*tensor.Tensor) (*SGD, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	if err := checkParams("sgd", params); err != nil {
		return nil, err
	}
	o := &SGD{cfg: c, index: map[*tensor.Tensor]*sgdState{}}
	for _, p := range params {
		ps, err := newParamState(p, c.KeepStep)
		if err != nil {
			return nil, fmt.Errorf("optim: sgd: state of %s: %w", p.Name, err)
		}
		st := &sgdState{paramState: *ps}
		if c.Momentum != 0 {
			if st.buf, err = tensor.NewOf(p.Device(), p.DType(), p.Shape()...); err != nil {
				return nil, fmt.Errorf("optim: sgd: state of %s: %w", p.Name, err)
			}
		}
		o.state = append(o.state, st)
		o.index[p] = st
	}
	return o, nil
}

// Kind returns "sgd".
func (o *SGD) Kind() string { return "sgd" }

// Config returns the optimizer's hyper-parameters.
func (o *SGD) Config() SGDConfig { return o.cfg }

// Params returns the parameters in order.
func (o *SGD) Params() []*tensor.Tensor {
	ps := make([]*tensor.Tensor, len(o.state))
	for i, st := range o.state {
		ps[i] = st.p
	}
	return ps
}

// Step applies one SGD update at learning rate LR*scale.
func (o *SGD) Step(scale float64) error {
	lr, err := lrOf("sgd", o.cfg.LR, scale)
	if err != nil {
		return err
	}
	for _, st := range o.state {
		g, err := gradOf("sgd", st.p)
		if err != nil {
			return err
		}
		if g == nil || st.p.Len() == 0 {
			continue
		}
		if err := o.step(st, g, lr); err != nil {
			return fmt.Errorf("optim: sgd: %s: %w", st.p.Name, err)
		}
	}
	return nil
}

func (o *SGD) step(st *sgdState, g *tensor.Tensor, lr float64) error {
	dev, p := st.p.Device(), st.p
	st.t++
	d, err := tensor.NewPooled(dev, p.DType(), p.Len())
	if err != nil {
		return err
	}
	defer d.Release()
	db := d.Buffer()
	dev.Copy(db, g.Buffer())
	if wd := o.cfg.WeightDecay; wd != 0 {
		if err := axpby(dev, db, p.Buffer(), wd, 1); err != nil {
			return err
		}
	}
	if m := o.cfg.Momentum; m != 0 {
		buf := st.buf.Buffer()
		if st.t == 1 {
			dev.Copy(buf, db)
		} else if err := axpby(dev, buf, db, 1-o.cfg.Dampening, m); err != nil {
			return err
		}
		if o.cfg.Nesterov {
			err = axpby(dev, db, buf, m, 1)
		} else {
			dev.Copy(db, buf)
		}
		if err != nil {
			return err
		}
	}
	if err := axpby(dev, p.Buffer(), db, -lr, 1); err != nil {
		return err
	}
	if st.step != nil {
		if err := scaleBuf(dev, st.step.Buffer(), db, -lr); err != nil {
			return err
		}
	}
	p.MarkModified() // a graph that saved p for its backward must not use the new values
	st.done = true
	return nil
}

// LastStep returns the step last applied to p (with SGD's coupled weight
// decay in it), or nil (see Optimizer).
func (o *SGD) LastStep(p *tensor.Tensor) *tensor.Tensor {
	if st := o.index[p]; st != nil {
		return st.lastStep()
	}
	return nil
}

// State returns the momentum buffer (with momentum) and the step counter
// of every parameter: "sgd.buf.<name>", "sgd.t.<name>".
func (o *SGD) State() []StateEntry {
	var es []StateEntry
	for _, st := range o.state {
		if st.buf != nil {
			es = append(es, StateEntry{Name: "sgd.buf." + st.p.Name, Tensor: st.buf})
		}
		es = append(es, StateEntry{Name: "sgd.t." + st.p.Name, Counter: &st.t})
	}
	return es
}
