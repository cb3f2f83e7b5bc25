package nn

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/tensor"
)

var tensorType = reflect.TypeFor[*tensor.Tensor]()

// Parameters returns the parameters of module m (a pointer to a struct, or
// a struct) in a stable order: depth first, in field order, slice elements
// in index order. It sets each tensor's Name to its hierarchical path (see
// the package comment). Nil tensor fields are skipped.
//
// A tensor reachable under two names (a tied parameter, such as an LM
// head sharing the embedding's weight) is returned once, under the first
// name in that order, so an optimizer owns and steps it once; Tied lists
// the other names. m not being a struct makes Parameters panic: it is a
// programming error in the model's definition.
func Parameters(m any) []*tensor.Tensor {
	return walk(m).out
}

// Tied returns the second and later names of tied parameters of module m,
// each mapped to the name Parameters gives the tensor ("head.weight" ->
// "embed.weight"); it is empty when no tensor is reachable twice.
func Tied(m any) map[string]string {
	return walk(m).tied
}

func walk(m any) *walker {
	w := &walker{seen: map[*tensor.Tensor]string{}, active: map[uintptr]bool{}, tied: map[string]string{}}
	v := reflect.ValueOf(m)
	if reflect.Indirect(v).Kind() != reflect.Struct {
		panic(fmt.Sprintf("nn: Parameters of %T: want a struct or a pointer to one", m))
	}
	w.walk(v, "")
	return w
}

type walker struct {
	out    []*tensor.Tensor
	seen   map[*tensor.Tensor]string
	tied   map[string]string // alias -> first name
	active map[uintptr]bool  // struct pointers on the current path (cycles)
}

func join(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}

func (w *walker) walk(v reflect.Value, path string) {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return
		}
		if v.Type() == tensorType {
			t := v.Interface().(*tensor.Tensor)
			if prev, dup := w.seen[t]; dup {
				w.tied[path] = prev
				return
			}
			w.seen[t] = path
			t.Name = path
			w.out = append(w.out, t)
			return
		}
		if p := v.Pointer(); !w.active[p] {
			w.active[p] = true
			w.walk(v.Elem(), path)
			delete(w.active, p)
		}
	case reflect.Interface:
		if !v.IsNil() {
			w.walk(v.Elem(), path)
		}
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			tag := f.Tag.Get("nn")
			if tag == "-" {
				continue
			}
			name := tag
			if name == "" {
				if f.Anonymous {
					w.walk(v.Field(i), path) // embedded: promote its fields
					continue
				}
				name = strings.ToLower(f.Name)
			}
			w.walk(v.Field(i), join(path, name))
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			w.walk(v.Index(i), join(path, strconv.Itoa(i)))
		}
	}
}

// NumParams returns the total number of elements of params.
func NumParams(params []*tensor.Tensor) int {
	n := 0
	for _, p := range params {
		n += p.Len()
	}
	return n
}

// Init creates parameters on one device, tensors of DType (float32 by
// default) marked as requiring gradients: Normal draws i.i.d. from
// N(0, Std^2) with a seeded generator, NormalStd and Scaled with another
// std, Zeros and Ones fill. A float64 Init draws the same numbers as a
// float32 one of the same seed, unrounded.
// Errors are sticky: after a failed allocation every helper returns nil and Err
// reports the failure, so a constructor can build a whole model and check
// once.
type Init struct {
	Dev device.Device
	// Std is the standard deviation of Normal (the paper's 0.02).
	Std float64
	// DType is the parameters' dtype: Float32 (also the zero value) or
	// Float64 (on a backend that has it, the CPU).
	DType device.DType
	rng   *rand.Rand
	err   error
}

// NewInit returns an Init drawing from a PCG generator seeded with seed.
func NewInit(dev device.Device, seed uint64, std float64) *Init {
	return &Init{Dev: dev, Std: std, rng: rand.New(rand.NewPCG(seed, 0x68696c62657274))}
}

// Normal returns a new parameter of the given shape drawn from
// N(0, Std^2), or nil after an error.
func (in *Init) Normal(shape ...int) *tensor.Tensor {
	return in.NormalStd(in.Std, shape...)
}

// NormalStd returns a new parameter drawn from N(0, std^2), or nil after
// an error.
func (in *Init) NormalStd(std float64, shape ...int) *tensor.Tensor {
	return in.param(shape, func(dt device.DType) (*tensor.Tensor, error) {
		return tensor.RandNOf(in.Dev, dt, in.rng, 0, std, shape...)
	})
}

// Scaled returns a new parameter drawn from N(0, (scale*Std)^2), as GPT-2
// draws its residual projections with scale 1/sqrt(2*layers).
func (in *Init) Scaled(scale float64, shape ...int) *tensor.Tensor {
	return in.NormalStd(scale*in.Std, shape...)
}

// Zeros returns a new parameter of zeros, or nil after an error.
func (in *Init) Zeros(shape ...int) *tensor.Tensor {
	return in.param(shape, func(dt device.DType) (*tensor.Tensor, error) { return tensor.NewOf(in.Dev, dt, shape...) })
}

// Ones returns a new parameter of ones, or nil after an error.
func (in *Init) Ones(shape ...int) *tensor.Tensor {
	t := in.Zeros(shape...)
	if t != nil {
		in.Dev.Fill(t.Buffer(), 1)
	}
	return t
}

// param returns a new parameter of the given shape, made by create in the
// Init's dtype and marked as requiring gradients, or nil after an error
// (recorded with the shape).
func (in *Init) param(shape []int, create func(device.DType) (*tensor.Tensor, error)) *tensor.Tensor {
	if in.err != nil {
		return nil
	}
	dt, err := in.dtype()
	var t *tensor.Tensor
	if err == nil {
		t, err = create(dt)
	}
	if err != nil {
		in.err = fmt.Errorf("nn: init %v: %w", tensor.Shape(shape), err)
		return nil
	}
	t.SetRequiresGrad(true)
	return t
}

// dtype returns the parameters' dtype, refusing one that is not a float
// of full width.
func (in *Init) dtype() (device.DType, error) {
	switch in.DType {
	case 0, device.Float32:
		return device.Float32, nil
	case device.Float64:
		return device.Float64, nil
	}
	return 0, fmt.Errorf("Init.DType is %v; parameters are float32 or float64", in.DType)
}

// Err returns the first error Normal met, or nil.
func (in *Init) Err() error { return in.err }

// fail records err as the Init's error if none is recorded yet.
func (in *Init) fail(err error) {
	if in.err == nil {
		in.err = err
	}
}
