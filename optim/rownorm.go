package optim

import (
	"fmt"
	"math"

	"github.com/hilbert-ml/hilbert/tensor"
)

// RowNormConfig holds RowNorm's hyper-parameters. The zero value is not
// useful; start from PaperRowNorm.
type RowNormConfig struct {
	// LR is the peak learning rate; a step uses LR * the schedule multiplier.
	LR float64
	// Beta is the EMA factor: B = Beta*B + (1-Beta)*G.
	Beta float64
	// Eps is added to each row's norm before dividing by it.
	Eps float64
	// WeightDecay is decoupled (p *= 1 - lr_t*WeightDecay); the paper uses
	// none, but the reference test values include it.
	WeightDecay float64
	// Projected selects the exact projected form PRN(A) = P RN(P A), with
	// P = I - 11^T/V centering over rows. Off, the practical form RN(A) is
	// used; the two differ by a common row (the outer P), which changes no
	// probability, loss or diagnostic, and by the inner P, a no-op for
	// cross-entropy gradients (1^T G = 0).
	Projected bool
	// KeepStep keeps the last applied step per parameter (LastStep).
	KeepStep bool
}

// PaperRowNorm returns the paper's RowNorm settings at peak learning rate
// lr: beta 0.95, eps 1e-8, no weight decay, practical form.
func PaperRowNorm(lr float64) RowNormConfig {
	return RowNormConfig{LR: lr, Beta: 0.95, Eps: 1e-8}
}

func (c RowNormConfig) validate() error {
	switch {
	case !(c.LR >= 0) || math.IsInf(c.LR, 0):
		return fmt.Errorf("optim: rownorm: learning rate %v", c.LR)
	case !(c.Beta >= 0 && c.Beta < 1):
		return fmt.Errorf("optim: rownorm: beta %v must lie in [0, 1)", c.Beta)
	case !(c.Eps >= 0):
		return fmt.Errorf("optim: rownorm: eps %v", c.Eps)
	case !(c.WeightDecay >= 0):
		return fmt.Errorf("optim: rownorm: weight decay %v", c.WeightDecay)
	}
	return nil
}

// New returns a RowNorm optimizer over params with a zeroed EMA.
func (c RowNormConfig) New(params []*tensor.Tensor) (Optimizer, error) {
	return NewRowNorm(c, params)
}

// RowNorm is the LM head's update: an EMA of the gradient with bias
// correction, each row normalised. For a head U (V x d) and step t from 1:
//
//	B = beta B + (1-beta) G;  Bhat = B / (1 - beta^t)
//	S = -lr_t RN(Bhat), RN(A)_i = A_i / (||A_i|| + eps)   (practical form)
//	S = -lr_t P RN(P Bhat)                                (projected form)
//	U = U (1 - lr_t wd) + S
//
// Every row of RN has norm below 1, so D(S) <= 2 lr_t. The bias correction
// is folded into the kernel's eps (RN(B/k) = B / (||B|| + k eps)), so a
// step is one RowScale (plus two column sums and AddRows when projected).
type RowNorm struct {
	cfg   RowNormConfig
	state []*rowNormState
	index map[*tensor.Tensor]*rowNormState
}

type rowNormState struct {
	paramState
	rows, cols int
	b          *tensor.Tensor
}

// NewRowNorm returns a RowNorm optimizer over params (rank >= 2, rows the
// leading dimension) with a zeroed EMA.
func NewRowNorm(c RowNormConfig, params []*tensor.Tensor) (*RowNorm, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	if err := checkParams("rownorm", params); err != nil {
		return nil, err
	}
	o := &RowNorm{cfg: c, index: map[*tensor.Tensor]*rowNormState{}}
	for _, p := range params {
		rows, cols, err := matrixShape("rownorm", p)
		if err != nil {
			return nil, err
		}
		ps, err := newParamState(p, c.KeepStep)
		if err != nil {
			return nil, fmt.Errorf("optim: rownorm: state of %s: %w", p.Name, err)
		}
		st := &rowNormState{paramState: *ps, rows: rows, cols: cols}
		if st.b, err = tensor.NewOf(p.Device(), p.DType(), p.Shape()...); err != nil {
			return nil, fmt.Errorf("optim: rownorm: state of %s: %w", p.Name, err)
		}
		o.state = append(o.state, st)
		o.index[p] = st
	}
	return o, nil
}

// Kind returns "rownorm".
func (o *RowNorm) Kind() string { return "rownorm" }

// Config returns the optimizer's hyper-parameters.
func (o *RowNorm) Config() RowNormConfig { return o.cfg }

// Params returns the parameters in order.
func (o *RowNorm) Params() []*tensor.Tensor {
	ps := make([]*tensor.Tensor, len(o.state))
	for i, st := range o.state {
		ps[i] = st.p
	}
	return ps
}

// Step applies one RowNorm update at learning rate LR*scale.
func (o *RowNorm) Step(scale float64) error {
	lr, err := lrOf("rownorm", o.cfg.LR, scale)
	if err != nil {
		return err
	}
	for _, st := range o.state {
		g, err := gradOf("rownorm", st.p)
		if err != nil {
			return err
		}
		if g == nil || st.p.Len() == 0 {
			continue
		}
		if err := o.step(st, g, lr); err != nil {
			return fmt.Errorf("optim: rownorm: %s: %w", st.p.Name, err)
		}
	}
	return nil
}

func (o *RowNorm) step(st *rowNormState, g *tensor.Tensor, lr float64) error {
	dev := st.p.Device()
	dt := st.p.DType()
	rows, cols := st.rows, st.cols
	beta := o.cfg.Beta
	st.t++
	if err := axpby(dev, st.b.Buffer(), g.Buffer(), 1-beta, beta); err != nil {
		return err
	}
	// RN(B / k) = B / (||B|| + k eps) with k = 1 - beta^t.
	eps := o.cfg.Eps * (1 - math.Pow(beta, float64(st.t)))

	s := st.step
	if s == nil {
		t, err := tensor.NewPooled(dev, dt, st.p.Len())
		if err != nil {
			return err
		}
		defer t.Release()
		s = t
	}
	if o.cfg.Projected {
		mean, err := tensor.NewPooled(dev, dt, cols)
		if err != nil {
			return err
		}
		defer mean.Release()
		// s = P B, then s = -lr RN(s), then s = P s.
		dev.Copy(s.Buffer(), st.b.Buffer())
		if err := center(dev, s.Buffer(), mean.Buffer(), rows, cols); err != nil {
			return err
		}
		if err := rowScale(dev, s.Buffer(), s.Buffer(), rows, cols, -lr, eps); err != nil {
			return err
		}
		if err := center(dev, s.Buffer(), mean.Buffer(), rows, cols); err != nil {
			return err
		}
	} else if err := rowScale(dev, s.Buffer(), st.b.Buffer(), rows, cols, -lr, eps); err != nil {
		return err
	}
	if err := decayBuf(dev, st.p.Buffer(), 1-lr*o.cfg.WeightDecay); err != nil {
		return err
	}
	if err := axpby(dev, st.p.Buffer(), s.Buffer(), 1, 1); err != nil {
		return err
	}
	// The parameter changed in place: a graph that saved it for its
	// backward pass now refuses to run it.
	st.p.MarkModified()
	st.done = true
	return nil
}

// LastStep returns the step last applied to p excluding weight decay, or
// nil (see Optimizer).
func (o *RowNorm) LastStep(p *tensor.Tensor) *tensor.Tensor {
	if st := o.index[p]; st != nil {
		return st.lastStep()
	}
	return nil
}

// State returns the EMA and the step counter of every parameter:
// "rownorm.b.<name>" and "rownorm.t.<name>".
func (o *RowNorm) State() []StateEntry {
	var es []StateEntry
	for _, st := range o.state {
		es = append(es,
			StateEntry{Name: "rownorm.b." + st.p.Name, Tensor: st.b},
			StateEntry{Name: "rownorm.t." + st.p.Name, Counter: &st.t})
	}
	return es
}
