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
	*perParam
	cfg AdamWConfig
}

// NewAdamW returns an AdamW optimizer over params with zeroed moments.
func NewAdamW(c AdamWConfig, params []*tensor.Tensor) (*AdamW, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	pp, err := newPerParam(adamRule{c}, params)
	if err != nil {
		return nil, err
	}
	return &AdamW{perParam: pp, cfg: c}, nil
}

// Config returns the optimizer's hyper-parameters.
func (o *AdamW) Config() AdamWConfig { return o.cfg }

// adamRule is AdamW's update; its state is m and v ("adamw.m.<name>",
// "adamw.v.<name>") and the step counter ("adamw.t.<name>").
type adamRule struct{ cfg AdamWConfig }

func (r adamRule) kind() string                 { return "adamw" }
func (r adamRule) peak() float64                { return r.cfg.LR }
func (r adamRule) keepStep() bool               { return r.cfg.KeepStep }
func (r adamRule) slots() []string              { return []string{"m", "v"} }
func (r adamRule) counted() bool                { return true }
func (r adamRule) check(p *tensor.Tensor) error { return nil }

func (r adamRule) update(u *paramUpdate) error {
	if u.G.DType() != device.Float32 {
		return r.updateCore(u)
	}
	c := r.cfg
	h := device.AdamW{
		LR:              float32(u.LR),
		Beta1:           float32(c.Beta1),
		Beta2:           float32(c.Beta2),
		Eps:             float32(c.Eps),
		WeightDecay:     float32(c.WeightDecay),
		BiasCorrection1: float32(1 - math.Pow(c.Beta1, float64(u.T))),
		BiasCorrection2: float32(1 - math.Pow(c.Beta2, float64(u.T))),
		// 1 - beta from the config's float64 betas, not the float32 ones.
		ExactBeta1: c.Beta1, ExactBeta2: c.Beta2, ExactWeightDecay: c.WeightDecay,
	}
	var step device.Buffer
	if u.Step != nil {
		step = u.Step.Buffer()
	}
	m, v := u.Slots[0], u.Slots[1]
	compose.AdamWStep(u.P.Device(), u.P.Buffer(), u.G.Buffer(), m.Buffer(), v.Buffer(), step, h)
	return nil
}

// updateCore is the update of one parameter in its dtype through the
// Core, in torch.optim.AdamW's order: p *= 1 - lr wd; m = b1 m + (1-b1) g;
// v = b2 v + (1-b2) g^2; S = -(lr/bc1) m / (sqrt(v)/sqrt(bc2) + eps).
func (r adamRule) updateCore(u *paramUpdate) error {
	p, g, m, v, lr := u.P, u.G, u.Slots[0], u.Slots[1], u.LR
	dev, dt, n := p.Device(), p.DType(), p.Len()
	b1, b2 := r.cfg.Beta1, r.cfg.Beta2
	bc1 := 1 - math.Pow(b1, float64(u.T))
	bc2 := 1 - math.Pow(b2, float64(u.T))
	t, err := tensor.NewPooled(dev, dt, n)
	if err != nil {
		return err
	}
	defer t.Release()
	w, err := tensor.NewPooled(dev, dt, n)
	if err != nil {
		return err
	}
	defer w.Release()
	dims := device.DimsOf(n)
	tb, wb := t.Buffer(), w.Buffer()
	if err := decayBuf(dev, p.Buffer(), 1-lr*r.cfg.WeightDecay); err != nil {
		return err
	}
	if err := axpby(dev, m.Buffer(), g.Buffer(), 1-b1, b1); err != nil {
		return err
	}
	dev.BinaryStrided(device.Mul, dims, tb, flatView(g.Buffer()), flatView(g.Buffer()))
	if err := axpby(dev, v.Buffer(), tb, 1-b2, b2); err != nil {
		return err
	}
	dev.Unary(device.Sqrt, wb, v.Buffer())
	if err := opScalar(dev, device.Div, wb, wb, math.Sqrt(bc2)); err != nil {
		return err
	}
	if err := opScalar(dev, device.Add, wb, wb, r.cfg.Eps); err != nil {
		return err
	}
	dev.BinaryStrided(device.Div, dims, tb, flatView(m.Buffer()), flatView(wb))
	if err := scaleBuf(dev, tb, tb, -lr/bc1); err != nil {
		return err
	}
	dev.BinaryStrided(device.Add, dims, p.Buffer(), flatView(p.Buffer()), flatView(tb))
	if u.Step != nil {
		dev.Copy(u.Step.Buffer(), tb)
	}
	return nil
}
