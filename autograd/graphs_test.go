package autograd

import (
	"math"
	"strings"
	"testing"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/tensor"
)

// TestTensorOfAnotherGraph: an op given a tensor that another graph
// recorded (or this graph before its Reset) is an error naming both
// graphs, instead of a Backward that returns nil with the first graph's
// inputs left without a gradient. A graph with recording off, or the
// tensor marked as a constant, may use it.
func TestTensorOfAnotherGraph(t *testing.T) {
	dev := cpu.New()
	a, _ := tensor.FromFloat32(dev, []float32{0, 1, 2}, 3)
	a.SetRequiresGrad(true)
	ga, gb := New(dev), New(dev)
	y := ga.Exp(a)
	z := gb.Sum(y)
	want := "Sum: input 0 " + y.String() + " was recorded by " + ga.String() + ", not by this one (" + gb.String() + ")"
	if z != nil || gb.Err() == nil || !strings.Contains(gb.Err().Error(), want) {
		t.Fatalf("Sum of another graph's tensor: %v, error %v; want one containing %q", z, gb.Err(), want)
	}
	if err := gb.Backward(z); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Backward after it: %v", err)
	}
	if ga.String() == gb.String() {
		t.Errorf("two graphs are both named %s", ga)
	}
	gc, la := New(dev), ga.Sum(y)
	if err := gc.Backward(la); err == nil || !strings.Contains(err.Error(), "Backward: input 0") || !strings.Contains(err.Error(), ga.String()) {
		t.Errorf("Backward of another graph's loss: %v", err)
	}

	// The same graph after Reset: the record that made y is gone.
	g := New(dev)
	y = g.Exp(a)
	g.Keep(y)
	g.Reset()
	if g.Sum(y); g.Err() == nil || !strings.Contains(g.Err().Error(), "was recorded by this graph ("+g.String()+") before its last Reset") {
		t.Fatalf("a kept tensor of an earlier pass: error %v", g.Err())
	}
	g.Reset()

	// Recording off, or y made a constant: allowed.
	off := New(dev)
	off.SetNoGrad(true)
	if off.Sum(y); off.Err() != nil {
		t.Errorf("no-grad graph: %v", off.Err())
	}
	y.SetRequiresGrad(false)
	loss := g.Sum(g.Mul(y, a))
	if err := g.Backward(loss); err != nil {
		t.Fatal(err)
	}
	got, wantGrad := a.Grad().Float32s(), y.Float32s()
	for i := range got {
		if got[i] != wantGrad[i] {
			t.Fatalf("d/da sum(y a) with y constant = %v, want y = %v", got, wantGrad)
		}
	}
	y.Release()
}

// TestInPlaceWriteVersionCheck: Backward refuses an input written in place
// after an op saved it for its backward pass, and allows the write when
// the op's gradient does not read that input (as PyTorch does), with the
// gradient of the values the op saw.
func TestInPlaceWriteVersionCheck(t *testing.T) {
	dev := cpu.New()
	for _, c := range []struct {
		name  string
		dt    device.DType
		op    func(g *Graph, x, other *tensor.Tensor) *tensor.Tensor
		saved bool
		grad  []float64 // d sum(op) / dx at x = [1 2 3], other = [2 4 8], when not saved
	}{
		{"Add broadcast", device.Float32, func(g *Graph, x, o *tensor.Tensor) *tensor.Tensor {
			return g.Add(g.Reshape(x, 1, 3), g.Reshape(o, 1, 3))
		}, false, []float64{1, 1, 1}},
		{"Add float64", device.Float64, (*Graph).Add, false, []float64{1, 1, 1}},
		{"Sub", device.Float64, (*Graph).Sub, false, []float64{1, 1, 1}},
		{"Div numerator", device.Float32, (*Graph).Div, false, []float64{0.5, 0.25, 0.125}},
		{"Neg", device.Float32, func(g *Graph, x, _ *tensor.Tensor) *tensor.Tensor { return g.Neg(x) }, false, []float64{-1, -1, -1}},
		{"Exp (saves its output)", device.Float64, func(g *Graph, x, _ *tensor.Tensor) *tensor.Tensor { return g.Exp(x) },
			false, []float64{2.718281828459045, 7.38905609893065, 20.085536923187668}},
		{"Mul", device.Float64, (*Graph).Mul, true, nil},
		{"Div denominator", device.Float32, func(g *Graph, x, o *tensor.Tensor) *tensor.Tensor { return g.Div(o, x) }, true, nil},
		{"Log", device.Float32, func(g *Graph, x, _ *tensor.Tensor) *tensor.Tensor { return g.Log(x) }, true, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			mk := func(v []float64) *tensor.Tensor {
				var x *tensor.Tensor
				var err error
				if c.dt == device.Float64 {
					x, err = tensor.FromFloat64(dev, v, len(v))
				} else {
					x, err = tensor.FromFloat32(dev, []float32{float32(v[0]), float32(v[1]), float32(v[2])}, len(v))
				}
				if err != nil {
					t.Fatal(err)
				}
				x.SetRequiresGrad(true)
				return x
			}
			x, other := mk([]float64{1, 2, 3}), mk([]float64{2, 4, 8})
			g := New(dev)
			defer g.Reset()
			loss := g.Sum(c.op(g, x, other))
			if err := g.Err(); err != nil {
				t.Fatal(err)
			}
			if err := x.SetFloat64([]float64{-5, -7, -9}); err != nil {
				t.Fatal(err)
			}
			err := g.Backward(loss)
			if c.saved {
				if err == nil || !strings.Contains(err.Error(), "modified in place") {
					t.Fatalf("Backward after writing a saved input: %v, want the version error", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Backward after writing an input the op did not save: %v", err)
			}
			got := x.Grad().Float64s()
			for i := range got {
				if math.Abs(got[i]-c.grad[i]) > 1e-6*math.Abs(c.grad[i]) {
					t.Fatalf("gradient %v, want %v", got, c.grad)
				}
			}
		})
	}
}
