package autograd

import (
	"fmt"
	"math"
	"testing"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/tensor"
)

// ropeTables64 returns float64 rotary tables [seq, half].
func ropeTables64(t *testing.T, seq, half int) (cos, sin *tensor.Tensor) {
	t.Helper()
	c, s := make([]float64, seq*half), make([]float64, seq*half)
	for p := range seq {
		for j := range half {
			a := float64(p) * math.Pow(10000, -float64(j)/float64(half))
			c[p*half+j], s[p*half+j] = math.Cos(a), math.Sin(a)
		}
	}
	dev := cpu.New()
	cos, err := tensor.FromFloat64(dev, c, seq, half)
	if err != nil {
		t.Fatal(err)
	}
	sin, _ = tensor.FromFloat64(dev, s, seq, half)
	return cos, sin
}

// TestGradCheckFusedOps checks in float64 the gradients of the ops that
// the backends fuse in float32: in float64 they run as their compositions
// from the core (device/compose), forward and backward, so finite
// differences check the composed backward formulas that a backend without
// the fused kernels trains with, and that devicetest holds every fused
// kernel to. The ops built on Gemm are in TestGradCheckProducts.
func TestGradCheckFusedOps(t *testing.T) {
	x := func(seed uint64, shape ...int) *tensor.Tensor { return input64(t, seed, shape, 1, 0, 0) }
	targets, _ := tensor.FromInt32(cpu.New(), []int32{3, 0, 6, 6, 1}, 5)
	ids, _ := tensor.FromInt32(cpu.New(), []int32{2, 0, 2, 3}, 2, 2)
	cases := []check64{
		{"RMSNorm", func(t *testing.T) []*tensor.Tensor { return []*tensor.Tensor{x(100, 3, 7)} },
			func(g *Graph, in []*tensor.Tensor) *tensor.Tensor { return g.RMSNorm(in[0], nil, 1e-5) }},
		{"LayerNorm", func(t *testing.T) []*tensor.Tensor {
			return []*tensor.Tensor{input64(t, 111, []int{3, 7}, 2, 0, 1.5), x(112, 7), x(113, 7)}
		}, func(g *Graph, in []*tensor.Tensor) *tensor.Tensor { return g.LayerNorm(in[0], in[1], in[2], 1e-5) }},
		{"LayerNorm/plain", func(t *testing.T) []*tensor.Tensor { return []*tensor.Tensor{x(114, 2, 3, 6)} },
			func(g *Graph, in []*tensor.Tensor) *tensor.Tensor { return g.LayerNorm(in[0], nil, nil, 1e-5) }},
		{"GELUTanh", func(t *testing.T) []*tensor.Tensor {
			return []*tensor.Tensor{input64(t, 115, []int{4, 6}, 2.5, 0, 0), x(116, 6)}
		}, func(g *Graph, in []*tensor.Tensor) *tensor.Tensor { return g.GELUTanh(in[0], in[1]) }},
		{"GELUTanh/nobias", func(t *testing.T) []*tensor.Tensor { return []*tensor.Tensor{input64(t, 117, []int{2, 9}, 3, 0, 0)} },
			func(g *Graph, in []*tensor.Tensor) *tensor.Tensor { return g.GELUTanh(in[0], nil) }},
		{"SwiGLU", func(t *testing.T) []*tensor.Tensor { return []*tensor.Tensor{x(101, 4, 5), x(102, 4, 5)} },
			func(g *Graph, in []*tensor.Tensor) *tensor.Tensor { return g.SwiGLU(in[0], in[1]) }},
		{"RoPE", func(t *testing.T) []*tensor.Tensor { return []*tensor.Tensor{x(103, 2, 5, 2, 6)} },
			func(g *Graph, in []*tensor.Tensor) *tensor.Tensor {
				cos, sin := ropeTables64(t, 7, 3)
				return g.RoPE(in[0], cos, sin)
			}},
		{"CrossEntropy", func(t *testing.T) []*tensor.Tensor { return []*tensor.Tensor{x(107, 5, 7)} },
			func(g *Graph, in []*tensor.Tensor) *tensor.Tensor { return g.CrossEntropy(in[0], targets) }},
		{"Embedding", func(t *testing.T) []*tensor.Tensor { return []*tensor.Tensor{x(108, 4, 3)} },
			func(g *Graph, in []*tensor.Tensor) *tensor.Tensor { return g.Embedding(in[0], ids) }},
		{"block", func(t *testing.T) []*tensor.Tensor {
			return []*tensor.Tensor{x(109, 1, 4, 2, 4), x(110, 1, 4, 2, 4)}
		}, func(g *Graph, in []*tensor.Tensor) *tensor.Tensor {
			cos, sin := ropeTables64(t, 4, 2)
			h := g.Reshape(g.RMSNorm(g.Reshape(in[0], 4, 8), nil, 1e-6), 1, 4, 2, 4)
			q := g.RoPE(h, cos, sin)
			return g.SwiGLU(q, g.RoPE(in[1], cos, sin))
		}},
	}
	runChecks64(t, cases)
}

// TestGradCheckProducts checks in float64 the ops whose forward and
// backward are matrix products: MatMul in every transpose and batching,
// causal attention as its composition from the core (scores, softmax and
// the five backward products), and LinearCrossEntropy, blocked over rows
// with a ragged last block and in one block.
func TestGradCheckProducts(t *testing.T) {
	x := func(seed uint64, shape ...int) *tensor.Tensor { return input64(t, seed, shape, 1, 0, 0) }
	targets, _ := tensor.FromInt32(cpu.New(), []int32{3, 0, 6, 6, 1}, 5)
	var cases []check64
	for _, tr := range [][2]bool{{false, false}, {false, true}, {true, false}, {true, true}} {
		tA, tB := tr[0], tr[1]
		sa, sb := []int{3, 4}, []int{4, 5}
		if tA {
			sa = []int{4, 3}
		}
		if tB {
			sb = []int{5, 4}
		}
		cases = append(cases,
			check64{fmt.Sprintf("MatMul_%v_%v", tA, tB), func(t *testing.T) []*tensor.Tensor {
				return []*tensor.Tensor{x(200, sa...), x(201, sb...)}
			}, func(g *Graph, in []*tensor.Tensor) *tensor.Tensor { return g.MatMul(in[0], in[1], tA, tB) }},
			check64{fmt.Sprintf("MatMulBatched_%v_%v", tA, tB), func(t *testing.T) []*tensor.Tensor {
				return []*tensor.Tensor{x(202, append([]int{2, 3}, sa...)...), x(203, append([]int{2, 3}, sb...)...)}
			}, func(g *Graph, in []*tensor.Tensor) *tensor.Tensor { return g.MatMul(in[0], in[1], tA, tB) }},
		)
	}
	cases = append(cases,
		check64{"MatMulFoldedLeading", func(t *testing.T) []*tensor.Tensor {
			return []*tensor.Tensor{x(204, 2, 3, 4), x(205, 5, 4)}
		}, func(g *Graph, in []*tensor.Tensor) *tensor.Tensor { return g.MatMul(in[0], in[1], false, true) }},
		check64{"Attention", func(t *testing.T) []*tensor.Tensor {
			return []*tensor.Tensor{x(206, 2, 5, 2, 3), x(207, 2, 5, 2, 3), x(208, 2, 5, 2, 3)}
		}, func(g *Graph, in []*tensor.Tensor) *tensor.Tensor { return g.Attention(in[0], in[1], in[2], 0.7) }},
		check64{"LinearCrossEntropyBlocked", func(t *testing.T) []*tensor.Tensor {
			return []*tensor.Tensor{x(209, 5, 4), x(210, 7, 4)}
		}, func(g *Graph, in []*tensor.Tensor) *tensor.Tensor {
			return g.LinearCrossEntropy(in[0], in[1], targets, 2)
		}},
		check64{"LinearCrossEntropy", func(t *testing.T) []*tensor.Tensor {
			return []*tensor.Tensor{x(211, 5, 4), x(212, 7, 4)}
		}, func(g *Graph, in []*tensor.Tensor) *tensor.Tensor {
			return g.LinearCrossEntropy(in[0], in[1], targets, 0)
		}},
		check64{"AttentionBlock", func(t *testing.T) []*tensor.Tensor {
			return []*tensor.Tensor{x(213, 1, 4, 2, 4), x(214, 8, 8)}
		}, func(g *Graph, in []*tensor.Tensor) *tensor.Tensor {
			cos, sin := ropeTables64(t, 4, 2)
			q := g.RoPE(in[0], cos, sin)
			a := g.Reshape(g.Attention(q, q, in[0], 0.5), 4, 8)
			return g.MatMul(a, in[1], false, true)
		}},
	)
	runChecks64(t, cases)
}

// TestProductsFloat64MatchFloat32 runs MatMul, Attention and
// LinearCrossEntropy in float64 and float32 on the same values: the float64
// results (the reference) and the float32 ones (the fused kernels) agree
// to float32 accuracy.
func TestProductsFloat64MatchFloat32(t *testing.T) {
	dev := cpu.New()
	vals := func(seed uint64, n int) []float64 {
		v := input64(t, seed, []int{n}, 1, 0, 0).Float64s()
		for i := range v {
			v[i] = float64(float32(v[i]))
		}
		return v
	}
	mk := func(dt device.DType, v []float64, shape ...int) *tensor.Tensor {
		x, err := tensor.FromFloat64(dev, v, shape...)
		if err != nil {
			t.Fatal(err)
		}
		if dt == device.Float32 {
			f := make([]float32, len(v))
			for i := range v {
				f[i] = float32(v[i])
			}
			if x, err = tensor.FromFloat32(dev, f, shape...); err != nil {
				t.Fatal(err)
			}
		}
		return x
	}
	targets, _ := tensor.FromInt32(dev, []int32{3, 0, 6, 6, 1, 2}, 6)
	q, k, v := vals(300, 2*6*2*4), vals(301, 2*6*2*4), vals(302, 2*6*2*4)
	h, w := vals(303, 6*8), vals(304, 7*8)
	run := func(dt device.DType) [][]float64 {
		g := New(dev)
		defer g.Reset()
		att := g.Attention(mk(dt, q, 2, 6, 2, 4), mk(dt, k, 2, 6, 2, 4), mk(dt, v, 2, 6, 2, 4), 0.5)
		mm := g.MatMul(mk(dt, h, 6, 8), mk(dt, w, 7, 8), false, true)
		lce := g.LinearCrossEntropy(mk(dt, h, 6, 8), mk(dt, w, 7, 8), targets, 4)
		if err := g.Err(); err != nil {
			t.Fatalf("%v: %v", dt, err)
		}
		return [][]float64{att.Float64s(), mm.Float64s(), lce.Float64s()}
	}
	want, got := run(device.Float64), run(device.Float32)
	for i, name := range []string{"Attention", "MatMul", "LinearCrossEntropy"} {
		for j := range want[i] {
			if d := math.Abs(got[i][j] - want[i][j]); d > 1e-5*(1+math.Abs(want[i][j])) {
				t.Errorf("%s element %d: float32 %v, float64 %v", name, j, got[i][j], want[i][j])
			}
		}
	}
}

// TestLayerNormAndGELUValues checks the forward values of LayerNorm and
// GELUTanh against their definitions written out here in float64 (the
// tanh form of GELU; the kernels use z sigmoid(2u)), in float64 (the
// compositions) and float32 (the CPU's kernels), with and without the
// optional gain, bias and GELU bias.
func TestLayerNormAndGELUValues(t *testing.T) {
	const rows, cols = 5, 12
	dev := cpu.New()
	x := input64(t, 120, []int{rows, cols}, 2, 0, 0.7).Float64s()
	w := input64(t, 121, []int{cols}, 1, 0, 0).Float64s()
	b := input64(t, 122, []int{cols}, 1, 0, 0).Float64s()
	wantLN := func(withParams bool) []float64 {
		out := make([]float64, 0, rows*cols)
		for r := range rows {
			xs := x[r*cols : (r+1)*cols]
			var mu, v float64
			for _, e := range xs {
				mu += e / cols
			}
			for _, e := range xs {
				v += (e - mu) * (e - mu) / cols
			}
			for c, e := range xs {
				y := (e - mu) / math.Sqrt(v+1e-5)
				if withParams {
					y = y*w[c] + b[c]
				}
				out = append(out, y)
			}
		}
		return out
	}
	wantGELU := func(withBias bool) []float64 {
		out := make([]float64, rows*cols)
		for i, e := range x {
			z := e
			if withBias {
				z += b[i%cols]
			}
			out[i] = z / 2 * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(z+0.044715*z*z*z)))
		}
		return out
	}
	for _, dt := range []device.DType{device.Float64, device.Float32} {
		tol := 1e-13
		if dt == device.Float32 {
			tol = 2e-6
		}
		mk := func(v []float64, shape ...int) *tensor.Tensor {
			t64, err := tensor.FromFloat64(dev, v, shape...)
			if err != nil {
				t.Fatal(err)
			}
			if dt == device.Float64 {
				return t64
			}
			f := make([]float32, len(v))
			for i := range v {
				f[i] = float32(v[i])
			}
			t32, _ := tensor.FromFloat32(dev, f, shape...)
			return t32
		}
		g := New(dev)
		X, W, B := mk(x, rows, cols), mk(w, cols), mk(b, cols)
		for _, c := range []struct {
			name string
			got  *tensor.Tensor
			want []float64
		}{
			{"LayerNorm", g.LayerNorm(X, W, B, 1e-5), wantLN(true)},
			{"LayerNorm/plain", g.LayerNorm(X, nil, nil, 1e-5), wantLN(false)},
			{"GELUTanh", g.GELUTanh(X, B), wantGELU(true)},
			{"GELUTanh/nobias", g.GELUTanh(X, nil), wantGELU(false)},
		} {
			if err := g.Err(); err != nil {
				t.Fatal(err)
			}
			for i, v := range c.got.Float64s() {
				if d := math.Abs(v - c.want[i]); d > tol*(1+math.Abs(c.want[i])) {
					t.Errorf("%v %s element %d: %v, want %v", dt, c.name, i, v, c.want[i])
					break
				}
			}
		}
		g.Reset()
	}
}
