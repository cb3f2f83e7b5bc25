package nn

import (
	"math"
	"testing"

	"github.com/hilbert-ml/hilbert/autograd"
	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/tensor"
)

// TestTiedParameters: a tensor reachable under two names is one
// parameter, named by its first path, with the other name in Tied.
func TestTiedParameters(t *testing.T) {
	in := NewInit(cpu.New(), 1, 1)
	m := &struct {
		Embed Embedding
		Mid   Linear
		Head  Linear
	}{Embed: NewEmbedding(in, 5, 3), Mid: NewLinearBias(in, 3, 3)}
	m.Head.Weight = m.Embed.Weight
	ps := Parameters(m)
	var names []string
	for _, p := range ps {
		names = append(names, p.Name)
	}
	if want := []string{"embed.weight", "mid.weight", "mid.bias"}; len(names) != len(want) || names[0] != want[0] || names[1] != want[1] || names[2] != want[2] {
		t.Errorf("names %v, want %v", names, want)
	}
	if tied := Tied(m); len(tied) != 1 || tied["head.weight"] != "embed.weight" {
		t.Errorf("Tied %v, want map[head.weight:embed.weight]", tied)
	}
}

// TestTiedGradientAccumulates: a tied weight used as embedding and head
// gets one gradient, the sum of both uses (checked against the untied
// model's two gradients).
func TestTiedGradientAccumulates(t *testing.T) {
	dev := cpu.New()
	in := NewInit(dev, 3, 0.5)
	e := NewEmbedding(in, 6, 4)
	ids, _ := tensor.FromInt32(dev, []int32{1, 4, 4, 0}, 4)
	tgt, _ := tensor.FromInt32(dev, []int32{2, 3, 1, 5}, 4)
	run := func(head *tensor.Tensor) {
		g := autograd.New(dev)
		defer g.Reset()
		h := e.Forward(g, ids)
		loss := g.CrossEntropy(g.MatMul(h, head, false, true), tgt)
		if err := g.Backward(loss); err != nil {
			t.Fatal(err)
		}
	}
	copyW, _ := tensor.FromFloat32(dev, e.Weight.Float32s(), 6, 4)
	copyW.SetRequiresGrad(true)
	run(copyW)
	sum := e.Weight.Grad().Float32s()
	for i, v := range copyW.Grad().Float32s() {
		sum[i] += v
	}
	tensor.ZeroGrad([]*tensor.Tensor{e.Weight})
	run(e.Weight)
	for i, v := range e.Weight.Grad().Float32s() {
		if math.Abs(float64(v-sum[i])) > 1e-6 {
			t.Fatalf("tied grad[%d] = %g, want embedding + head grads %g", i, v, sum[i])
		}
	}
}

func f64(t *testing.T, data []float64, shape ...int) *tensor.Tensor {
	t.Helper()
	x, err := tensor.FromFloat64(cpu.New(), data, shape...)
	if err != nil {
		t.Fatal(err)
	}
	x.SetRequiresGrad(true)
	return x
}

func ramp(n int, scale, shift float64) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = scale*math.Sin(float64(i)*1.7+0.3) + shift
	}
	return out
}

// TestBlocksGradCheck checks LayerNorm, RMSNorm with gain and the
// activations in float64 against finite differences.
func TestBlocksGradCheck(t *testing.T) {
	dev := cpu.New()
	cases := []struct {
		name string
		f    func(g *autograd.Graph, in []*tensor.Tensor) *tensor.Tensor
		in   []*tensor.Tensor
	}{
		{"LayerNorm affine", func(g *autograd.Graph, in []*tensor.Tensor) *tensor.Tensor {
			n := LayerNorm{Weight: in[1], Bias: in[2]}
			return n.Forward(g, in[0])
		}, []*tensor.Tensor{f64(t, ramp(12, 2, 0.5), 3, 4), f64(t, ramp(4, 1, 1), 4), f64(t, ramp(4, 1, 0), 4)}},
		{"LayerNorm no bias", func(g *autograd.Graph, in []*tensor.Tensor) *tensor.Tensor {
			n := LayerNorm{Weight: in[1]}
			return n.Forward(g, in[0])
		}, []*tensor.Tensor{f64(t, ramp(10, 3, -1), 2, 5), f64(t, ramp(5, 1, 1), 5)}},
		{"ReLU", func(g *autograd.Graph, in []*tensor.Tensor) *tensor.Tensor { return ReLU.Forward(g, in[0]) },
			[]*tensor.Tensor{f64(t, ramp(9, 2, 0.1), 9)}},
		{"GELU", func(g *autograd.Graph, in []*tensor.Tensor) *tensor.Tensor { return GELU.Forward(g, in[0]) },
			[]*tensor.Tensor{f64(t, ramp(9, 3, 0), 9)}},
		{"GELUTanh", func(g *autograd.Graph, in []*tensor.Tensor) *tensor.Tensor { return GELUTanh.Forward(g, in[0]) },
			[]*tensor.Tensor{f64(t, ramp(9, 3, 0), 9)}},
		{"SiLU", func(g *autograd.Graph, in []*tensor.Tensor) *tensor.Tensor { return SiLU.Forward(g, in[0]) },
			[]*tensor.Tensor{f64(t, ramp(9, 3, 0), 9)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := autograd.GradCheck(dev, c.f, c.in, autograd.GradCheckOptions{RTol: 1e-5, ATol: 1e-8}); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestActivationValues compares each activation with its float64 closed
// form.
func TestActivationValues(t *testing.T) {
	xs := ramp(11, 3, 0.2)
	ref := map[Activation]func(float64) float64{
		ReLU: func(x float64) float64 { return math.Max(x, 0) },
		GELU: func(x float64) float64 { return x * (1 + math.Erf(x/math.Sqrt2)) / 2 },
		GELUTanh: func(x float64) float64 {
			return x / 2 * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x)))
		},
		SiLU: func(x float64) float64 { return x / (1 + math.Exp(-x)) },
	}
	for a, f := range ref {
		g := autograd.New(cpu.New())
		y := a.Forward(g, f64(t, xs, len(xs))).Float64s()
		for i, x := range xs {
			if d := math.Abs(y[i] - f(x)); d > 1e-12 {
				t.Errorf("%v(%g) = %g, want %g", a, x, y[i], f(x))
			}
		}
		g.Reset()
	}
}

// TestLayerNormValues: float64 closed form with weight and bias.
func TestLayerNormValues(t *testing.T) {
	xs, w, b := ramp(8, 2, 1), ramp(4, 1, 1), ramp(4, 0.5, 0)
	g := autograd.New(cpu.New())
	defer g.Reset()
	n := LayerNorm{Weight: f64(t, w, 4), Bias: f64(t, b, 4), Eps: 1e-5}
	y := n.Forward(g, f64(t, xs, 2, 4)).Float64s()
	for r := range 2 {
		row := xs[4*r : 4*r+4]
		var mean, v float64
		for _, x := range row {
			mean += x / 4
		}
		for _, x := range row {
			v += (x - mean) * (x - mean) / 4
		}
		for j, x := range row {
			want := (x-mean)/math.Sqrt(v+1e-5)*w[j] + b[j]
			if math.Abs(y[4*r+j]-want) > 1e-12 {
				t.Errorf("LayerNorm[%d,%d] = %g, want %g", r, j, y[4*r+j], want)
			}
		}
	}
}

type dropNet struct {
	In   Linear
	Drop Dropout
	Sub  []struct{ D Dropout }
}

// TestDropout: identity in eval mode (set once on a tree), reproducible
// from its seed in train mode, a fresh mask each call, about P dropped and
// the survivors scaled by 1/(1-P).
func TestDropout(t *testing.T) {
	dev := cpu.New()
	n := 4000
	ones := make([]float32, n)
	for i := range ones {
		ones[i] = 1
	}
	x, _ := tensor.FromFloat32(dev, ones, n)
	draw := func(d *Dropout) []float32 {
		g := autograd.New(dev)
		defer g.Reset()
		return append([]float32(nil), d.Forward(g, x).Float32s()...)
	}
	m := &dropNet{Drop: Dropout{P: 0.25, Seed: 9}, Sub: make([]struct{ D Dropout }, 2)}
	m.Sub[1].D = Dropout{P: 0.5, Seed: 9}
	SetTraining(m, false)
	if !m.Drop.Eval || !m.Sub[0].D.Eval || !m.Sub[1].D.Eval {
		t.Fatal("SetTraining(false) left a Dropout in training mode")
	}
	for i, v := range draw(&m.Sub[1].D) {
		if v != 1 {
			t.Fatalf("eval mode changed element %d to %g", i, v)
		}
	}
	SetTraining(m, true)
	if m.Drop.Eval || m.Sub[1].D.Eval {
		t.Fatal("SetTraining(true) left a Dropout in eval mode")
	}
	a1, a2 := draw(&m.Drop), draw(&m.Drop)
	again := Dropout{P: 0.25, Seed: 9}
	b1 := draw(&again)
	zeros, same := 0, 0
	for i := range a1 {
		if a1[i] != b1[i] {
			t.Fatalf("same seed, element %d: %g vs %g", i, a1[i], b1[i])
		}
		if a1[i] == a2[i] {
			same++
		}
		switch a1[i] {
		case 0:
			zeros++
		case 1 / 0.75:
		default:
			t.Fatalf("element %d = %g, want 0 or %g", i, a1[i], 1/0.75)
		}
	}
	if frac := float64(zeros) / float64(n); math.Abs(frac-0.25) > 0.03 {
		t.Errorf("dropped fraction %.3f, want 0.25", frac)
	}
	if same == n {
		t.Error("second call drew the same mask")
	}
}
