package nn

import (
	"cmp"
	"fmt"
	"reflect"

	"github.com/hilbert-ml/hilbert/autograd"
	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/tensor"
)

// LayerNorm normalises the last axis to zero mean and unit (biased)
// variance, (x - mean) / sqrt(var + Eps), then scales by Weight [dim] and
// shifts by Bias [dim] when they are set (PyTorch's nn.LayerNorm with
// elementwise_affine; bias=False leaves Bias nil).
type LayerNorm struct {
	Weight *tensor.Tensor
	Bias   *tensor.Tensor
	// Eps is added to the variance, rounded once to the input's dtype;
	// zero means 1e-5 (PyTorch's default).
	Eps float64
}

// NewLayerNorm returns an affine LayerNorm over dim features (weight ones,
// bias zeros, or no bias when bias is false).
func NewLayerNorm(init *Init, dim int, bias bool) LayerNorm {
	n := LayerNorm{Weight: init.Ones(dim)}
	if bias {
		n.Bias = init.Zeros(dim)
	}
	return n
}

// Forward normalises x over its last axis (float32 or float64). A Weight
// or Bias that is not [dim] of x's last axis fails g naming the LayerNorm
// and the parameter.
func (n *LayerNorm) Forward(g *autograd.Graph, x *tensor.Tensor) *tensor.Tensor {
	name := moduleName("LayerNorm", n.Weight, "weight")
	if n.Weight == nil {
		name = moduleName("LayerNorm", n.Bias, "bias")
	}
	if g.Err() != nil || x == nil || x.Rank() == 0 {
		g.Fail(fmt.Errorf("nn: %s: input %v: want rank >= 1", name, tensor.ShapeOf(x)))
		return nil
	}
	// The weight's error first, else the bias's.
	if err := cmp.Or(checkVector(name, "weight", n.Weight, x), checkVector(name, "bias", n.Bias, x)); err != nil {
		g.Fail(err)
		return nil
	}
	return g.LayerNorm(x, n.Weight, n.Bias, cmp.Or(n.Eps, 1e-5))
}

// Activation selects an elementwise nonlinearity.
type Activation uint8

const (
	// ReLU is max(x, 0).
	ReLU Activation = iota + 1
	// GELU is the exact x * Phi(x), Phi the standard normal CDF.
	GELU
	// GELUTanh is GPT-2's approximation
	// x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))).
	GELUTanh
	// SiLU is x * sigmoid(x).
	SiLU
)

// activationNames are the activations' names.
var activationNames = map[Activation]string{ReLU: "relu", GELU: "gelu", GELUTanh: "gelu_tanh", SiLU: "silu"}

// String names the activation.
func (a Activation) String() string {
	if name, ok := activationNames[a]; ok {
		return name
	}
	return fmt.Sprintf("activation(%d)", uint8(a))
}

// Forward applies the activation to x.
func (a Activation) Forward(g *autograd.Graph, x *tensor.Tensor) *tensor.Tensor {
	if g.Err() != nil || x == nil {
		g.Fail(fmt.Errorf("nn: %v: nil input", a))
		return nil
	}
	if x.Released() || (x.DType() != device.Float32 && x.DType() != device.Float64) {
		g.Fail(fmt.Errorf("nn: %v: input %v: want a live float32 or float64 tensor", a, x))
		return nil
	}
	switch a {
	case ReLU:
		return g.Relu(x)
	case GELU:
		return g.GELU(x)
	case GELUTanh:
		return g.GELUTanh(x, nil)
	case SiLU:
		return g.Mul(x, g.Sigmoid(x))
	}
	g.Fail(fmt.Errorf("nn: unknown activation %d", uint8(a)))
	return nil
}

// Dropout zeroes each element with probability P in training mode and
// scales the survivors by 1/(1-P); in evaluation mode (Eval set, see
// SetTraining) it is the identity. The masks are Philox draws
// (device.Random) keyed by Seed at a counter that advances by the number
// of elements of each call, so a run is reproducible from the seed and
// every call draws a fresh mask.
type Dropout struct {
	// P is the drop probability, in [0, 1).
	P float64
	// Seed keys the masks.
	Seed uint64
	// Eval turns dropout off (the zero value is in training mode, as a
	// new PyTorch module is).
	Eval   bool
	offset uint64
}

// SetTraining puts the dropout in training (on) or evaluation mode.
func (d *Dropout) SetTraining(on bool) { d.Eval = !on }

// Training reports whether the dropout is in training mode.
func (d *Dropout) Training() bool { return !d.Eval }

// Forward returns x with dropout applied (x itself in evaluation mode or
// when P is 0).
func (d *Dropout) Forward(g *autograd.Graph, x *tensor.Tensor) *tensor.Tensor {
	if g.Err() != nil || x == nil {
		g.Fail(fmt.Errorf("nn: Dropout: nil input"))
		return nil
	}
	if d.P < 0 || d.P >= 1 {
		g.Fail(fmt.Errorf("nn: Dropout: probability %g, want [0, 1)", d.P))
		return nil
	}
	if d.Eval || d.P == 0 {
		return x
	}
	dt := x.DType()
	mask := g.Bernoulli(dt, d.Seed, d.offset, 1-d.P, x.Shape()...)
	if mask == nil {
		return nil
	}
	d.offset += uint64(x.Len())
	return g.Mul(g.Mul(x, mask), g.Constant(1/(1-d.P), dt))
}

// Trainable is a module with a train/eval mode (Dropout).
type Trainable interface {
	SetTraining(on bool)
}

// SetTraining sets the train (on) or eval mode of every Trainable in the
// module tree m (a pointer to a struct), walking the same fields as
// Parameters.
func SetTraining(m any, on bool) {
	eachTrainable(m, func(t Trainable) { t.SetTraining(on) })
}

// Evaluate puts every Trainable of the module tree m in eval mode and
// returns the function that puts each back in the mode it had: for a
// generation or a validation pass in the middle of training,
//
//	defer nn.Evaluate(model)()
//
// A Trainable that reports its mode (a Training() bool method, as Dropout
// has) gets that mode back; one that does not is put back in training mode.
func Evaluate(m any) (restore func()) {
	type was struct {
		t  Trainable
		on bool
	}
	var modes []was
	eachTrainable(m, func(t Trainable) {
		on := true
		if r, ok := t.(interface{ Training() bool }); ok {
			on = r.Training()
		}
		modes = append(modes, was{t, on})
		t.SetTraining(false)
	})
	return func() {
		for _, w := range modes {
			w.t.SetTraining(w.on)
		}
	}
}

// eachTrainable calls fn on every Trainable of the module tree m once.
func eachTrainable(m any, fn func(Trainable)) {
	walkTrainables(reflect.ValueOf(m), fn, map[uintptr]bool{})
}

var trainableType = reflect.TypeFor[Trainable]()

func walkTrainables(v reflect.Value, fn func(Trainable), seen map[uintptr]bool) {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() || v.Type() == tensorType || seen[v.Pointer()] {
			return
		}
		seen[v.Pointer()] = true
		if v.Type().Implements(trainableType) {
			fn(v.Interface().(Trainable))
			return
		}
		walkTrainables(v.Elem(), fn, seen)
	case reflect.Interface:
		if !v.IsNil() {
			walkTrainables(v.Elem(), fn, seen)
		}
	case reflect.Struct:
		if v.CanAddr() && v.Addr().Type().Implements(trainableType) {
			fn(v.Addr().Interface().(Trainable))
			return
		}
		t := v.Type()
		for i := range t.NumField() {
			if f := t.Field(i); f.IsExported() && f.Tag.Get("nn") != "-" {
				walkTrainables(v.Field(i), fn, seen)
			}
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			walkTrainables(v.Index(i), fn, seen)
		}
	}
}
