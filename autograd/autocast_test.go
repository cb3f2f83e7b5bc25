package autograd

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/tensor"
)

func roundBF16(x []float32) []float32 {
	y := make([]float32, len(x))
	for i, v := range x {
		y[i] = device.Float32FromBFloat16(device.BFloat16FromFloat32(v))
	}
	return y
}

// TestAutocastMatMul checks that a MatMul under bfloat16 autocast is, in
// the forward and the backward pass, the float32 MatMul of the
// bfloat16-rounded operands (and incoming gradient), for every transpose
// combination and the folded and batched shapes: exactly where the CPU
// widens bfloat16 operands to float32, and within float32 summation error
// on its bfloat16 kernel (cpu.BFloat16Kernel), which sums in its own order.
// An operand or gradient left unrounded would be off by about 2^-9 of the
// terms, far beyond that.
func TestAutocastMatMul(t *testing.T) {
	dev := cpu.New()
	rng := rand.New(rand.NewPCG(11, 12))
	randData := func(n int) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		return x
	}
	cases := []struct {
		name           string
		aShape, bShape []int
		tA, tB         bool
	}{
		{"nn", []int{5, 7}, []int{7, 3}, false, false},
		{"nt linear folded", []int{2, 4, 7}, []int{3, 7}, false, true},
		{"tn", []int{7, 5}, []int{7, 3}, true, false},
		{"batched tt", []int{2, 7, 5}, []int{2, 3, 7}, true, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			aData, bData := randData(tensor.Shape(c.aShape).Numel()), randData(tensor.Shape(c.bShape).Numel())
			run := func(autocast bool) (out, da, db []float32) {
				ad, bd := aData, bData
				if !autocast {
					ad, bd = roundBF16(aData), roundBF16(bData)
				}
				a, _ := tensor.FromFloat32(dev, ad, c.aShape...)
				b, _ := tensor.FromFloat32(dev, bd, c.bShape...)
				a.SetRequiresGrad(true)
				b.SetRequiresGrad(true)
				g := New(dev)
				if autocast {
					g.SetAutocast(device.BFloat16)
				}
				y := g.MatMul(a, b, c.tA, c.tB)
				if err := g.Err(); err != nil {
					t.Fatal(err)
				}
				r := make([]float32, y.Len())
				for i := range r {
					r[i] = float32(math.Sin(float64(i)) * 1.37) // not bf16-exact
				}
				if !autocast {
					r = roundBF16(r) // what autocast does to the incoming gradient
				}
				R, _ := tensor.FromFloat32(dev, r, y.Shape()...)
				out = y.Float32s()
				// The upstream gradient of Sum(y*R) is R: it reaches MatMul as is.
				if err := g.Backward(g.Sum(g.Mul(y, R))); err != nil {
					t.Fatal(err)
				}
				return out, a.Grad().Float32s(), b.Grad().Float32s()
			}
			o1, da1, db1 := run(true)
			o2, da2, db2 := run(false)
			// The products here sum at most 8 terms of magnitude below 4 x 4
			// (normal operands; R below 1.37): float32's error bound on such
			// a sum, (n+2) 2^-24 sum |terms|, is below 1e-4.
			tol := 1e-4
			if cpu.BFloat16Kernel() == "float32" {
				tol = 0
			}
			for name, p := range map[string][2][]float32{"out": {o1, o2}, "dA": {da1, da2}, "dB": {db1, db2}} {
				for i := range p[0] {
					if d := math.Abs(float64(p[0][i] - p[1][i])); d > tol || math.IsNaN(d) {
						t.Fatalf("%s[%d] = %v under autocast, %v from rounded operands (bfloat16 GEMM %s)", name, i, p[0][i], p[1][i], cpu.BFloat16Kernel())
					}
				}
			}
		})
	}
}

// TestAutocastTrainingStep checks that a whole block's loss and gradients
// under bfloat16 autocast stay within bfloat16 accuracy of float32.
func TestAutocastTrainingStep(t *testing.T) {
	lossAndGrads := func(autocast bool) (float32, [][]float32) {
		m := newTinyBlock(t, 2, 16, 64, 97)
		g := New(cpu.New())
		if autocast {
			g.SetAutocast(device.BFloat16)
		}
		loss := m.loss(g)
		if err := g.Backward(loss); err != nil {
			t.Fatal(err)
		}
		var grads [][]float32
		for _, p := range m.params() {
			grads = append(grads, p.Grad().Float32s())
		}
		return loss.Item(), grads
	}
	l32, g32 := lossAndGrads(false)
	l16, g16 := lossAndGrads(true)
	// bfloat16 keeps 8 significant bits (relative rounding 2^-9 ~ 2e-3);
	// a few products in a row give errors of about 1e-2 of the scale.
	if math.Abs(float64(l16-l32)) > 1e-2*math.Abs(float64(l32)) {
		t.Errorf("loss %v under autocast, %v in float32", l16, l32)
	}
	for i := range g32 {
		var diff, scale float64
		for j := range g32[i] {
			diff = math.Max(diff, math.Abs(float64(g16[i][j]-g32[i][j])))
			scale = math.Max(scale, math.Abs(float64(g32[i][j])))
		}
		if diff > 5e-2*scale {
			t.Errorf("parameter %d: gradients differ by %.3g (largest %.3g)", i, diff, scale)
		}
	}
}

// castCounter counts the Casts of the device it wraps.
type castCounter struct {
	device.Device
	casts int
}

func (c *castCounter) Cast(dst, src device.Buffer) {
	c.casts++
	c.Device.Cast(dst, src)
}

// TestAutocastCastsOnce checks that under autocast a tensor multiplied
// several times in a pass (a normalized input shared by q, k and v) is cast
// once, that one changed in place is cast again, and that the products see
// the right values either way.
func TestAutocastCastsOnce(t *testing.T) {
	dev := &castCounter{Device: cpu.New()}
	g := New(dev)
	g.SetAutocast(device.BFloat16)
	x, _ := tensor.FromFloat32(dev, []float32{1, 2, 3, 4, 5, 6}, 2, 3)
	w := make([]*tensor.Tensor, 3)
	for i := range w {
		w[i], _ = tensor.FromFloat32(dev, []float32{1, 0, float32(i), 0, 1, 1}, 2, 3)
	}
	for i := range w {
		g.MatMul(x, w[i], false, true) // x cast once, each w once
	}
	if err := g.Err(); err != nil {
		t.Fatal(err)
	}
	if dev.casts != 4 {
		t.Fatalf("three products of one x: %d casts, want 4 (x once, each weight once)", dev.casts)
	}
	dev.CopyFromHost(x.Buffer(), []float32{7, 2, 3, 4, 5, 6}) // an in-place change the graph must notice
	x.MarkModified()
	y := g.MatMul(x, w[0], false, true)
	if dev.casts != 5 {
		t.Fatalf("after x changed: %d casts in all, want 5 (x again)", dev.casts)
	}
	if got := y.Float32s()[0]; got != 7 {
		t.Fatalf("y[0] = %v after x[0] became 7, want 7", got)
	}
	g.Reset()
	g.MatMul(x, w[0], false, true)
	if dev.casts != 7 {
		t.Fatalf("after Reset: %d casts in all, want 7 (a new pass casts anew)", dev.casts)
	}
}
