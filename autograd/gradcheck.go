package autograd

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/tensor"
)

// GradCheckOptions tunes GradCheck; zero fields take the defaults.
type GradCheckOptions struct {
	// Step is the finite-difference step h (default 1e-6).
	Step float64
	// RTol and ATol bound |analytic - numeric| <= ATol + RTol*max(|analytic|, |numeric|)
	// (defaults 1e-6 and 1e-8).
	RTol, ATol float64
	// MaxElements is how many elements of each input are perturbed, a
	// random sample when the input is larger (default 64).
	MaxElements int
	// Seed seeds the projection and the sample (default 1).
	Seed uint64
}

// GradCheck compares the gradients Backward computes for f with central
// finite differences, in float64. The inputs are float64 tensors on dev
// (a backend with float64, the CPU); those that require grad are checked.
// The scalar differentiated is L = sum(f(inputs) * R) for a fixed random
// R, so every output element contributes. f is run once with gradients
// and twice per perturbed element without; it must be deterministic. The
// inputs' gradients are replaced; an input Backward gives no gradient
// counts as a zero gradient. It returns nil, or an error listing the
// elements whose gradients disagree.
func GradCheck(dev device.Device, f func(g *Graph, inputs []*tensor.Tensor) *tensor.Tensor, inputs []*tensor.Tensor, opt GradCheckOptions) error {
	opt = opt.withDefaults()
	for i, x := range inputs {
		if x.DType() != device.Float64 {
			return fmt.Errorf("autograd: GradCheck: input %d is %v, want float64", i, x.DType())
		}
		x.SetGrad(nil)
	}
	c := &gradChecker{f: f, inputs: inputs, opt: opt, rng: rand.New(rand.NewPCG(opt.Seed, 0x5eed)), g: New(dev)}
	defer c.g.Reset()
	if err := c.backward(dev); err != nil {
		return err
	}
	var errs []error
	for i, x := range inputs {
		if !x.RequiresGrad() {
			continue
		}
		var err error
		if errs, err = c.check(i, x, errs); err != nil {
			return err
		}
		if len(errs) >= 8 {
			break
		}
	}
	if errs != nil {
		return fmt.Errorf("autograd: GradCheck: %w", errors.Join(errs...))
	}
	return nil
}

// withDefaults fills in the options left zero.
func (o GradCheckOptions) withDefaults() GradCheckOptions {
	o.Step = cmp.Or(o.Step, 1e-6)
	o.RTol = cmp.Or(o.RTol, 1e-6)
	o.ATol = cmp.Or(o.ATol, 1e-8)
	o.MaxElements = cmp.Or(o.MaxElements, 64)
	o.Seed = cmp.Or(o.Seed, 1)
	return o
}

// gradChecker is one GradCheck: f, its inputs and the projection R.
type gradChecker struct {
	f      func(g *Graph, inputs []*tensor.Tensor) *tensor.Tensor
	inputs []*tensor.Tensor
	opt    GradCheckOptions
	rng    *rand.Rand
	g      *Graph
	r      []float64 // L = sum(f(inputs) * r)
}

// backward runs f with gradients, draws R and backpropagates L.
func (c *gradChecker) backward(dev device.Device) error {
	out := c.f(c.g, c.inputs)
	if err := c.g.Err(); err != nil {
		return fmt.Errorf("autograd: GradCheck: forward: %w", err)
	}
	if out == nil || out.DType() != device.Float64 {
		return errors.New("autograd: GradCheck: f returned no float64 tensor")
	}
	c.r = make([]float64, out.Len())
	for j := range c.r {
		c.r[j] = c.rng.NormFloat64()
	}
	rt, err := tensor.FromFloat64(dev, c.r, out.Shape()...)
	if err != nil {
		return err
	}
	if err := c.g.Backward(c.g.Sum(c.g.Mul(out, rt))); err != nil {
		return fmt.Errorf("autograd: GradCheck: backward: %w", err)
	}
	return nil
}

// eval computes L without gradients.
func (c *gradChecker) eval() (float64, error) {
	c.g.Reset()
	c.g.SetNoGrad(true)
	defer c.g.SetNoGrad(false)
	o := c.f(c.g, c.inputs)
	if err := c.g.Err(); err != nil {
		return 0, err
	}
	v := o.Float64s()
	var s float64
	for j := range v {
		s += v[j] * c.r[j]
	}
	return s, nil
}

// check compares input i's gradient with central differences at a sample
// of its elements, appending disagreements to errs (it stops at 8); the
// error is a failure to evaluate.
func (c *gradChecker) check(i int, x *tensor.Tensor, errs []error) ([]error, error) {
	host := x.Float64s()
	analytic := make([]float64, len(host)) // no gradient: zero
	if x.Grad() != nil {
		analytic = x.Grad().Float64s()
	}
	idx := c.rng.Perm(len(host))
	if len(idx) > c.opt.MaxElements {
		idx = idx[:c.opt.MaxElements]
	}
	at := func(j int, v float64) (float64, error) {
		host[j] = v
		if err := x.SetFloat64(host); err != nil {
			return 0, fmt.Errorf("autograd: GradCheck: input %d: %w", i, err)
		}
		return c.eval()
	}
	for _, j := range idx {
		orig := host[j]
		plus, err := at(j, orig+c.opt.Step)
		if err != nil {
			return errs, err
		}
		minus, err := at(j, orig-c.opt.Step)
		if err != nil {
			return errs, err
		}
		host[j] = orig
		if err := x.SetFloat64(host); err != nil {
			return errs, fmt.Errorf("autograd: GradCheck: input %d: %w", i, err)
		}
		num := (plus - minus) / (2 * c.opt.Step)
		got := analytic[j]
		if !(math.Abs(got-num) <= c.opt.ATol+c.opt.RTol*math.Max(math.Abs(got), math.Abs(num))) {
			errs = append(errs, fmt.Errorf("input %d %v element %d: analytic %.10g, finite difference %.10g", i, x.Shape(), j, got, num))
			if len(errs) >= 8 {
				return errs, nil
			}
		}
	}
	return errs, nil
}
