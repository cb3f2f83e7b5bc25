package autograd

import (
	"encoding/json"
	"math"
	"os"
	"slices"
	"testing"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/tensor"
)

// goldenTensor is a tensor of scripts/ops_golden.py's output.
type goldenTensor struct {
	Shape []int     `json:"shape"`
	Data  []float64 `json:"data"`
}

// opsGolden is autograd/testdata/ops_golden.json, PyTorch's float64
// results (scripts/ops_golden.py).
type opsGolden struct {
	Torch string `json:"torch"`
	TopK  []struct {
		Name    string       `json:"name"`
		X       goldenTensor `json:"x"`
		Dim     int          `json:"dim"`
		K       int          `json:"k"`
		Largest bool         `json:"largest"`
		Values  goldenTensor `json:"values"`
		Indices []int32      `json:"indices"`
	} `json:"topk"`
	Conv []struct {
		Name     string        `json:"name"`
		Spatial  int           `json:"spatial"`
		X        goldenTensor  `json:"x"`
		W        goldenTensor  `json:"w"`
		B        *goldenTensor `json:"b"`
		Stride   []int         `json:"stride"`
		Padding  []int         `json:"padding"`
		Dilation []int         `json:"dilation"`
		Groups   int           `json:"groups"`
		R        goldenTensor  `json:"r"`
		Out      goldenTensor  `json:"out"`
		DX       goldenTensor  `json:"dx"`
		DW       goldenTensor  `json:"dw"`
		DB       *goldenTensor `json:"db"`
	} `json:"conv"`
	Pool []struct {
		Name     string       `json:"name"`
		Kind     string       `json:"kind"`
		Spatial  int          `json:"spatial"`
		X        goldenTensor `json:"x"`
		Kernel   []int        `json:"kernel"`
		Stride   []int        `json:"stride"`
		Padding  []int        `json:"padding"`
		Dilation []int        `json:"dilation"`
		R        goldenTensor `json:"r"`
		Out      goldenTensor `json:"out"`
		DX       goldenTensor `json:"dx"`
	} `json:"pool"`
	Unary []unaryGolden `json:"unary"`
}

// unaryGolden is a unary op's case: out = op(x) and the gradient of
// sum(out * r).
type unaryGolden struct {
	Name string       `json:"name"`
	X    goldenTensor `json:"x"`
	R    goldenTensor `json:"r"`
	Out  goldenTensor `json:"out"`
	DX   goldenTensor `json:"dx"`
}

func loadOpsGolden(t *testing.T) *opsGolden {
	t.Helper()
	raw, err := os.ReadFile("testdata/ops_golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var g opsGolden
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatalf("testdata/ops_golden.json: %v", err)
	}
	return &g
}

// tensor64 makes a float64 CPU tensor of a golden one.
func (gt goldenTensor) tensor64(t *testing.T, grad bool) *tensor.Tensor {
	t.Helper()
	x, err := tensor.FromFloat64(cpu.New(), gt.Data, gt.Shape...)
	if err != nil {
		t.Fatal(err)
	}
	x.SetRequiresGrad(grad)
	return x
}

// closeTo checks got (shape and values) against a golden tensor to a
// relative tolerance of the golden's largest magnitude.
func closeTo(t *testing.T, what string, got *tensor.Tensor, want goldenTensor, tol float64) {
	t.Helper()
	if got == nil {
		t.Fatalf("%s: nil", what)
	}
	if !slices.Equal(got.Shape(), want.Shape) {
		t.Fatalf("%s: shape %v, want %v", what, got.Shape(), want.Shape)
	}
	scale := 0.0
	for _, v := range want.Data {
		scale = max(scale, math.Abs(v))
	}
	worst := 0.0
	for i, v := range got.Float64s() {
		worst = max(worst, math.Abs(v-want.Data[i]))
	}
	if worst > tol*max(scale, 1) {
		t.Errorf("%s: largest error %.3g (scale %.3g), want <= %.1g relative", what, worst, scale, tol)
	}
}

// TestTopKGolden compares TopK's values and indices with torch.topk.
func TestTopKGolden(t *testing.T) {
	for _, c := range loadOpsGolden(t).TopK {
		t.Run(c.Name, func(t *testing.T) {
			g := New(cpu.New())
			v, i := g.TopK(c.X.tensor64(t, false), c.Dim, c.K, c.Largest)
			if err := g.Err(); err != nil {
				t.Fatal(err)
			}
			closeTo(t, "values", v, c.Values, 0)
			if got := i.Int32s(); !slices.Equal(got, c.Indices) {
				t.Errorf("indices %v, want %v", got, c.Indices)
			}
		})
	}
}

// convOptions returns a golden case's options.
func convOptions(stride, padding, dilation []int, groups int) ConvOptions {
	return ConvOptions{Stride: stride, Padding: padding, Dilation: dilation, Groups: groups}
}

// TestConvGolden compares Conv1D/2D/3D and the gradients of
// sum(out * r) with torch.nn.functional.conv*d in float64.
func TestConvGolden(t *testing.T) {
	for _, c := range loadOpsGolden(t).Conv {
		t.Run(c.Name, func(t *testing.T) {
			x, w := c.X.tensor64(t, true), c.W.tensor64(t, true)
			var b *tensor.Tensor
			if c.B != nil {
				b = c.B.tensor64(t, true)
			}
			g := New(cpu.New())
			conv := map[int]func(x, w, b *tensor.Tensor, o ConvOptions) *tensor.Tensor{1: g.Conv1D, 2: g.Conv2D, 3: g.Conv3D}[c.Spatial]
			out := conv(x, w, b, convOptions(c.Stride, c.Padding, c.Dilation, c.Groups))
			loss := g.Sum(g.Mul(out, c.R.tensor64(t, false)))
			if err := g.Err(); err != nil {
				t.Fatal(err)
			}
			closeTo(t, "out", out, c.Out, 1e-13)
			if err := g.Backward(loss); err != nil {
				t.Fatal(err)
			}
			closeTo(t, "dx", x.Grad(), c.DX, 1e-13)
			closeTo(t, "dw", w.Grad(), c.DW, 1e-13)
			if b != nil {
				closeTo(t, "db", b.Grad(), *c.DB, 1e-13)
			}
		})
	}
}

// TestPoolGolden compares the pools and their gradients with PyTorch's.
func TestPoolGolden(t *testing.T) {
	for _, c := range loadOpsGolden(t).Pool {
		t.Run(c.Name, func(t *testing.T) {
			x := c.X.tensor64(t, true)
			g := New(cpu.New())
			opt := PoolOptions{Kernel: c.Kernel, Stride: c.Stride, Padding: c.Padding, Dilation: c.Dilation}
			var out *tensor.Tensor
			switch {
			case c.Kind == "max" && c.Spatial == 1:
				out = g.MaxPool1D(x, opt)
			case c.Kind == "max":
				out = g.MaxPool2D(x, opt)
			case c.Spatial == 1:
				out = g.AvgPool1D(x, opt)
			default:
				out = g.AvgPool2D(x, opt)
			}
			loss := g.Sum(g.Mul(out, c.R.tensor64(t, false)))
			if err := g.Err(); err != nil {
				t.Fatal(err)
			}
			closeTo(t, "out", out, c.Out, 1e-14)
			if err := g.Backward(loss); err != nil {
				t.Fatal(err)
			}
			closeTo(t, "dx", x.Grad(), c.DX, 1e-14)
		})
	}
}

// TestUnaryGolden compares every UnaryOp and the gradient of sum(out * r)
// with PyTorch's in float64: a unary op added without its golden case
// fails here.
func TestUnaryGolden(t *testing.T) {
	cases := loadOpsGolden(t).Unary
	for _, op := range device.UnaryOps() {
		i := slices.IndexFunc(cases, func(c unaryGolden) bool { return c.Name == op.String() })
		if i < 0 {
			t.Errorf("%v: no golden case in testdata/ops_golden.json (add it to scripts/ops_golden.py)", op)
			continue
		}
		c := cases[i]
		t.Run(c.Name, func(t *testing.T) {
			x := c.X.tensor64(t, true)
			g := New(cpu.New())
			out := g.Unary(op, x)
			loss := g.Sum(g.Mul(out, c.R.tensor64(t, false)))
			if err := g.Err(); err != nil {
				t.Fatal(err)
			}
			closeTo(t, "out", out, c.Out, 1e-14)
			if err := g.Backward(loss); err != nil {
				t.Fatal(err)
			}
			closeTo(t, "dx", x.Grad(), c.DX, 1e-14)
		})
	}
}
