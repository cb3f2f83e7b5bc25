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
	*perParam
	cfg RowNormConfig
}

// NewRowNorm returns a RowNorm optimizer over params (rank >= 2, rows the
// leading dimension) with a zeroed EMA.
func NewRowNorm(c RowNormConfig, params []*tensor.Tensor) (*RowNorm, error) {
	return newPerParam(c.validate, rowNormRule{c}, params,
		func(pp *perParam) *RowNorm { return &RowNorm{perParam: pp, cfg: c} })
}

// Config returns the optimizer's hyper-parameters.
func (o *RowNorm) Config() RowNormConfig { return o.cfg }

// rowNormRule is RowNorm's update; its state is the EMA
// ("rownorm.b.<name>") and the step counter ("rownorm.t.<name>").
type rowNormRule struct{ cfg RowNormConfig }

func (r rowNormRule) spec() ruleSpec {
	return ruleSpec{kind: "rownorm", peak: r.cfg.LR, keepStep: r.cfg.KeepStep, slots: []string{"b"}, counted: true, matrix: true}
}

func (r rowNormRule) update(u *paramUpdate) error {
	dev, dt := u.P.Device(), u.P.DType()
	rows, cols, b := u.Rows, u.Cols, u.Slots[0]
	beta, lr := r.cfg.Beta, u.LR
	if err := axpby(dev, b.Buffer(), u.G.Buffer(), 1-beta, beta); err != nil {
		return err
	}
	// RN(B / k) = B / (||B|| + k eps) with k = 1 - beta^t.
	eps := r.cfg.Eps * (1 - math.Pow(beta, float64(u.T)))

	s := u.Step
	if s == nil {
		t, err := tensor.NewPooled(dev, dt, u.P.Len())
		if err != nil {
			return err
		}
		defer t.Release()
		s = t
	}
	if r.cfg.Projected {
		mean, err := tensor.NewPooled(dev, dt, cols)
		if err != nil {
			return err
		}
		defer mean.Release()
		// s = P B, then s = -lr RN(s), then s = P s.
		dev.Copy(s.Buffer(), b.Buffer())
		if err := center(dev, s.Buffer(), mean.Buffer(), rows, cols); err != nil {
			return err
		}
		if err := rowScale(dev, s.Buffer(), s.Buffer(), rows, cols, -lr, eps); err != nil {
			return err
		}
		if err := center(dev, s.Buffer(), mean.Buffer(), rows, cols); err != nil {
			return err
		}
	} else if err := rowScale(dev, s.Buffer(), b.Buffer(), rows, cols, -lr, eps); err != nil {
		return err
	}
	if err := decayBuf(dev, u.P.Buffer(), 1-lr*r.cfg.WeightDecay); err != nil {
		return err
	}
	return axpby(dev, u.P.Buffer(), s.Buffer(), 1, 1)
}
