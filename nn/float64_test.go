package nn

import (
	"math"
	"testing"

	"github.com/hilbert-ml/hilbert/autograd"
	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/tensor"
)

func input64(t *testing.T, seed uint64, std float64, shape ...int) *tensor.Tensor {
	t.Helper()
	in := NewInit(cpu.New(), seed, std)
	in.DType = device.Float64
	x := in.Normal(shape...)
	if x == nil {
		t.Fatal(in.Err())
	}
	return x
}

func near64(t *testing.T, what string, got, want []float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range got {
		if d := math.Abs(got[i] - want[i]); !(d <= tol*max(1, math.Abs(want[i]))) {
			t.Fatalf("%s[%d] = %.17g, want %.17g (diff %.3g, tolerance %g)", what, i, got[i], want[i], d, tol)
		}
	}
}

// TestNormsFloat64Eps: LayerNorm's and RMSNorm's Eps reach a float64
// graph unrounded. Inputs of small variance make eps matter: as float32
// constants (float32(1e-5) is 2.5e-13 off) the outputs were 1e-9 off the
// float64 reference.
func TestNormsFloat64Eps(t *testing.T) {
	x := input64(t, 3, 3e-3, 4, 6)
	v := x.Float64s()
	rows := func(f func(row []float64, out []float64)) []float64 {
		out := make([]float64, len(v))
		for r := range 4 {
			f(v[r*6:r*6+6], out[r*6:r*6+6])
		}
		return out
	}
	lnWant := rows(func(row, out []float64) {
		var mean, vr float64
		for _, e := range row {
			mean += e / 6
		}
		for _, e := range row {
			vr += (e - mean) * (e - mean) / 6
		}
		for i, e := range row {
			out[i] = (e - mean) / math.Sqrt(vr+1e-5)
		}
	})
	rmsWant := rows(func(row, out []float64) {
		var ms float64
		for _, e := range row {
			ms += e * e / 6
		}
		for i, e := range row {
			out[i] = e / math.Sqrt(ms+1e-6)
		}
	})
	g := autograd.New(cpu.New())
	defer g.Reset()
	ln := LayerNorm{Eps: 1e-5}
	rms := RMSNorm{} // DefaultEps
	a, b := ln.Forward(g, x), rms.Forward(g, x)
	if err := g.Err(); err != nil {
		t.Fatal(err)
	}
	near64(t, "LayerNorm", a.Float64s(), lnWant, 1e-13)
	near64(t, "RMSNorm", b.Float64s(), rmsWant, 1e-13)
}

// TestSelfAttentionFloat64: a float64 SelfAttention with float64 RoPE
// tables and heads of 6 (a scale 1/sqrt(6) that is no float32 number)
// gives the same output through the fused causal op as through the
// composition with an explicit float64 causal mask, to 1e-14: both apply
// the scale in float64 (the fused op took it as float32, 1e-9 off). A
// float64 padding mask gives the unpadded sequence's outputs.
func TestSelfAttentionFloat64(t *testing.T) {
	dev := cpu.New()
	rope, err := NewRoPE(dev, device.Float64, 8, 6, 10000)
	if err != nil {
		t.Fatal(err)
	}
	in := NewInit(dev, 5, 0.5)
	in.DType = device.Float64
	a := NewSelfAttention(in, 12, AttentionOptions{Heads: 2, Causal: true, Bias: true, RoPE: rope})
	if in.Err() != nil {
		t.Fatal(in.Err())
	}
	x := input64(t, 6, 1, 2, 5, 12)
	g := autograd.New(dev)
	g.SetNoGrad(true)
	defer g.Reset()
	fused := a.Forward(g, x).Float64s()
	zero, err := tensor.FromFloat64(dev, make([]float64, 25), 5, 5)
	if err != nil {
		t.Fatal(err)
	}
	composed := a.ForwardMasked(g, x, zero) // Causal adds the causal mask
	if err := g.Err(); err != nil {
		t.Fatal(err)
	}
	near64(t, "fused vs composed", fused, composed.Float64s(), 1e-14)

	pad, err := PaddingMask(dev, device.Float64, []int{3, 5}, 5)
	if err != nil {
		t.Fatal(err)
	}
	a.Causal = false
	padded := a.ForwardMasked(g, x, pad).Float64s()
	alone := a.Forward(g, g.Slice(g.Slice(x, 0, 0, 1), 1, 0, 3))
	if err := g.Err(); err != nil {
		t.Fatal(err)
	}
	near64(t, "padded sequence", padded[:3*12], alone.Float64s(), 1e-14)
}
