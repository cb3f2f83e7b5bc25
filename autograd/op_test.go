package autograd

import (
	"testing"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/tensor"
)

// TestRecordingAllocatesNothing checks that recording a node allocates
// nothing on the Go heap once the graph's slices have grown: each op costs
// the same allocations (its output tensor) with recording on as off, for
// ops of every kind of value (a unary and a binary op, zero-size op
// values, the fused ones).
func TestRecordingAllocatesNothing(t *testing.T) {
	dev := cpu.New()
	param := func(shape ...int) *tensor.Tensor {
		p, err := tensor.NewOf(dev, device.Float32, shape...)
		if err != nil {
			t.Fatal(err)
		}
		p.SetRequiresGrad(true)
		return p
	}
	x, w := param(2, 4, 2, 8), param(16, 16)
	cos, sin, err := RoPETables(dev, device.Float32, 4, 8, 10000)
	if err != nil {
		t.Fatal(err)
	}
	ops := []struct {
		name string
		f    func(g *Graph) *tensor.Tensor
	}{
		{"Unary", func(g *Graph) *tensor.Tensor { return g.Unary(device.Tanh, x) }},
		{"Add", func(g *Graph) *tensor.Tensor { return g.Add(x, x) }},
		{"Scale", func(g *Graph) *tensor.Tensor { return g.Scale(x, 2) }},
		{"MatMul", func(g *Graph) *tensor.Tensor { return g.MatMul(w, w, false, true) }},
		{"RMSNorm", func(g *Graph) *tensor.Tensor { return g.RMSNorm(x, nil, 1e-6) }},
		{"RoPE", func(g *Graph) *tensor.Tensor { return g.RoPE(x, cos, sin) }},
		{"Attention", func(g *Graph) *tensor.Tensor { return g.Attention(x, x, x, 0.3) }},
	}
	g := New(dev)
	for _, op := range ops {
		allocs := func(noGrad bool) float64 {
			g.SetNoGrad(noGrad)
			return testing.AllocsPerRun(20, func() {
				g.Reset()
				for range 4 {
					op.f(g)
				}
			})
		}
		if on, off := allocs(false), allocs(true); on != off || g.Err() != nil {
			t.Errorf("%s: %v allocations per 4 recorded ops, %v unrecorded (err %v)", op.name, on, off, g.Err())
		}
	}
}

// TestUnaryBuildsNoName checks that Unary takes its name (for errors) from
// a table rather than building it per call: for each op it costs the
// allocations of Scale, whose name is a constant (its output tensor alone).
func TestUnaryBuildsNoName(t *testing.T) {
	dev := cpu.New()
	x, err := tensor.NewOf(dev, device.Float32, 2, 8)
	if err != nil {
		t.Fatal(err)
	}
	g := New(dev)
	g.SetNoGrad(true)
	allocs := func(f func()) float64 {
		return testing.AllocsPerRun(20, func() {
			g.Reset()
			for range 4 {
				f()
			}
		})
	}
	scale := allocs(func() { g.Scale(x, 2) })
	for _, op := range device.UnaryOps() {
		if got := allocs(func() { g.Unary(op, x) }); got != scale || g.Err() != nil {
			t.Errorf("Unary(%v): %v allocations per 4 calls, Scale %v (err %v)", op, got, scale, g.Err())
		}
	}
}

// TestBackwardReleasesRuleTensors checks that the tensors a backward rule
// written in Graph ops makes are released once its node has run, but for
// the gradient it hands on: a chain of 20 Tanh (4 tensors each in its
// rule) holds no more tensors when its first op's backward runs than the
// forward pass made.
func TestBackwardReleasesRuleTensors(t *testing.T) {
	x, err := tensor.FromFloat32(cpu.New(), []float32{0.1, -0.2, 0.3}, 3)
	if err != nil {
		t.Fatal(err)
	}
	x.SetRequiresGrad(true)
	held := -1
	probe := &Function{Name: "probe",
		Forward: func(g *Graph, in []*tensor.Tensor) *tensor.Tensor { return g.Neg(in[0]) },
		Backward: func(g *Graph, gout *tensor.Tensor, in []*tensor.Tensor, out *tensor.Tensor) []*tensor.Tensor {
			held = len(g.owned)
			return []*tensor.Tensor{g.Neg(gout)}
		}}
	g := New(cpu.New())
	y := g.Apply(probe, x)
	for range 20 {
		y = g.Tanh(y)
	}
	loss := g.Sum(y)
	forward := len(g.owned)
	if err := g.Backward(loss); err != nil {
		t.Fatal(err)
	}
	if held != forward {
		t.Errorf("the graph held %d tensors when the first op's backward ran, the forward pass made %d", held, forward)
	}
}
