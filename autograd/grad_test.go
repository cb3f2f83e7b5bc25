package autograd

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/tensor"
)

// Gradient checks by central finite differences, in float32.
//
// Each case builds out = f(inputs) and the scalar L = sum(out * R) for a
// fixed random R, computed on the host in float64 from the float32 output.
// With step h = 1e-2 on inputs of order 1, the truncation error of the
// central difference is h^2 f'''/6 ~ 2e-5 relative, and float32 rounding
// of the output contributes about eps32 * sqrt(n) * |out| / h ~ 1e-4 for
// the sizes used here; tolerances of 2e-2 relative plus 2e-3 absolute
// leave a wide margin while still failing on any wrong formula (a missing
// factor or sign is an O(1) error).

type gradInput struct {
	shape []int
	// scale of the random values (default 1)
	scale float64
	// noGrad marks an input that does not require grad
	noGrad bool
}

type gradCase struct {
	name   string
	inputs []gradInput
	// ids, when set, are passed as an extra int32 argument.
	ids   []int32
	build func(g *Graph, in []*tensor.Tensor, ids *tensor.Tensor) *tensor.Tensor
}

const (
	fdStep = 1e-2
	fdRtol = 2e-2
	fdAtol = 2e-3
)

func runGradCase(t *testing.T, c gradCase) {
	t.Helper()
	dev := cpu.New()
	rng := rand.New(rand.NewPCG(1, uint64(len(c.name))))
	in := make([]*tensor.Tensor, len(c.inputs))
	host := make([][]float32, len(c.inputs))
	for i, spec := range c.inputs {
		scale := spec.scale
		if scale == 0 {
			scale = 1
		}
		n := tensor.Shape(spec.shape).Numel()
		host[i] = make([]float32, n)
		for j := range host[i] {
			host[i][j] = float32(scale * rng.NormFloat64())
		}
		x, err := tensor.FromFloat32(dev, host[i], spec.shape...)
		if err != nil {
			t.Fatal(err)
		}
		x.SetRequiresGrad(!spec.noGrad)
		in[i] = x
	}
	var ids *tensor.Tensor
	if c.ids != nil {
		var err error
		if ids, err = tensor.FromInt32(dev, c.ids, len(c.ids)); err != nil {
			t.Fatal(err)
		}
	}
	g := New(dev)
	out := c.build(g, in, ids)
	if err := g.Err(); err != nil {
		t.Fatalf("forward: %v", err)
	}
	r := make([]float32, out.Len())
	for j := range r {
		r[j] = float32(rng.NormFloat64())
	}
	R, _ := tensor.FromFloat32(dev, r, out.Shape()...)
	loss := g.Sum(g.Mul(out, R))
	if err := g.Backward(loss); err != nil {
		t.Fatalf("backward: %v", err)
	}
	analytic := make([][]float32, len(in))
	for i, x := range in {
		if !c.inputs[i].noGrad {
			if x.Grad() == nil {
				t.Fatalf("input %d: no gradient", i)
			}
			analytic[i] = x.Grad().Float32s()
		}
	}
	eval := func() float64 {
		g.Reset()
		g.SetNoGrad(true)
		defer g.SetNoGrad(false)
		o := c.build(g, in, ids)
		if err := g.Err(); err != nil {
			t.Fatalf("forward: %v", err)
		}
		v := o.Float32s()
		var s float64
		for j := range v {
			s += float64(v[j]) * float64(r[j])
		}
		return s
	}
	for i := range in {
		if c.inputs[i].noGrad {
			continue
		}
		n := len(host[i])
		// Check every element of small inputs, a random sample of large ones.
		idx := rng.Perm(n)
		if len(idx) > 48 {
			idx = idx[:48]
		}
		for _, j := range idx {
			orig := host[i][j]
			host[i][j] = orig + fdStep
			in[i].SetFloat32(host[i])
			plus := eval()
			host[i][j] = orig - fdStep
			in[i].SetFloat32(host[i])
			minus := eval()
			host[i][j] = orig
			in[i].SetFloat32(host[i])
			num := (plus - minus) / (2 * fdStep)
			got := float64(analytic[i][j])
			if math.Abs(got-num) > fdAtol+fdRtol*math.Max(math.Abs(got), math.Abs(num)) {
				t.Errorf("input %d %v element %d: analytic %.6g, finite difference %.6g", i, c.inputs[i].shape, j, got, num)
			}
		}
	}
}

func TestGradients(t *testing.T) {
	linear := func(g *Graph, in []*tensor.Tensor, _ *tensor.Tensor) *tensor.Tensor {
		return g.MatMul(in[0], in[1], false, true)
	}
	cases := []gradCase{
		{name: "matmul", inputs: []gradInput{{shape: []int{3, 4}}, {shape: []int{4, 5}}},
			build: func(g *Graph, in []*tensor.Tensor, _ *tensor.Tensor) *tensor.Tensor {
				return g.MatMul(in[0], in[1], false, false)
			}},
		{name: "matmul 1 row", inputs: []gradInput{{shape: []int{1, 7}}, {shape: []int{7, 3}}},
			build: func(g *Graph, in []*tensor.Tensor, _ *tensor.Tensor) *tensor.Tensor {
				return g.MatMul(in[0], in[1], false, false)
			}},
		{name: "linear folded", inputs: []gradInput{{shape: []int{2, 3, 5}}, {shape: []int{6, 5}}}, build: linear},
		{name: "matmul transA", inputs: []gradInput{{shape: []int{4, 3}}, {shape: []int{4, 5}}},
			build: func(g *Graph, in []*tensor.Tensor, _ *tensor.Tensor) *tensor.Tensor {
				return g.MatMul(in[0], in[1], true, false)
			}},
		{name: "matmul transA transB", inputs: []gradInput{{shape: []int{4, 3}}, {shape: []int{5, 4}}},
			build: func(g *Graph, in []*tensor.Tensor, _ *tensor.Tensor) *tensor.Tensor {
				return g.MatMul(in[0], in[1], true, true)
			}},
		{name: "batched", inputs: []gradInput{{shape: []int{2, 3, 4}}, {shape: []int{2, 4, 5}}},
			build: func(g *Graph, in []*tensor.Tensor, _ *tensor.Tensor) *tensor.Tensor {
				return g.MatMul(in[0], in[1], false, false)
			}},
		{name: "batched transB", inputs: []gradInput{{shape: []int{2, 3, 4}}, {shape: []int{2, 5, 4}}},
			build: func(g *Graph, in []*tensor.Tensor, _ *tensor.Tensor) *tensor.Tensor {
				return g.MatMul(in[0], in[1], false, true)
			}},
		{name: "batched transA", inputs: []gradInput{{shape: []int{3, 4, 2}}, {shape: []int{3, 4, 5}}},
			build: func(g *Graph, in []*tensor.Tensor, _ *tensor.Tensor) *tensor.Tensor {
				return g.MatMul(in[0], in[1], true, false)
			}},
		{name: "add sub mul scale", inputs: []gradInput{{shape: []int{3, 5}}, {shape: []int{3, 5}}},
			build: func(g *Graph, in []*tensor.Tensor, _ *tensor.Tensor) *tensor.Tensor {
				s := g.Add(in[0], in[1])
				d := g.Sub(in[0], g.Scale(in[1], 0.5))
				return g.Mul(s, d)
			}},
		{name: "same input twice", inputs: []gradInput{{shape: []int{7}}},
			build: func(g *Graph, in []*tensor.Tensor, _ *tensor.Tensor) *tensor.Tensor { return g.Mul(in[0], in[0]) }},
		{name: "sum mean", inputs: []gradInput{{shape: []int{3, 3}}},
			build: func(g *Graph, in []*tensor.Tensor, _ *tensor.Tensor) *tensor.Tensor {
				return g.Add(g.Sum(in[0]), g.Scale(g.Mean(g.Mul(in[0], in[0])), 3))
			}},
		{name: "reshape transpose", inputs: []gradInput{{shape: []int{2, 3, 4}}, {shape: []int{4, 6}}},
			build: func(g *Graph, in []*tensor.Tensor, _ *tensor.Tensor) *tensor.Tensor {
				x := g.Transpose(g.Reshape(in[0], 2, 3, 2, 2)) // [2 2 3 2]
				y := g.Reshape(x, 4, 6)
				return g.Mul(g.Transpose(g.Transpose(y)), in[1])
			}},
		{name: "rank-3 transpose", inputs: []gradInput{{shape: []int{2, 3, 5}}},
			build: func(g *Graph, in []*tensor.Tensor, _ *tensor.Tensor) *tensor.Tensor { return g.Transpose(in[0]) }},
		{name: "embedding repeated ids", inputs: []gradInput{{shape: []int{5, 3}}}, ids: []int32{4, 0, 4, 2, 4},
			build: func(g *Graph, in []*tensor.Tensor, ids *tensor.Tensor) *tensor.Tensor { return g.Embedding(in[0], ids) }},
		{name: "rmsnorm", inputs: []gradInput{{shape: []int{3, 7}}},
			build: func(g *Graph, in []*tensor.Tensor, _ *tensor.Tensor) *tensor.Tensor {
				return g.RMSNorm(in[0], nil, 1e-6)
			}},
		{name: "rmsnorm gain", inputs: []gradInput{{shape: []int{3, 7}}, {shape: []int{7}}},
			build: func(g *Graph, in []*tensor.Tensor, _ *tensor.Tensor) *tensor.Tensor {
				return g.RMSNorm(in[0], in[1], 1e-6)
			}},
		{name: "rmsnorm gain frozen", inputs: []gradInput{{shape: []int{2, 3, 20}}, {shape: []int{20}, noGrad: true}},
			build: func(g *Graph, in []*tensor.Tensor, _ *tensor.Tensor) *tensor.Tensor {
				return g.RMSNorm(in[0], in[1], 1e-6)
			}},
		{name: "rmsnorm 1 row", inputs: []gradInput{{shape: []int{1, 64}}},
			build: func(g *Graph, in []*tensor.Tensor, _ *tensor.Tensor) *tensor.Tensor {
				return g.RMSNorm(in[0], nil, 1e-6)
			}},
		{name: "rope", inputs: []gradInput{{shape: []int{2, 5, 3, 4}}},
			build: func(g *Graph, in []*tensor.Tensor, _ *tensor.Tensor) *tensor.Tensor {
				c, s, err := RoPETables(g.Device(), in[0].DType(), 8, 4, 10000)
				if err != nil {
					panic(err)
				}
				return g.RoPE(in[0], c, s)
			}},
		{name: "swiglu", inputs: []gradInput{{shape: []int{4, 5}}, {shape: []int{4, 5}}},
			build: func(g *Graph, in []*tensor.Tensor, _ *tensor.Tensor) *tensor.Tensor { return g.SwiGLU(in[0], in[1]) }},
		{name: "attention", inputs: []gradInput{{shape: []int{2, 5, 3, 4}}, {shape: []int{2, 5, 3, 4}}, {shape: []int{2, 5, 3, 4}}},
			build: func(g *Graph, in []*tensor.Tensor, _ *tensor.Tensor) *tensor.Tensor {
				return g.Attention(in[0], in[1], in[2], 0.5)
			}},
		{name: "attention seq 1", inputs: []gradInput{{shape: []int{1, 1, 2, 8}}, {shape: []int{1, 1, 2, 8}}, {shape: []int{1, 1, 2, 8}}},
			build: func(g *Graph, in []*tensor.Tensor, _ *tensor.Tensor) *tensor.Tensor {
				return g.Attention(in[0], in[1], in[2], 0.35)
			}},
		{name: "cross entropy", inputs: []gradInput{{shape: []int{4, 7}, scale: 2}}, ids: []int32{0, 6, 3, 3},
			build: func(g *Graph, in []*tensor.Tensor, ids *tensor.Tensor) *tensor.Tensor {
				return g.CrossEntropy(in[0], ids)
			}},
		{name: "linear cross entropy", inputs: []gradInput{{shape: []int{5, 3}}, {shape: []int{11, 3}}}, ids: []int32{1, 10, 0, 5, 5},
			build: func(g *Graph, in []*tensor.Tensor, ids *tensor.Tensor) *tensor.Tensor {
				return g.LinearCrossEntropy(in[0], in[1], ids, 2) // blocks of 2 rows: 2+2+1
			}},
		{name: "linear cross entropy, head frozen", inputs: []gradInput{{shape: []int{3, 4}}, {shape: []int{6, 4}, noGrad: true}}, ids: []int32{1, 5, 0},
			build: func(g *Graph, in []*tensor.Tensor, ids *tensor.Tensor) *tensor.Tensor {
				return g.LinearCrossEntropy(in[0], in[1], ids, 0)
			}},
		{name: "input feeds two branches", inputs: []gradInput{{shape: []int{3, 8}}, {shape: []int{8, 8}}},
			build: func(g *Graph, in []*tensor.Tensor, _ *tensor.Tensor) *tensor.Tensor {
				n := g.RMSNorm(in[0], nil, 1e-6)
				return g.Add(in[0], g.MatMul(n, in[1], false, true))
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { runGradCase(t, c) })
	}
}

func ExampleGraph() {
	dev := cpu.New()
	w, _ := tensor.FromFloat32(dev, []float32{1, 2, 3, 4}, 2, 2)
	w.SetRequiresGrad(true)
	x, _ := tensor.FromFloat32(dev, []float32{1, 1}, 1, 2)

	g := New(dev)
	y := g.MatMul(x, w, false, true) // x W^T = [3 7]
	loss := g.Sum(g.Mul(y, y))       // 9 + 49
	if err := g.Backward(loss); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(loss.Item(), w.Grad().Float32s())
	// Output: 58 [6 6 14 14]
}
