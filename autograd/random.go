package autograd

import (
	"math"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/tensor"
)

// The random fills draw from the core's counter-based generator
// (device.Core's Random, Philox4x32-10, device/philox.go): element i of the
// result is element offset+i of the stream of seed, so a seed and an
// offset give the same tensor on every backend and in any order of
// evaluation. A caller drawing several tensors from one seed advances
// offset by each one's length. The results are constants (no gradient).
//
// The distributions' parameters are float64, applied in the result's
// dtype: a float32 fill takes them rounded to float32 (the device's
// kernel), a float64 fill exactly (the standard draw, then its affine map
// or comparison in float64).

// Uniform returns a tensor of dtype (float32 or float64) and shape of
// values uniform on [lo, hi).
func (g *Graph) Uniform(dtype device.DType, seed, offset uint64, lo, hi float64, shape ...int) *tensor.Tensor {
	if !(lo <= hi) || math.IsInf(lo, 0) || math.IsInf(hi, 0) {
		return g.failf("Uniform: bounds [%v, %v): want finite lo <= hi", lo, hi)
	}
	return g.random("Uniform", device.Uniform, dtype, seed, offset, lo, hi, shape)
}

// Normal returns a tensor of dtype (float32 or float64) and shape of
// normal values of the given mean and standard deviation.
func (g *Graph) Normal(dtype device.DType, seed, offset uint64, mean, std float64, shape ...int) *tensor.Tensor {
	if !(std >= 0) || math.IsInf(std, 0) || math.IsNaN(mean) || math.IsInf(mean, 0) {
		return g.failf("Normal: mean %v, standard deviation %v: want finite values and std >= 0", mean, std)
	}
	return g.random("Normal", device.Normal, dtype, seed, offset, mean, std, shape)
}

// Bernoulli returns a tensor of dtype (float32 or float64) and shape
// holding 1 with probability p and 0 otherwise (a dropout mask is
// Bernoulli(keep) scaled by 1/keep).
func (g *Graph) Bernoulli(dtype device.DType, seed, offset uint64, p float64, shape ...int) *tensor.Tensor {
	if !(p >= 0 && p <= 1) {
		return g.failf("Bernoulli: probability %v: want a value in [0, 1]", p)
	}
	return g.random("Bernoulli", device.Bernoulli, dtype, seed, offset, p, 0, shape)
}

func (g *Graph) random(name string, dist device.Distribution, dtype device.DType, seed, offset uint64, a, b float64, shape []int) *tensor.Tensor {
	if g.err != nil {
		return nil
	}
	if dtype != device.Float32 && dtype != device.Float64 {
		return g.failf("%s: dtype %v (want float32 or float64)", name, dtype)
	}
	out := g.allocOf(name, dtype, shape...)
	if out == nil || out.Len() == 0 {
		return out
	}
	if dtype == device.Float32 {
		g.dev.Random(dist, out.Buffer(), seed, offset, float32(a), float32(b))
		return out
	}
	// The standard draw (exact in float64: a + (b-a) u with a = 0, b = 1,
	// and mean + std z with 0 and 1), then its parameters in float64.
	ob := out.Buffer()
	dims := device.DimsOf(out.Len())
	flat := device.Contiguous(ob, dims)
	at := func(op device.BinaryOp, v float64) {
		c := g.konst(out.DType(), v)
		g.dev.BinaryStrided(op, dims, ob, flat, device.View{Buf: c.Buffer()})
		c.Release()
	}
	switch dist {
	case device.Uniform:
		g.dev.Random(device.Uniform, ob, seed, offset, 0, 1)
		at(device.Mul, b-a)
		at(device.Add, a)
	case device.Normal:
		g.dev.Random(device.Normal, ob, seed, offset, 0, 1)
		at(device.Mul, b)
		at(device.Add, a)
	case device.Bernoulli: // the uniform word u < p, compared in float64
		g.dev.Random(device.Uniform, ob, seed, offset, 0, 1)
		at(device.Lt, a)
	}
	return out
}
