package autograd

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/tensor"
)

// TestInt32Arithmetic checks the int32 binary ops and comparisons against
// their closed forms in int64 wrapped to 32 bits, with broadcasting (a
// [2,3] against b [3]) and overflow.
func TestInt32Arithmetic(t *testing.T) {
	av := []int32{7, -3, math.MaxInt32, 0, math.MinInt32, 5}
	bv := []int32{2, -3, 1}
	wrap := func(v int64) int32 { return int32(v) } // two's complement
	b2i := func(c bool) int32 {
		if c {
			return 1
		}
		return 0
	}
	cases := []struct {
		op   device.BinaryOp
		want func(x, y int32) int32
	}{
		{device.Add, func(x, y int32) int32 { return wrap(int64(x) + int64(y)) }},
		{device.Sub, func(x, y int32) int32 { return wrap(int64(x) - int64(y)) }},
		{device.Mul, func(x, y int32) int32 { return wrap(int64(x) * int64(y)) }},
		{device.Maximum, func(x, y int32) int32 { return max(x, y) }},
		{device.Minimum, func(x, y int32) int32 { return min(x, y) }},
		{device.Eq, func(x, y int32) int32 { return b2i(x == y) }},
		{device.Ne, func(x, y int32) int32 { return b2i(x != y) }},
		{device.Lt, func(x, y int32) int32 { return b2i(x < y) }},
		{device.Le, func(x, y int32) int32 { return b2i(x <= y) }},
		{device.Gt, func(x, y int32) int32 { return b2i(x > y) }},
		{device.Ge, func(x, y int32) int32 { return b2i(x >= y) }},
	}
	for _, c := range cases {
		t.Run(c.op.String(), func(t *testing.T) {
			g := New(cpu.New())
			a, b := i32(t, av, 2, 3), i32(t, bv, 3)
			var out *tensor.Tensor
			switch {
			case c.op.IsComparison():
				out = g.Compare(c.op, a, b)
			case c.op == device.Add:
				out = g.Add(a, b)
			case c.op == device.Sub:
				out = g.Sub(a, b)
			case c.op == device.Mul:
				out = g.Mul(a, b)
			case c.op == device.Maximum:
				out = g.Maximum(a, b)
			default:
				out = g.Minimum(a, b)
			}
			if err := g.Err(); err != nil {
				t.Fatal(err)
			}
			if out.DType() != device.Int32 || !slices.Equal(out.Shape(), []int{2, 3}) {
				t.Fatalf("result %v %v, want int32 [2 3]", out.DType(), out.Shape())
			}
			got := out.Int32s()
			for i, x := range av {
				if w := c.want(x, bv[i%3]); got[i] != w {
					t.Errorf("%d %v %d = %d, want %d", x, c.op, bv[i%3], got[i], w)
				}
			}
		})
	}
}

// TestInt32Where checks Where on int32 operands with an int32 mask, and
// the mixed cases: an int32 mask selecting float values, a float mask
// (0.5 counts as true) selecting int32 values.
func TestInt32Where(t *testing.T) {
	dev := cpu.New()
	f64 := func(v []float64, shape ...int) *tensor.Tensor {
		x, err := tensor.FromFloat64(dev, v, shape...)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	cases := []struct {
		name       string
		cond, a, b func() *tensor.Tensor
		want       []float64
	}{
		{"int32 all", func() *tensor.Tensor { return i32(t, []int32{1, 0, -4}, 3) },
			func() *tensor.Tensor { return i32(t, []int32{10, 20, 30}, 3) },
			func() *tensor.Tensor { return i32(t, []int32{-1}, 1) }, []float64{10, -1, 30}},
		{"int32 cond, float64 values", func() *tensor.Tensor { return i32(t, []int32{0, 7, 0}, 3) },
			func() *tensor.Tensor { return f64([]float64{1.5, 2.5, 3.5}, 3) },
			func() *tensor.Tensor { return f64([]float64{-0.25}) }, []float64{-0.25, 2.5, -0.25}},
		{"float32 cond, int32 values", func() *tensor.Tensor { return f32(t, []float32{0.5, 0, float32(math.NaN())}, 3) },
			func() *tensor.Tensor { return i32(t, []int32{4, 5, 6}, 3) },
			func() *tensor.Tensor { return i32(t, []int32{9, 9, 9}, 3) }, []float64{4, 9, 6}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := New(dev)
			out := g.Where(c.cond(), c.a(), c.b())
			if err := g.Err(); err != nil {
				t.Fatal(err)
			}
			var got []float64
			if out.DType() == device.Int32 {
				for _, v := range out.Int32s() {
					got = append(got, float64(v))
				}
			} else {
				got = out.Float64s()
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("got %v, want %v", got, c.want)
			}
		})
	}
}

// TestInt32Errors: the int32 ops not defined (Div, Pow), mixed dtypes and
// Where of mixed values are errors naming the op and the dtypes.
func TestInt32Errors(t *testing.T) {
	cases := []struct {
		name string
		f    func(g *Graph) *tensor.Tensor
		want string
	}{
		{"div", func(g *Graph) *tensor.Tensor { return g.Div(i32(t, []int32{1}, 1), i32(t, []int32{2}, 1)) }, "Div: int32 operands"},
		{"pow", func(g *Graph) *tensor.Tensor { return g.Pow(i32(t, []int32{1}, 1), i32(t, []int32{2}, 1)) }, "Pow: int32 operands"},
		{"mixed", func(g *Graph) *tensor.Tensor { return g.Add(i32(t, []int32{1}, 1), f32(t, []float32{2}, 1)) }, "Add: dtypes int32 and float32"},
		{"where mixed values", func(g *Graph) *tensor.Tensor {
			return g.Where(i32(t, []int32{1}, 1), i32(t, []int32{1}, 1), f32(t, []float32{2}, 1))
		}, "Where: dtypes int32 (cond), int32 and float32"},
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
