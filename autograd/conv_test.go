package autograd

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/tensor"
)

// TestGradCheckConvPoolTopK checks the gradients of the convolutions, the
// pools and TopK's values against float64 finite differences.
func TestGradCheckConvPoolTopK(t *testing.T) {
	in := func(shapes ...[]int) func(t *testing.T) []*tensor.Tensor {
		return func(t *testing.T) []*tensor.Tensor {
			var ts []*tensor.Tensor
			for i, s := range shapes {
				ts = append(ts, input64(t, uint64(40+i), s, 1, 0, 0))
			}
			return ts
		}
	}
	runChecks64(t, []check64{
		{"conv1d", in([]int{2, 2, 7}, []int{3, 2, 3}, []int{3}), func(g *Graph, x []*tensor.Tensor) *tensor.Tensor {
			return g.Conv1D(x[0], x[1], x[2], ConvOptions{Stride: []int{2}, Padding: []int{1}, Dilation: []int{2}})
		}},
		{"conv2d groups", in([]int{2, 4, 5, 4}, []int{4, 2, 2, 3}, []int{4}), func(g *Graph, x []*tensor.Tensor) *tensor.Tensor {
			return g.Conv2D(x[0], x[1], x[2], ConvOptions{Stride: []int{1, 2}, Padding: []int{1}, Groups: 2})
		}},
		{"conv2d no bias dilated", in([]int{1, 2, 6, 6}, []int{2, 2, 2, 2}), func(g *Graph, x []*tensor.Tensor) *tensor.Tensor {
			return g.Conv2D(x[0], x[1], nil, ConvOptions{Dilation: []int{2, 3}})
		}},
		{"conv3d", in([]int{1, 2, 3, 4, 3}, []int{2, 2, 2, 2, 2}, []int{2}), func(g *Graph, x []*tensor.Tensor) *tensor.Tensor {
			return g.Conv3D(x[0], x[1], x[2], ConvOptions{Padding: []int{1, 0, 1}})
		}},
		{"maxpool1d", in([]int{2, 3, 9}), func(g *Graph, x []*tensor.Tensor) *tensor.Tensor {
			return g.MaxPool1D(x[0], PoolOptions{Kernel: []int{3}, Stride: []int{2}, Padding: []int{1}})
		}},
		{"maxpool2d", in([]int{2, 2, 6, 5}), func(g *Graph, x []*tensor.Tensor) *tensor.Tensor {
			return g.MaxPool2D(x[0], PoolOptions{Kernel: []int{2, 3}, Padding: []int{1}})
		}},
		{"avgpool1d", in([]int{2, 3, 9}), func(g *Graph, x []*tensor.Tensor) *tensor.Tensor {
			return g.AvgPool1D(x[0], PoolOptions{Kernel: []int{4}, Stride: []int{2}, Padding: []int{2}})
		}},
		{"avgpool2d", in([]int{2, 2, 6, 5}), func(g *Graph, x []*tensor.Tensor) *tensor.Tensor {
			return g.AvgPool2D(x[0], PoolOptions{Kernel: []int{3}, Stride: []int{1, 2}, Padding: []int{1}})
		}},
		{"topk largest", in([]int{3, 8, 2}), func(g *Graph, x []*tensor.Tensor) *tensor.Tensor {
			v, _ := g.TopK(x[0], 1, 3, true)
			return v
		}},
		{"topk smallest", in([]int{4, 6}), func(g *Graph, x []*tensor.Tensor) *tensor.Tensor {
			v, _ := g.TopK(x[0], -1, 6, false)
			return v
		}},
	})
}

// TestConvFloat32 runs a float32 Conv2D and MaxPool2D and compares them
// with the float64 ones.
func TestConvFloat32(t *testing.T) {
	x64, w64 := input64(t, 1, []int{2, 3, 7, 6}, 1, 0, 0), input64(t, 2, []int{4, 3, 3, 3}, 1, 0, 0)
	to32 := func(x *tensor.Tensor) *tensor.Tensor {
		v := make([]float32, x.Shape().Numel())
		for i, f := range x.Float64s() {
			v[i] = float32(f)
		}
		return f32(t, v, x.Shape()...)
	}
	run := func(x, w *tensor.Tensor) []float64 {
		g := New(cpu.New())
		y := g.MaxPool2D(g.Conv2D(x, w, nil, ConvOptions{Padding: []int{1}, Stride: []int{2}}), PoolOptions{Kernel: []int{2}, Stride: []int{1}})
		if err := g.Err(); err != nil {
			t.Fatal(err)
		}
		y = g.Cast(y, x64.DType())
		return y.Float64s()
	}
	want, got := run(x64, w64), run(to32(x64), to32(w64))
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-5 {
			t.Fatalf("element %d: float32 %v, float64 %v", i, got[i], want[i])
		}
	}
}

// TestTopKOrder: ties are taken in increasing index order, a NaN ranks
// first, and a row whose remaining elements equal the mask (-Inf for the
// largest, +Inf for the smallest) still yields each index once.
func TestTopKOrder(t *testing.T) {
	inf, nan := math.Inf(1), math.NaN()
	cases := []struct {
		name    string
		x       []float64
		k       int
		largest bool
		want    []int32
	}{
		{"ties", []float64{1, 3, 2, 3, 3, 1}, 4, true, []int32{1, 3, 4, 2}},
		{"ties smallest", []float64{1, 3, 2, 3, 3, 1}, 3, false, []int32{0, 5, 2}},
		{"nan first", []float64{0, nan, 5}, 2, true, []int32{1, 2}},
		{"all -inf", []float64{-inf, -inf, 2, -inf}, 4, true, []int32{2, 0, 1, 3}},
		{"all +inf", []float64{inf, inf, inf}, 3, false, []int32{0, 1, 2}},
		{"k zero", []float64{1, 2}, 0, true, []int32{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			x, err := tensor.FromFloat64(cpu.New(), c.x, 1, len(c.x))
			if err != nil {
				t.Fatal(err)
			}
			g := New(cpu.New())
			v, i := g.TopK(x, 1, c.k, c.largest)
			if err := g.Err(); err != nil {
				t.Fatal(err)
			}
			got := i.Int32s()
			if !slices.Equal(got, c.want) {
				t.Fatalf("indices %v, want %v", got, c.want)
			}
			for j, ix := range got {
				if w, v := c.x[ix], v.Float64s()[j]; w != v && !(math.IsNaN(w) && math.IsNaN(v)) {
					t.Errorf("value %d: %v, want x[%d] = %v", j, v, ix, w)
				}
			}
		})
	}
}

// TestConvPoolTopKErrors: bad shapes and options are errors naming the
// op and the problem.
func TestConvPoolTopKErrors(t *testing.T) {
	x := func(shape ...int) *tensor.Tensor { return input64(t, 3, shape, 1, 0, 0) }
	cases := []struct {
		name string
		f    func(g *Graph) *tensor.Tensor
		want string
	}{
		{"conv rank", func(g *Graph) *tensor.Tensor { return g.Conv2D(x(3, 5, 5), x(2, 3, 2, 2), nil, ConvOptions{}) }, "Conv2D: input shape [3 5 5]: want rank 4"},
		{"conv channels", func(g *Graph) *tensor.Tensor { return g.Conv2D(x(1, 3, 5, 5), x(2, 2, 2, 2), nil, ConvOptions{}) }, "weight axis 1 = channels / groups"},
		{"conv groups", func(g *Graph) *tensor.Tensor {
			return g.Conv2D(x(1, 4, 5, 5), x(3, 2, 2, 2), nil, ConvOptions{Groups: 2})
		}, "divisible by the groups"},
		{"conv bias", func(g *Graph) *tensor.Tensor { return g.Conv1D(x(1, 2, 5), x(3, 2, 2), x(2), ConvOptions{}) }, "bias shape [2]: want [3]"},
		{"conv stride entries", func(g *Graph) *tensor.Tensor {
			return g.Conv2D(x(1, 2, 5, 5), x(3, 2, 2, 2), nil, ConvOptions{Stride: []int{1, 2, 3}})
		}, "Stride has 3 entries"},
		{"conv zero stride", func(g *Graph) *tensor.Tensor {
			return g.Conv1D(x(1, 2, 5), x(3, 2, 2), nil, ConvOptions{Stride: []int{0}})
		}, "Stride [0]: each entry must be at least 1"},
		{"conv too small", func(g *Graph) *tensor.Tensor {
			return g.Conv1D(x(1, 2, 3), x(3, 2, 3), nil, ConvOptions{Dilation: []int{2}})
		}, "smaller than the window's span 5"},
		{"pool no kernel", func(g *Graph) *tensor.Tensor { return g.MaxPool2D(x(1, 2, 5, 5), PoolOptions{}) }, "Kernel is empty"},
		{"pool padding", func(g *Graph) *tensor.Tensor {
			return g.MaxPool1D(x(1, 2, 5), PoolOptions{Kernel: []int{2}, Padding: []int{2}})
		}, "at most half the kernel"},
		{"avg dilation", func(g *Graph) *tensor.Tensor {
			return g.AvgPool1D(x(1, 2, 5), PoolOptions{Kernel: []int{2}, Dilation: []int{2}})
		}, "takes no dilation"},
		{"topk k", func(g *Graph) *tensor.Tensor { v, _ := g.TopK(x(2, 3), 1, 4, true); return v }, "TopK: k = 4 for axis 1 of size 3"},
		{"topk axis", func(g *Graph) *tensor.Tensor { v, _ := g.TopK(x(2, 3), 2, 1, true); return v }, "TopK: axis 2 of shape [2 3]"},
		{"topk int32", func(g *Graph) *tensor.Tensor { v, _ := g.TopK(i32(t, []int32{1}, 1), 0, 1, true); return v }, "TopK: dtype int32"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := New(cpu.New())
			if out := c.f(g); out != nil {
				t.Fatalf("got a result %v, want an error", out.Shape())
			}
			if err := g.Err(); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
		})
	}
}
