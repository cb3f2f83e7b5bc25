package nn

import (
	"strings"
	"testing"

	"github.com/hilbert-ml/hilbert/autograd"
	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/tensor"
)

// TestLayerErrorsNameTheLayer: bad input to a layer is an error naming
// the layer by its parameters' path, the parameter and the shapes, not
// the op the layer is composed of (MatMul, Mul).
func TestLayerErrorsNameTheLayer(t *testing.T) {
	dev := cpu.New()
	in := NewInit(dev, 1, 0.1)
	var m struct {
		Proj Linear
		LN   LayerNorm `nn:"ln"`
		Norm RMSNorm
	}
	m.Proj = NewLinearBias(in, 4, 8)
	m.LN = NewLayerNorm(in, 7, true)
	m.Norm = NewRMSNorm(in, 3)
	Parameters(&m)
	x := func(shape ...int) *tensor.Tensor { return randInput(t, 2, shape...) }
	ids, _ := tensor.FromInt32(dev, []int32{1, 2}, 2)
	x64 := input64(t, 3, 1, 2, 4)
	for _, c := range []struct {
		name string
		run  func(g *autograd.Graph)
		want []string
		not  string
	}{
		{"Linear width", func(g *autograd.Graph) { m.Proj.Forward(g, x(2, 5)) },
			[]string{"nn: Linear proj (4 -> 8 features): input [2 5] has 5 features (weight proj.weight [8 4])"}, "MatMul"},
		{"Linear dtype", func(g *autograd.Graph) { m.Proj.Forward(g, x64) },
			[]string{"Linear proj: input [2 4] is float64, its weight proj.weight [8 4] float32"}, "MatMul"},
		{"Linear nil", func(g *autograd.Graph) { m.Proj.Forward(g, nil) }, []string{"Linear proj: nil input"}, ""},
		{"Linear unnamed", func(g *autograd.Graph) { l := NewLinear(in, 3, 2); l.Forward(g, x(1, 4)) },
			[]string{"nn: Linear (3 -> 2 features): input [1 4] has 4 features (weight [2 3])"}, ""},
		{"LayerNorm weight", func(g *autograd.Graph) { m.LN.Forward(g, x(2, 8)) },
			[]string{"nn: LayerNorm ln: weight ln.weight [7] for input [2 8]: want [8]"}, "Mul"},
		{"RMSNorm gain", func(g *autograd.Graph) { m.Norm.Forward(g, x(2, 4)) },
			[]string{"nn: RMSNorm norm: gain norm.gain [3] for input [2 4]: want [4]"}, "Mul"},
		{"activation of ids", func(g *autograd.Graph) { GELUTanh.Forward(g, ids) },
			[]string{"nn: gelu_tanh: input", "int32", "want a live float32 or float64"}, "Mul"},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := autograd.New(dev)
			defer g.Reset()
			c.run(g)
			err := g.Err()
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if c.not != "" && strings.Contains(err.Error(), c.not) {
				t.Errorf("error %q names the internal op %s", err, c.not)
			}
		})
	}
	// Right input still runs.
	g := autograd.New(dev)
	defer g.Reset()
	if y := m.Proj.Forward(g, x(3, 2, 4)); y == nil || !y.SameShape(mustShape(t, 3, 2, 8)) {
		t.Fatalf("Linear of [3 2 4]: %v, %v", y, g.Err())
	}
}

func mustShape(t *testing.T, shape ...int) *tensor.Tensor {
	t.Helper()
	x, err := tensor.New(cpu.New(), shape...)
	if err != nil {
		t.Fatal(err)
	}
	return x
}
