package optim

import (
	"fmt"
	"math"

	"github.com/hilbert-ml/hilbert/device"
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
// kernel (AdamWStepper): m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
// S = -lr_t (m/(1-b1^t)) / (sqrt(v/(1-b2^t)) + eps); p = p (1 - lr_t wd) + S.
// Float32 parameters take the kernel (scalars in float32); float64 ones
// (on the CPU), and float32 ones on a backend without the kernel, take the
// same update through the Core (adamWCore), the hyper-parameters exact in
// the dtype, as torch.optim.AdamW computes it.
type AdamW struct {
	*perParam
	cfg AdamWConfig
}

// NewAdamW returns an AdamW optimizer over params with zeroed moments.
func NewAdamW(c AdamWConfig, params []*tensor.Tensor) (*AdamW, error) {
	return newPerParam(c.validate, adamRule{c}, params,
		func(pp *perParam) *AdamW { return &AdamW{perParam: pp, cfg: c} })
}

// Config returns the optimizer's hyper-parameters.
func (o *AdamW) Config() AdamWConfig { return o.cfg }

// adamRule is AdamW's update; its state is m and v ("adamw.m.<name>",
// "adamw.v.<name>") and the step counter ("adamw.t.<name>").
type adamRule struct{ cfg AdamWConfig }

func (r adamRule) spec() ruleSpec {
	return ruleSpec{kind: "adamw", peak: r.cfg.LR, keepStep: r.cfg.KeepStep, slots: []string{"m", "v"}, counted: true}
}

func (r adamRule) update(u *paramUpdate) error {
	var step device.Buffer
	if u.Step != nil {
		step = u.Step.Buffer()
	}
	c := r.cfg
	s := adamScalars{lr: u.LR, beta1: c.Beta1, beta2: c.Beta2, eps: c.Eps, wd: c.WeightDecay,
		bc1: 1 - math.Pow(c.Beta1, float64(u.T)), bc2: 1 - math.Pow(c.Beta2, float64(u.T))}
	m, v := u.Slots[0], u.Slots[1]
	return adamWStep(u.P.Device(), u.P.Buffer(), u.G.Buffer(), m.Buffer(), v.Buffer(), step, s)
}

// adamScalars are the scalars of one AdamW update: the scheduled learning
// rate, the hyper-parameters and the bias corrections 1 - beta^t.
type adamScalars struct{ lr, beta1, beta2, eps, wd, bc1, bc2 float64 }

// adamWCore is one AdamW update of p through the Core of dev, in the
// buffers' dtype with the scalars exact in it, in torch.optim.AdamW's
// order: p *= 1 - lr wd; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
// S = -(lr/bc1) m / (sqrt(v)/sqrt(bc2) + eps); p += S; step (when not nil)
// receives S. It is AdamWStepper's composition: the float64 update, and
// the float32 one on a backend without the kernel.
func adamWCore(dev device.Core, p, g, m, v, step device.Buffer, s adamScalars) error {
	dt, n := p.DType(), p.Len()
	t, err := dev.Alloc(dt, n)
	if err != nil {
		return fmt.Errorf("optim: adamw: scratch of %d %v: %w", n, dt, err)
	}
	defer dev.Free(t)
	w, err := dev.Alloc(dt, n)
	if err != nil {
		return fmt.Errorf("optim: adamw: scratch of %d %v: %w", n, dt, err)
	}
	defer dev.Free(w)
	dims := device.DimsOf(n)
	if err := decayBuf(dev, p, 1-s.lr*s.wd); err != nil {
		return err
	}
	if err := axpby(dev, m, g, 1-s.beta1, s.beta1); err != nil {
		return err
	}
	dev.BinaryStrided(device.Mul, dims, t, flatView(g), flatView(g))
	if err := axpby(dev, v, t, 1-s.beta2, s.beta2); err != nil {
		return err
	}
	dev.Unary(device.Sqrt, w, v)
	if err := opScalar(dev, device.Div, w, w, math.Sqrt(s.bc2)); err != nil {
		return err
	}
	if err := opScalar(dev, device.Add, w, w, s.eps); err != nil {
		return err
	}
	dev.BinaryStrided(device.Div, dims, t, flatView(m), flatView(w))
	if err := scaleBuf(dev, t, t, -s.lr/s.bc1); err != nil {
		return err
	}
	dev.BinaryStrided(device.Add, dims, p, flatView(p), flatView(t))
	if step != nil {
		dev.Copy(step, t)
	}
	return nil
}
