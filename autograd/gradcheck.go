package autograd

import (
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
	if opt.Step == 0 {
		opt.Step = 1e-6
	}
	if opt.RTol == 0 {
		opt.RTol = 1e-6
	}
	if opt.ATol == 0 {
		opt.ATol = 1e-8
	}
	if opt.MaxElements == 0 {
		opt.MaxElements = 64
	}
	if opt.Seed == 0 {
		opt.Seed = 1
	}
	for i, x := range inputs {
		if x.DType() != device.Float64 {
			return fmt.Errorf("autograd: GradCheck: input %d is %v, want float64", i, x.DType())
		}
		x.SetGrad(nil)
	}
	rng := rand.New(rand.NewPCG(opt.Seed, 0x5eed))
	g := New(dev)
	defer g.Reset()
	out := f(g, inputs)
	if err := g.Err(); err != nil {
		return fmt.Errorf("autograd: GradCheck: forward: %w", err)
	}
	if out == nil || out.DType() != device.Float64 {
		return errors.New("autograd: GradCheck: f returned no float64 tensor")
	}
	r := make([]float64, out.Len())
	for j := range r {
		r[j] = rng.NormFloat64()
	}
	rt, err := tensor.FromFloat64(dev, r, out.Shape()...)
	if err != nil {
		return err
	}
	if err := g.Backward(g.Sum(g.Mul(out, rt))); err != nil {
		return fmt.Errorf("autograd: GradCheck: backward: %w", err)
	}
	eval := func() (float64, error) {
		g.Reset()
		g.SetNoGrad(true)
		defer g.SetNoGrad(false)
		o := f(g, inputs)
		if err := g.Err(); err != nil {
			return 0, err
		}
		v := o.Float64s()
		var s float64
		for j := range v {
			s += v[j] * r[j]
		}
		return s, nil
	}
	var errs []error
	for i, x := range inputs {
		if !x.RequiresGrad() {
			continue
		}
		host := x.Float64s()
		analytic := make([]float64, len(host)) // no gradient: zero
		if x.Grad() != nil {
			analytic = x.Grad().Float64s()
		}
		idx := rng.Perm(len(host))
		if len(idx) > opt.MaxElements {
			idx = idx[:opt.MaxElements]
		}
		for _, j := range idx {
			orig := host[j]
			at := func(v float64) (float64, error) {
				host[j] = v
				if err := x.SetFloat64(host); err != nil {
					return 0, fmt.Errorf("autograd: GradCheck: input %d: %w", i, err)
				}
				return eval()
			}
			plus, err := at(orig + opt.Step)
			if err != nil {
				return err
			}
			minus, err := at(orig - opt.Step)
			if err != nil {
				return err
			}
			host[j] = orig
			if err := x.SetFloat64(host); err != nil {
				return fmt.Errorf("autograd: GradCheck: input %d: %w", i, err)
			}
			num := (plus - minus) / (2 * opt.Step)
			got := analytic[j]
			if !(math.Abs(got-num) <= opt.ATol+opt.RTol*math.Max(math.Abs(got), math.Abs(num))) {
				errs = append(errs, fmt.Errorf("input %d %v element %d: analytic %.10g, finite difference %.10g", i, x.Shape(), j, got, num))
				if len(errs) >= 8 {
					return fmt.Errorf("autograd: GradCheck: %w", errors.Join(errs...))
				}
			}
		}
	}
	if errs != nil {
		return fmt.Errorf("autograd: GradCheck: %w", errors.Join(errs...))
	}
	return nil
}
