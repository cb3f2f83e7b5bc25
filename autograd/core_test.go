package autograd

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/tensor"
)

// float64 inputs for gradient checks: normal values of scale s, moved
// away from 0 by at least away (for ops with a kink or pole at 0) and
// shifted by shift.
func input64(t *testing.T, seed uint64, shape []int, s, away, shift float64) *tensor.Tensor {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 7))
	v := make([]float64, tensor.Shape(shape).Numel())
	for i := range v {
		x := s * rng.NormFloat64()
		if math.Abs(x) < away {
			x = math.Copysign(away+math.Abs(x), x)
		}
		v[i] = x + shift
	}
	x, err := tensor.FromFloat64(cpu.New(), v, shape...)
	if err != nil {
		t.Fatal(err)
	}
	x.SetRequiresGrad(true)
	return x
}

type check64 struct {
	name   string
	inputs func(t *testing.T) []*tensor.Tensor
	f      func(g *Graph, in []*tensor.Tensor) *tensor.Tensor
}

func runChecks64(t *testing.T, cases []check64) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := GradCheck(cpu.New(), c.f, c.inputs(t), GradCheckOptions{}); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestGradCheckUnary checks every UnaryOp's gradient in float64 on its
// domain.
func TestGradCheckUnary(t *testing.T) {
	var cases []check64
	for _, op := range device.UnaryOps() {
		if op == device.Sign {
			continue // zero gradient: checked below
		}
		away, shift := 0.05, 0.0
		switch op {
		case device.Log, device.Sqrt, device.Rsqrt:
			away, shift = 0, 3 // positive inputs
		case device.Log1p:
			away, shift = 0, 2
		}
		cases = append(cases, check64{op.String(), func(t *testing.T) []*tensor.Tensor {
			return []*tensor.Tensor{input64(t, uint64(op), []int{3, 5}, 0.7, away, shift)}
		}, func(g *Graph, in []*tensor.Tensor) *tensor.Tensor { return g.Unary(op, in[0]) }})
	}
	runChecks64(t, cases)
	// Sign: zero gradient.
	x := input64(t, 9, []int{4}, 1, 0.1, 0)
	g := New(cpu.New())
	if err := g.Backward(g.Sum(g.Unary(device.Sign, x))); err != nil {
		t.Fatal(err)
	}
	for _, v := range x.Grad().Float64s() {
		if v != 0 {
			t.Fatalf("sign gradient %v", x.Grad().Float64s())
		}
	}
}

// TestGradCheckBroadcast checks the broadcasting binary ops: each
// operand's gradient summed back to its shape.
func TestGradCheckBroadcast(t *testing.T) {
	shapes := [][2][]int{{{3, 4}, {4}}, {{3, 1}, {1, 4}}, {{2, 3, 4}, {3, 1}}, {{5}, nil}, {nil, {2, 3}}, {{2, 3}, {2, 3}}}
	ops := map[string]func(g *Graph, a, b *tensor.Tensor) *tensor.Tensor{
		"add": (*Graph).Add, "sub": (*Graph).Sub, "mul": (*Graph).Mul, "div": (*Graph).Div,
		"maximum": (*Graph).Maximum, "minimum": (*Graph).Minimum, "pow": (*Graph).Pow,
	}
	var cases []check64
	for name, op := range ops {
		for si, s := range shapes {
			cases = append(cases, check64{fmt.Sprintf("%s %v %v", name, s[0], s[1]), func(t *testing.T) []*tensor.Tensor {
				a := input64(t, uint64(10+si), s[0], 1, 0.1, 0)
				b := input64(t, uint64(20+si), s[1], 1, 0.1, 0)
				if name == "pow" || name == "div" {
					a = input64(t, uint64(10+si), s[0], 0.3, 0, 1.5) // positive base
					b = input64(t, uint64(20+si), s[1], 0.5, 0, 1.2)
				}
				return []*tensor.Tensor{a, b}
			}, func(g *Graph, in []*tensor.Tensor) *tensor.Tensor { return op(g, in[0], in[1]) }})
		}
	}
	cases = append(cases,
		check64{"where broadcast", func(t *testing.T) []*tensor.Tensor {
			return []*tensor.Tensor{input64(t, 31, []int{3, 4}, 1, 0, 0), input64(t, 32, []int{4}, 1, 0, 0), input64(t, 33, []int{3, 1}, 1, 0, 0)}
		}, func(g *Graph, in []*tensor.Tensor) *tensor.Tensor {
			return g.Where(g.Compare(device.Gt, in[0], in[2]), in[1], in[2])
		}},
		check64{"scale sum mean transpose", func(t *testing.T) []*tensor.Tensor {
			return []*tensor.Tensor{input64(t, 34, []int{2, 3, 4}, 1, 0, 0)}
		}, func(g *Graph, in []*tensor.Tensor) *tensor.Tensor {
			y := g.Transpose(g.Scale(in[0], 1.5))
			return g.Add(g.Mul(y, y), g.Add(g.Sum(in[0]), g.Mean(g.Mul(in[0], in[0]))))
		}},
	)
	runChecks64(t, cases)
}

// TestGradCheckReductions checks the axis reductions and the ops composed
// from them.
func TestGradCheckReductions(t *testing.T) {
	var cases []check64
	x := func(seed uint64) func(t *testing.T) []*tensor.Tensor {
		return func(t *testing.T) []*tensor.Tensor {
			return []*tensor.Tensor{input64(t, seed, []int{2, 3, 4}, 1, 0, 0)}
		}
	}
	for _, axis := range []int{0, 1, 2, -1} {
		for _, keep := range []bool{false, true} {
			for name, f := range map[string]func(*Graph, *tensor.Tensor, int, bool) *tensor.Tensor{
				"sum": (*Graph).SumAxis, "mean": (*Graph).MeanAxis, "max": (*Graph).MaxAxis, "min": (*Graph).MinAxis,
				"logsumexp": (*Graph).LogSumExp, "variance": (*Graph).VarianceAxis,
			} {
				cases = append(cases, check64{fmt.Sprintf("%s axis %d keep %v", name, axis, keep), x(uint64(40 + axis)),
					func(g *Graph, in []*tensor.Tensor) *tensor.Tensor { return f(g, in[0], axis, keep) }})
			}
		}
		cases = append(cases,
			check64{fmt.Sprintf("softmax axis %d", axis), x(50), func(g *Graph, in []*tensor.Tensor) *tensor.Tensor { return g.Softmax(in[0], axis) }},
			check64{fmt.Sprintf("logsoftmax axis %d", axis), x(51), func(g *Graph, in []*tensor.Tensor) *tensor.Tensor { return g.LogSoftmax(in[0], axis) }})
	}
	cases = append(cases,
		check64{"gelu", x(52), func(g *Graph, in []*tensor.Tensor) *tensor.Tensor { return g.GELU(in[0]) }},
		check64{"layernorm composed", func(t *testing.T) []*tensor.Tensor {
			return []*tensor.Tensor{input64(t, 53, []int{3, 6}, 1, 0, 0), input64(t, 54, []int{6}, 1, 0, 1), input64(t, 55, []int{6}, 1, 0, 0)}
		}, func(g *Graph, in []*tensor.Tensor) *tensor.Tensor {
			x := in[0]
			c := g.Sub(x, g.MeanAxis(x, -1, true))
			v := g.MeanAxis(g.Mul(c, c), -1, true)
			n := g.Mul(c, g.Unary(device.Rsqrt, g.Add(v, g.Constant(1e-5, device.Float64))))
			return g.Add(g.Mul(n, in[1]), in[2])
		}})
	runChecks64(t, cases)
}

// TestMaxAxisTies: tied maxima share the gradient evenly.
func TestMaxAxisTies(t *testing.T) {
	x, _ := tensor.FromFloat64(cpu.New(), []float64{1, 3, 3, 2}, 4)
	x.SetRequiresGrad(true)
	g := New(cpu.New())
	if err := g.Backward(g.Sum(g.MaxAxis(x, 0, false))); err != nil {
		t.Fatal(err)
	}
	if got := x.Grad().Float64s(); got[0] != 0 || got[1] != 0.5 || got[2] != 0.5 || got[3] != 0 {
		t.Fatalf("max gradient with a tie %v, want [0 0.5 0.5 0]", got)
	}
}

// TestCoreForwardValues checks forward results against host formulas, in
// float32 and float64: a broadcast bias add, softmax rows summing to 1,
// and LogSumExp stable at large inputs.
func TestCoreForwardValues(t *testing.T) {
	dev := cpu.New()
	g := New(dev)
	x, _ := tensor.FromFloat32(dev, []float32{1, 2, 3, 4, 5, 6}, 2, 3)
	b, _ := tensor.FromFloat32(dev, []float32{10, 20, 30}, 3)
	if got := g.Add(x, b).Float32s(); fmt.Sprint(got) != "[11 22 33 14 25 36]" {
		t.Errorf("broadcast add %v", got)
	}
	s := g.Softmax(x, 1).Float32s()
	for r := range 2 {
		sum := s[3*r] + s[3*r+1] + s[3*r+2]
		if math.Abs(float64(sum)-1) > 1e-6 || s[3*r+2] <= s[3*r] {
			t.Errorf("softmax row %d %v", r, s[3*r:3*r+3])
		}
	}
	big, _ := tensor.FromFloat64(dev, []float64{1000, 1000, math.Inf(-1), math.Inf(-1)}, 2, 2)
	lse := g.LogSumExp(big, 1, false).Float64s()
	if math.Abs(lse[0]-(1000+math.Ln2)) > 1e-12 || !math.IsInf(lse[1], -1) {
		t.Errorf("LogSumExp %v, want [1000+ln2 -Inf]", lse)
	}
	if am := g.ArgMaxAxis(x, 1, false).Int32s(); am[0] != 2 || am[1] != 2 {
		t.Errorf("ArgMaxAxis %v", am)
	}
	if err := g.Err(); err != nil {
		t.Fatal(err)
	}
	two, _ := tensor.New(dev, 2)
	g.Add(x, two)
	if err := g.Err(); err == nil || !strings.Contains(err.Error(), "do not broadcast") {
		t.Errorf("add [2 3] and [2]: %v", err)
	}
}

// softplus is a custom op: log(1 + e^x), with its own backward.
var softplus = &Function{
	Name: "Softplus",
	Forward: func(g *Graph, in []*tensor.Tensor) *tensor.Tensor {
		return g.Unary(device.Log1p, g.Exp(in[0]))
	},
	Backward: func(g *Graph, gout *tensor.Tensor, in []*tensor.Tensor, _ *tensor.Tensor) []*tensor.Tensor {
		return []*tensor.Tensor{g.Mul(gout, g.Sigmoid(in[0]))}
	},
}

// TestCustomFunction: a user op with its own backward passes the gradient
// check, composes with built-in ops, and records one node; a wrong
// backward is caught by GradCheck.
func TestCustomFunction(t *testing.T) {
	f := func(g *Graph, in []*tensor.Tensor) *tensor.Tensor {
		return g.Mul(g.Apply(softplus, g.Mul(in[0], in[1])), in[1])
	}
	in := []*tensor.Tensor{input64(t, 60, []int{3, 4}, 1, 0, 0), input64(t, 61, []int{4}, 1, 0, 0)}
	if err := GradCheck(cpu.New(), f, in, GradCheckOptions{}); err != nil {
		t.Fatal(err)
	}
	g := New(cpu.New())
	g.Apply(softplus, in[0])
	if len(g.nodes) != 1 {
		t.Fatalf("Apply recorded %d nodes", len(g.nodes))
	}
	if _, ok := g.nodes[0].op.(*customCall); !ok {
		t.Fatalf("Apply recorded a %T", g.nodes[0].op)
	}
	wrong := *softplus
	wrong.Backward = func(g *Graph, gout *tensor.Tensor, in []*tensor.Tensor, out *tensor.Tensor) []*tensor.Tensor {
		return []*tensor.Tensor{g.Mul(gout, out)} // not the derivative
	}
	err := GradCheck(cpu.New(), func(g *Graph, in []*tensor.Tensor) *tensor.Tensor { return g.Apply(&wrong, in[0]) }, in[:1], GradCheckOptions{})
	if err == nil || !strings.Contains(err.Error(), "finite difference") {
		t.Fatalf("GradCheck of a wrong backward: %v", err)
	}
	bad := *softplus
	bad.Backward = func(*Graph, *tensor.Tensor, []*tensor.Tensor, *tensor.Tensor) []*tensor.Tensor { return nil }
	g = New(cpu.New())
	if err := g.Backward(g.Sum(g.Apply(&bad, in[0]))); err == nil || !strings.Contains(err.Error(), "0 gradients for 1 inputs") {
		t.Fatalf("Backward with a Function returning no gradients: %v", err)
	}
}

// TestCoreOpsCheckVersions: a new op's saved operand modified in place is
// refused too.
func TestCoreOpsCheckVersions(t *testing.T) {
	a := input64(t, 70, []int{3}, 1, 0.1, 0)
	b := input64(t, 71, []int{3}, 1, 0.1, 0)
	b.SetRequiresGrad(false)
	g := New(cpu.New())
	loss := g.Sum(g.Div(a, b))
	b.SetFloat64([]float64{1, 1, 1})
	if err := g.Backward(loss); err == nil || !strings.Contains(err.Error(), "Div saved input 1") {
		t.Fatalf("Div with a modified divisor: %v", err)
	}
}

// TestGradCheckMovement checks Permute, Slice, Concat, IndexSelect and
// BroadcastTo.
func TestGradCheckMovement(t *testing.T) {
	x := func(seed uint64, shape ...int) *tensor.Tensor { return input64(t, seed, shape, 1, 0, 0) }
	ids, _ := tensor.FromInt32(cpu.New(), []int32{2, 0, 2, 3, 2}, 5)
	ids2, _ := tensor.FromInt32(cpu.New(), []int32{1, 1, 0, 2}, 2, 2)
	var cases []check64
	for _, perm := range [][]int{{0, 2, 1}, {2, 0, 1}, {1, 2, 0}, {2, 1, 0}} {
		cases = append(cases, check64{fmt.Sprintf("permute %v", perm), func(t *testing.T) []*tensor.Tensor { return []*tensor.Tensor{x(80, 2, 3, 4)} },
			func(g *Graph, in []*tensor.Tensor) *tensor.Tensor { return g.Permute(in[0], perm...) }})
	}
	for _, s := range [][3]int{{0, 1, 2}, {1, 0, 3}, {-1, 1, 4}, {2, 2, 3}} {
		cases = append(cases, check64{fmt.Sprintf("slice axis %d [%d:%d]", s[0], s[1], s[2]), func(t *testing.T) []*tensor.Tensor { return []*tensor.Tensor{x(81, 2, 3, 4)} },
			func(g *Graph, in []*tensor.Tensor) *tensor.Tensor { return g.Slice(in[0], s[0], s[1], s[2]) }})
	}
	cases = append(cases,
		check64{"concat axis 1", func(t *testing.T) []*tensor.Tensor {
			c := x(84, 2, 1, 4)
			c.SetRequiresGrad(false)
			return []*tensor.Tensor{x(82, 2, 3, 4), x(83, 2, 2, 4), c}
		}, func(g *Graph, in []*tensor.Tensor) *tensor.Tensor {
			return g.Mul(g.Concat(1, in...), g.Concat(1, in[2], in[1], in[0]))
		}},
		check64{"index_select axis 0", func(t *testing.T) []*tensor.Tensor { return []*tensor.Tensor{x(85, 4, 3)} },
			func(g *Graph, in []*tensor.Tensor) *tensor.Tensor { return g.IndexSelect(in[0], 0, ids) }},
		check64{"index_select axis 1 2-D ids", func(t *testing.T) []*tensor.Tensor { return []*tensor.Tensor{x(86, 2, 3, 4)} },
			func(g *Graph, in []*tensor.Tensor) *tensor.Tensor { return g.IndexSelect(in[0], 1, ids2) }},
		check64{"broadcast_to [3 1] to [2 3 4]", func(t *testing.T) []*tensor.Tensor { return []*tensor.Tensor{x(88, 3, 1)} },
			func(g *Graph, in []*tensor.Tensor) *tensor.Tensor { return g.BroadcastTo(in[0], 2, 3, 4) }},
		check64{"broadcast_to [4] to [3 4], weighted", func(t *testing.T) []*tensor.Tensor { return []*tensor.Tensor{x(89, 4), x(90, 3, 4)} },
			func(g *Graph, in []*tensor.Tensor) *tensor.Tensor { return g.Mul(g.BroadcastTo(in[0], 3, 4), in[1]) }},
		check64{"fused qkv split", func(t *testing.T) []*tensor.Tensor { return []*tensor.Tensor{x(87, 5, 9)} },
			func(g *Graph, in []*tensor.Tensor) *tensor.Tensor {
				q, k, v := g.Slice(in[0], 1, 0, 3), g.Slice(in[0], 1, 3, 6), g.Slice(in[0], 1, 6, 9)
				return g.Mul(g.Softmax(g.Mul(q, k), -1), v)
			}},
	)
	runChecks64(t, cases)
}

// TestMovementValues checks forward values and errors in float32.
func TestMovementValues(t *testing.T) {
	dev := cpu.New()
	g := New(dev)
	x, _ := tensor.FromFloat32(dev, []float32{0, 1, 2, 3, 4, 5}, 2, 3)
	if got := g.Permute(x, 1, 0).Float32s(); fmt.Sprint(got) != "[0 3 1 4 2 5]" {
		t.Errorf("permute %v", got)
	}
	if got := g.Slice(x, 1, 1, 3).Float32s(); fmt.Sprint(got) != "[1 2 4 5]" {
		t.Errorf("slice %v", got)
	}
	if got := g.Concat(0, x, x); fmt.Sprint(got.Shape(), got.Float32s()) != "[4 3] [0 1 2 3 4 5 0 1 2 3 4 5]" {
		t.Errorf("concat %v %v", got.Shape(), got.Float32s())
	}
	ids, _ := tensor.FromInt32(dev, []int32{2, 2, 0}, 3)
	if got := g.IndexSelect(x, 1, ids).Float32s(); fmt.Sprint(got) != "[2 2 0 5 5 3]" {
		t.Errorf("index_select %v", got)
	}
	col, _ := tensor.FromFloat32(dev, []float32{1, 2}, 2, 1)
	if got := g.BroadcastTo(col, 2, 3); fmt.Sprint(got.Shape(), got.Float32s()) != "[2 3] [1 1 1 2 2 2]" {
		t.Errorf("broadcast_to %v %v", got.Shape(), got.Float32s())
	}
	if err := g.Err(); err != nil {
		t.Fatal(err)
	}
	for name, bad := range map[string]func(){
		"broadcast_to": func() { g.BroadcastTo(x, 3, 3) },
		"permute":      func() { g.Permute(x, 0, 0) },
		"slice":        func() { g.Slice(x, 2, 0, 1) },
		"concat":       func() { y, _ := tensor.New(dev, 3, 3); g.Concat(1, x, y) },
	} {
		g.Reset()
		bad()
		if g.Err() == nil {
			t.Errorf("%s: bad arguments accepted", name)
		}
	}
}

// TestSlicePython: Slice reads its bounds as Python does: negative ones
// from the end, clamped to the axis, an empty result when stop <= start;
// an axis out of range is an error. Each case's values are numpy's
// x[:, start:stop] of x = [[0 1 2 3 4] [5 6 7 8 9]]. The gradient of an
// out-of-range slice is zero outside the clamped window.
func TestSlicePython(t *testing.T) {
	dev := cpu.New()
	x, _ := tensor.FromFloat32(dev, []float32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, 2, 5)
	for _, c := range []struct {
		start, stop int
		want        string
	}{
		{1, 3, "[2 2] [1 2 6 7]"},
		{-2, 5, "[2 2] [3 4 8 9]"},
		{-3, -1, "[2 2] [2 3 7 8]"},
		{3, 99, "[2 2] [3 4 8 9]"},
		{-99, 2, "[2 2] [0 1 5 6]"},
		{4, 2, "[2 0] []"},
		{5, 9, "[2 0] []"},
	} {
		g := New(dev)
		y := g.Slice(x, -1, c.start, c.stop)
		if err := g.Err(); err != nil {
			t.Fatalf("[%d:%d]: %v", c.start, c.stop, err)
		}
		if got := fmt.Sprint(y.Shape(), y.Float32s()); got != c.want {
			t.Errorf("x[:, %d:%d] = %s, numpy gives %s", c.start, c.stop, got, c.want)
		}
	}
	for _, axis := range []int{2, -3} {
		g := New(dev)
		if g.Slice(x, axis, 0, 1); g.Err() == nil || !strings.Contains(g.Err().Error(), fmt.Sprintf("Slice: axis %d of shape [2 5]", axis)) {
			t.Errorf("axis %d: error %v", axis, g.Err())
		}
	}
	w, _ := tensor.FromFloat32(dev, []float32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, 2, 5)
	w.SetRequiresGrad(true)
	g := New(dev)
	if err := g.Backward(g.Sum(g.Slice(w, 1, -2, 50))); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(w.Grad().Float32s()); got != "[0 0 0 1 1 0 0 0 1 1]" {
		t.Errorf("gradient of sum(w[:, -2:50]) = %s", got)
	}
}
