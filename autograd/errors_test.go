package autograd

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/tensor"
)

// otherDevice is a second CPU device with its own identity, to test that
// mixing devices is refused.
type otherDevice struct{ *cpu.Device }

func (otherDevice) Name() string { return "cpu:other" }

func mustTensor(t *testing.T, shape ...int) *tensor.Tensor {
	t.Helper()
	x, err := tensor.New(cpu.New(), shape...)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func TestBadUseErrors(t *testing.T) {
	dev := cpu.New()
	other := otherDevice{dev}
	ids, _ := tensor.FromInt32(dev, []int32{0, 5}, 2)
	neg, _ := tensor.FromInt32(dev, []int32{-1, 0}, 2)
	cases := []struct {
		name string
		run  func(g *Graph)
		want []string // substrings of the error
	}{
		{"matmul inner", func(g *Graph) { g.MatMul(mustTensor(t, 2, 3), mustTensor(t, 4, 5), false, false) },
			[]string{"MatMul", "[2 3]", "[4 5]"}},
		{"matmul rank", func(g *Graph) { g.MatMul(mustTensor(t, 3), mustTensor(t, 3, 3), false, false) },
			[]string{"MatMul", "[3]", "rank"}},
		{"batched mismatch", func(g *Graph) { g.MatMul(mustTensor(t, 2, 3, 4), mustTensor(t, 3, 4, 5), false, false) },
			[]string{"MatMul", "[2 3 4]", "[3 4 5]"}},
		{"add shapes", func(g *Graph) { g.Add(mustTensor(t, 2, 3), mustTensor(t, 3, 2)) },
			[]string{"Add", "[2 3]", "[3 2]"}},
		{"wrong device", func(g *Graph) {
			y, _ := tensor.New(other, 2, 3)
			g.Add(mustTensor(t, 2, 3), y)
		}, []string{"Add", "cpu:other"}},
		{"embedding id out of range", func(g *Graph) { g.Embedding(mustTensor(t, 5, 4), ids) },
			[]string{"Embedding", "[0, 5]", "[0, 5)"}},
		{"negative target", func(g *Graph) { g.CrossEntropy(mustTensor(t, 2, 7), neg) },
			[]string{"CrossEntropy", "[-1, 0]"}},
		{"targets count", func(g *Graph) { g.CrossEntropy(mustTensor(t, 3, 7), ids) },
			[]string{"CrossEntropy", "2 targets", "[3 7]"}},
		{"float targets", func(g *Graph) { g.CrossEntropy(mustTensor(t, 2, 7), mustTensor(t, 2)) },
			[]string{"CrossEntropy", "float32", "int32"}},
		{"attention shapes", func(g *Graph) {
			g.Attention(mustTensor(t, 1, 2, 3, 4), mustTensor(t, 1, 2, 3, 4), mustTensor(t, 1, 2, 3, 2), 1)
		},
			[]string{"Attention", "[1 2 3 2]"}},
		{"rope tables too short", func(g *Graph) {
			c, s, _ := RoPETables(dev, device.Float32, 2, 4, 10000)
			g.RoPE(mustTensor(t, 1, 3, 1, 4), c, s)
		}, []string{"RoPE", "[2 2]", "[1 3 1 4]"}},
		{"reshape count", func(g *Graph) { g.Reshape(mustTensor(t, 2, 3), 4, 2) },
			[]string{"Reshape", "[2 3]", "[4 2]"}},
		{"linear ce dims", func(g *Graph) { g.LinearCrossEntropy(mustTensor(t, 2, 3), mustTensor(t, 7, 4), ids, 0) },
			[]string{"LinearCrossEntropy", "[2 3]", "[7 4]"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := New(dev)
			c.run(g)
			err := g.Err()
			if err == nil {
				t.Fatal("no error recorded")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			// Later ops are no-ops returning nil, and Backward reports the error.
			if y := g.Add(mustTensor(t, 1), mustTensor(t, 1)); y != nil {
				t.Error("op after an error returned a tensor")
			}
			if berr := g.Backward(mustTensor(t, 1)); !errors.Is(berr, err) && berr.Error() != err.Error() {
				t.Errorf("Backward returned %v, want the recorded %v", berr, err)
			}
		})
	}
}

func TestBackwardTwiceIsAnError(t *testing.T) {
	dev := cpu.New()
	w, _ := tensor.FromFloat32(dev, []float32{1, 2}, 2)
	w.SetRequiresGrad(true)
	g := New(dev)
	loss := g.Sum(g.Mul(w, w))
	if err := g.Backward(loss); err != nil {
		t.Fatal(err)
	}
	if err := g.Backward(loss); !errors.Is(err, ErrFreed) {
		t.Fatalf("second Backward: got %v, want ErrFreed", err)
	}
	if y := g.Add(w, w); y != nil || g.Err() == nil || !strings.Contains(g.Err().Error(), "freed") {
		t.Fatalf("op on a freed graph: got %v, err %v", y, g.Err())
	}
	// The loss stays readable until Reset.
	if got := loss.Item(); got != 5 {
		t.Fatalf("loss after Backward = %v, want 5", got)
	}
	g.Reset()
	loss = g.Sum(g.Mul(w, w))
	if err := g.Backward(loss); err != nil {
		t.Fatalf("after Reset: %v", err)
	}
	// Gradients accumulate across backward passes: 2w twice.
	if got := w.Grad().Float32s(); got[0] != 4 || got[1] != 8 {
		t.Fatalf("accumulated grad = %v, want [4 8]", got)
	}
}

func TestBackwardNeedsScalarWithGrad(t *testing.T) {
	dev := cpu.New()
	g := New(dev)
	x := mustTensor(t, 2, 2)
	if err := g.Backward(g.Add(x, x)); err == nil || !strings.Contains(err.Error(), "scalar") {
		t.Errorf("non-scalar loss: %v", err)
	}
	g.Reset()
	if err := g.Backward(g.Sum(x)); err == nil || !strings.Contains(err.Error(), "requires grad") {
		t.Errorf("loss without grad: %v", err)
	}
	g.Reset()
	g.SetNoGrad(true)
	x.SetRequiresGrad(true)
	if err := g.Backward(g.Sum(x)); err == nil || !strings.Contains(err.Error(), "no-grad") {
		t.Errorf("no-grad graph: %v", err)
	}
}

func TestNoGradRecordsNothing(t *testing.T) {
	dev := cpu.New()
	w, _ := tensor.FromFloat32(dev, []float32{1, 2, 3}, 3)
	w.SetRequiresGrad(true)
	g := New(dev)
	g.SetNoGrad(true)
	y := g.Mul(w, w)
	if y.RequiresGrad() || len(g.nodes) != 0 {
		t.Fatalf("no-grad recorded %d nodes", len(g.nodes))
	}
}

// TestBackwardRefusesModifiedSavedTensor is the example: a value
// written into an input between the forward pass and Backward used to give
// the gradient [5 -7] instead of [1 1]; now Backward names the op and the
// tensor. Writing into an input whose value no backward reads (Add's) is
// harmless and allowed.
func TestBackwardRefusesModifiedSavedTensor(t *testing.T) {
	dev := cpu.New()
	a, _ := tensor.FromFloat32(dev, []float32{2, 3}, 2)
	a.SetRequiresGrad(true)
	b, _ := tensor.FromFloat32(dev, []float32{1, 1}, 2)
	b.Name = "scale"
	g := New(dev)
	loss := g.Sum(g.Mul(a, b))
	b.SetFloat32([]float32{5, -7})
	err := g.Backward(loss)
	if err == nil {
		t.Fatalf("Backward after modifying a saved input gave gradient %v and no error", a.Grad().Float32s())
	}
	for _, w := range []string{"Mul", "input 1", "scale", "modified in place", "version 0, now 1"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not mention %q", err, w)
		}
	}
	if err := g.Backward(loss); !errors.Is(err, ErrFreed) {
		t.Errorf("Backward after the refused one: %v, want ErrFreed", err)
	}

	g.Reset()
	a.SetGrad(nil)
	loss = g.Sum(g.Add(a, b))
	b.SetFloat32([]float32{0, 0})
	if err := g.Backward(loss); err != nil {
		t.Fatalf("modifying an input of Add: %v", err)
	}
	if got := a.Grad().Float32s(); got[0] != 1 || got[1] != 1 {
		t.Fatalf("grad %v, want [1 1]", got)
	}
}

// TestUseAfterReset: a graph's output read after Reset panics saying it
// was released (not a nil dereference), and feeding it to an op records an
// error that says so.
func TestUseAfterReset(t *testing.T) {
	dev := cpu.New()
	x, _ := tensor.FromFloat32(dev, []float32{1, 2}, 2)
	g := New(dev)
	y := g.Scale(x, 2)
	z := g.Reshape(y, 1, 2)
	g.Reset()
	for name, use := range map[string]func(){
		"Len":           func() { y.Len() },
		"Float32s":      func() { y.Float32s() },
		"view Float32s": func() { z.Float32s() },
	} {
		func() {
			defer func() {
				if msg := fmt.Sprint(recover()); !strings.Contains(msg, "released") || !strings.Contains(msg, "Reset") {
					t.Errorf("%s after Reset: panic %q", name, msg)
				}
			}()
			use()
		}()
	}
	g.Scale(z, 3)
	if err := g.Err(); err == nil || !strings.Contains(err.Error(), "Scale") || !strings.Contains(err.Error(), "released") {
		t.Errorf("op on a released tensor: %v", err)
	}
}

// TestComposedOpErrorsNameTheOp: a composed op's bad input is an error
// naming the op called, not the ops it is built from (Softmax(x, -3) used
// to report LogSumExp; GELU of ids reported Mul).
func TestComposedOpErrorsNameTheOp(t *testing.T) {
	dev := cpu.New()
	ids, _ := tensor.FromInt32(dev, []int32{1, 2}, 2)
	for _, c := range []struct {
		name string
		run  func(g *Graph)
		want string
		not  string
	}{
		{"Softmax axis", func(g *Graph) { g.Softmax(mustTensor(t, 2, 3), -3) }, "autograd: Softmax: axis -3 of shape [2 3] (want a non-empty axis in [-2, 2))", "LogSumExp"},
		{"LogSoftmax axis", func(g *Graph) { g.LogSoftmax(mustTensor(t, 2, 3), 2) }, "autograd: LogSoftmax: axis 2 of shape [2 3]", "LogSumExp"},
		{"LogSumExp empty axis", func(g *Graph) { g.LogSumExp(mustTensor(t, 2, 0), 1, false) }, "autograd: LogSumExp: axis 1 of shape [2 0]", ""},
		{"VarianceAxis axis", func(g *Graph) { g.VarianceAxis(mustTensor(t, 4), 1, false) }, "autograd: VarianceAxis: axis 1 of shape [4]", "MeanAxis"},
		{"Softmax of ids", func(g *Graph) { g.Softmax(ids, 0) }, "autograd: Softmax: dtype int32", "Exp"},
		{"GELU of ids", func(g *Graph) { g.GELU(ids) }, "autograd: GELU: dtype int32", "Mul"},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := New(dev)
			c.run(g)
			err := g.Err()
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
			if c.not != "" && strings.Contains(err.Error(), c.not) {
				t.Errorf("error %q names the internal op %s", err, c.not)
			}
		})
	}
}
