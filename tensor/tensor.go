// Package tensor is Hilbert's n-dimensional array: a contiguous row-major
// view of a device buffer with a shape and a dtype, plus the pooled
// allocation that lets a training loop reuse memory from step to step.
//
// A Tensor knows its device; kernels are dispatched to it through the
// device.Device interface, so nothing here knows which backend runs.
// Differentiable operations live in package autograd; this package only
// holds data, and the gradient slot that autograd fills.
//
// This package depends only on device/.
package tensor

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/hilbert-ml/hilbert/device"
)

// MaxRank is the largest number of dimensions a tensor may have.
const MaxRank = 6

// Tensor is a contiguous row-major array on one device.
//
// A tensor made by New or a creation function owns its buffer; views made
// by Reshape share it. Pooled tensors (NewPooled) return their buffer to
// the device's pool on Release; using the tensor, or any view of it,
// afterwards panics with a message that says so.
//
// Every tensor has a version, shared with its views, that each in-place
// write through this package's API increments (SetFloat32, SetFloat64,
// SetInt32; code that writes through Buffer calls MarkModified). Autograd
// remembers the versions of the tensors an op saved for its backward pass
// and refuses to differentiate through one that changed.
//
// The setters return an error for data of the wrong length or a tensor of
// the wrong kind. The readers panic when misused (Item of a tensor of more
// than one element, Int32s of a float tensor, Float32s or Float64s of an
// int32 one), naming the tensor and the reader to use: like an index out
// of range, a programming error.
type Tensor struct {
	dev    device.Device
	buf    device.Buffer
	shape  [MaxRank]int
	rank   int
	pooled bool

	// base is the tensor whose storage a view shares (nil for the tensor
	// that holds it); version and released live on the base.
	base     *Tensor
	version  uint64
	released bool

	// Name is an optional label used in error messages (parameter names).
	Name string

	requiresGrad bool
	grad         *Tensor
	origin       uint64 // MarkOutput's recording id; 0 for a leaf

	// For Int32 tensors: bounds of the values (from host data, or declared
	// by the op that wrote them), so that index ops can refuse out-of-range
	// ids before a kernel runs. They hold while the storage's version is
	// rangeVersion: an in-place write (MarkModified) makes them unknown.
	minIndex, maxIndex int32
	rangeKnown         bool
	rangeVersion       uint64
}

// Shape is a tensor's dimensions.
type Shape []int

// Numel returns the number of elements of a shape (1 for rank 0).
func (s Shape) Numel() int {
	n := 1
	for _, d := range s {
		n *= d
	}
	return n
}

// String formats a shape as [2 3 4].
func (s Shape) String() string {
	parts := make([]string, len(s))
	for i, d := range s {
		parts[i] = fmt.Sprint(d)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// ShapeOf formats t's shape for an error message about an argument that
// may be missing: [2 3 4], or nil for a nil tensor.
func ShapeOf(t *Tensor) string {
	if t == nil {
		return "nil"
	}
	return t.Shape().String()
}

func checkShape(op string, shape []int) error {
	if len(shape) > MaxRank {
		return fmt.Errorf("tensor: %s: rank %d exceeds the maximum %d (shape %v)", op, len(shape), MaxRank, Shape(shape))
	}
	for _, d := range shape {
		if d < 0 {
			return fmt.Errorf("tensor: %s: negative dimension in shape %v", op, Shape(shape))
		}
	}
	return nil
}

func newTensor(dev device.Device, buf device.Buffer, shape []int) *Tensor {
	t := &Tensor{dev: dev, buf: buf, rank: len(shape)}
	copy(t.shape[:], shape)
	return t
}

// New returns a zeroed float32 tensor of the given shape on dev.
func New(dev device.Device, shape ...int) (*Tensor, error) {
	return NewOf(dev, device.Float32, shape...)
}

// NewOf returns a zeroed tensor of the given dtype and shape on dev.
func NewOf(dev device.Device, dtype device.DType, shape ...int) (*Tensor, error) {
	if err := checkShape("New", shape); err != nil {
		return nil, err
	}
	buf, err := dev.Alloc(dtype, Shape(shape).Numel())
	if err != nil {
		return nil, fmt.Errorf("tensor: New %v %v on %s: %w", dtype, Shape(shape), dev.Name(), err)
	}
	return newTensor(dev, buf, shape), nil
}

// FromFloat32 copies host data into a new float32 tensor of the given
// shape; len(data) must equal the shape's element count.
func FromFloat32(dev device.Device, data []float32, shape ...int) (*Tensor, error) {
	if err := checkShape("FromFloat32", shape); err != nil {
		return nil, err
	}
	if n := Shape(shape).Numel(); n != len(data) {
		return nil, fmt.Errorf("tensor: FromFloat32: %d values for shape %v (want %d)", len(data), Shape(shape), n)
	}
	t, err := New(dev, shape...)
	if err != nil {
		return nil, err
	}
	dev.CopyFromHost(t.buf, data)
	return t, nil
}

// FromInt32 copies host token ids into a new int32 tensor and records
// their range, so index ops can check them against a table's size.
func FromInt32(dev device.Device, data []int32, shape ...int) (*Tensor, error) {
	if err := checkShape("FromInt32", shape); err != nil {
		return nil, err
	}
	if n := Shape(shape).Numel(); n != len(data) {
		return nil, fmt.Errorf("tensor: FromInt32: %d values for shape %v (want %d)", len(data), Shape(shape), n)
	}
	t, err := NewOf(dev, device.Int32, shape...)
	if err != nil {
		return nil, err
	}
	if err := t.SetInt32(data); err != nil {
		return nil, err
	}
	t.version, t.rangeVersion = 0, 0 // the first write is the creation
	return t, nil
}

// FromFloat64 copies host data into a new float64 tensor of the given
// shape (on a backend that supports float64: the CPU).
func FromFloat64(dev device.Device, data []float64, shape ...int) (*Tensor, error) {
	if err := checkShape("FromFloat64", shape); err != nil {
		return nil, err
	}
	if n := Shape(shape).Numel(); n != len(data) {
		return nil, fmt.Errorf("tensor: FromFloat64: %d values for shape %v (want %d)", len(data), Shape(shape), n)
	}
	t, err := NewOf(dev, device.Float64, shape...)
	if err != nil {
		return nil, err
	}
	dev.CopyFloat64FromHost(t.buf, data)
	return t, nil
}

// SetInt32 overwrites an int32 tensor with host data of the same length
// and records its range. It lets a training loop reuse one input tensor.
// A tensor of another dtype, or data of another length, is an error and
// leaves t unchanged.
func (t *Tensor) SetInt32(data []int32) error {
	if err := t.checkSet("SetInt32", len(data), true); err != nil {
		return err
	}
	t.dev.CopyInt32FromHost(t.buf, data)
	t.MarkModified()
	t.SetIndexRange(int32Range(data))
	return nil
}

// checkSet reports why op cannot write n host values into t: an int32
// tensor takes SetInt32 only (ints), a float one the float setters, and
// n must be t's length.
func (t *Tensor) checkSet(op string, n int, ints bool) error {
	t.live(op)
	if isInt := t.DType() == device.Int32; isInt != ints {
		want := "a float tensor is written with SetFloat32 or SetFloat64"
		if isInt {
			want = "an int32 tensor is written with SetInt32"
		}
		return fmt.Errorf("tensor: %s into %v %s: %s", op, t.DType(), t.describe(), want)
	}
	if n != t.Len() {
		return fmt.Errorf("tensor: %s: %d values into %s of %d elements (want exactly %d)", op, n, t.describe(), t.Len(), t.Len())
	}
	return nil
}

// int32Range returns the smallest and largest of v (MaxInt32, MinInt32
// for none).
func int32Range(v []int32) (lo, hi int32) {
	lo, hi = int32(math.MaxInt32), int32(math.MinInt32)
	for _, x := range v {
		lo, hi = min(lo, x), max(hi, x)
	}
	return lo, hi
}

// SetIndexRange records that every value of the int32 tensor t lies in
// [lo, hi], as an op that writes indices on the device knows (ArgMaxAxis
// writes [0, n)); index ops then check ids against it without reading
// them back. The record holds until t's storage is next modified in place
// (MarkModified). It panics for a tensor that is not int32.
func (t *Tensor) SetIndexRange(lo, hi int32) {
	if t.DType() != device.Int32 {
		panic(fmt.Sprintf("tensor: SetIndexRange of a %v tensor %v", t.DType(), t.Shape()))
	}
	t.minIndex, t.maxIndex, t.rangeKnown, t.rangeVersion = lo, hi, true, t.Version()
}

// ComputeIndexRange reads the int32 tensor t back to the host (waiting for
// the device), records its range with SetIndexRange and returns it. Index
// ops call it for ids written on the device with no recorded range.
func (t *Tensor) ComputeIndexRange() (lo, hi int32) {
	lo, hi = int32Range(t.Int32s())
	t.SetIndexRange(lo, hi)
	return lo, hi
}

// SetFloat32 overwrites a float tensor with host data of the same length
// (rounded to its dtype). An int32 tensor, or data of another length, is
// an error and leaves t unchanged.
func (t *Tensor) SetFloat32(data []float32) error {
	if err := t.checkSet("SetFloat32", len(data), false); err != nil {
		return err
	}
	t.dev.CopyFromHost(t.buf, data)
	t.MarkModified()
	return nil
}

// SetFloat64 overwrites a float tensor with host float64 data of the same
// length (rounded to its dtype), with SetFloat32's errors.
func (t *Tensor) SetFloat64(data []float64) error {
	if err := t.checkSet("SetFloat64", len(data), false); err != nil {
		return err
	}
	t.dev.CopyFloat64FromHost(t.buf, data)
	t.MarkModified()
	return nil
}

// root returns the tensor holding the storage state of t.
func (t *Tensor) root() *Tensor {
	if t.base != nil {
		return t.base
	}
	return t
}

// Version returns the number of in-place writes to t's storage (through
// t or any view of it) so far.
func (t *Tensor) Version() uint64 { return t.root().version }

// MarkModified records an in-place write to t's storage. The setters of
// this package call it; code that writes through Buffer (an optimizer
// step, a kernel called directly) calls it so that autograd sees the
// write.
func (t *Tensor) MarkModified() { t.root().version++ }

// Released reports whether t's buffer went back to the pool (Release of
// t or of a view that owned it, as a graph's Reset and Backward do).
func (t *Tensor) Released() bool { return t.buf == nil || t.root().released }

// live panics, naming op, when t's buffer was released.
func (t *Tensor) live(op string) {
	if t.Released() {
		panic(fmt.Sprintf("tensor: %s of %s after its buffer was released (autograd's Reset and Backward release the tensors a graph made: call Keep on one to use it afterwards)", op, t.describe()))
	}
}

// describe names a tensor by name and shape without touching its buffer.
func (t *Tensor) describe() string {
	name := ""
	if t.Name != "" {
		name = " " + t.Name
	}
	return fmt.Sprintf("Tensor%s(%v on %s)", name, t.Shape(), t.dev.Name())
}

// IndexRange reports bounds of the ids of an int32 tensor: the smallest
// and largest value of the host data it was made from (FromInt32,
// SetInt32), or the range an op recorded (SetIndexRange,
// ComputeIndexRange). ok is false when no range was recorded, or the
// storage was modified in place since.
func (t *Tensor) IndexRange() (lo, hi int32, ok bool) {
	if !t.rangeKnown || t.rangeVersion != t.Version() {
		return 0, 0, false
	}
	return t.minIndex, t.maxIndex, true
}

// RandN returns a float32 tensor of i.i.d. normal values with the given
// mean and standard deviation, drawn from rng on the host.
func RandN(dev device.Device, rng *rand.Rand, mean, std float64, shape ...int) (*Tensor, error) {
	return RandNOf(dev, device.Float32, rng, mean, std, shape...)
}

// RandNOf is RandN for a float32 or float64 tensor: the values
// mean + std*z are computed in float64 and rounded once to dtype, so
// tensors of both dtypes drawn from generators in one state hold the same
// numbers up to that rounding.
func RandNOf(dev device.Device, dtype device.DType, rng *rand.Rand, mean, std float64, shape ...int) (*Tensor, error) {
	switch dtype {
	case device.Float32:
		data := make([]float32, Shape(shape).Numel())
		for i := range data {
			data[i] = float32(mean + std*rng.NormFloat64())
		}
		return FromFloat32(dev, data, shape...)
	case device.Float64:
		data := make([]float64, Shape(shape).Numel())
		for i := range data {
			data[i] = mean + std*rng.NormFloat64()
		}
		return FromFloat64(dev, data, shape...)
	}
	return nil, fmt.Errorf("tensor: RandN of dtype %v (want float32 or float64)", dtype)
}

// Device returns the device holding the tensor.
func (t *Tensor) Device() device.Device { return t.dev }

// Buffer returns the device buffer behind the tensor (for kernels). It
// panics when the buffer was released.
func (t *Tensor) Buffer() device.Buffer {
	t.live("Buffer")
	return t.buf
}

// DType returns the element type.
func (t *Tensor) DType() device.DType {
	t.live("DType")
	return t.buf.DType()
}

// Shape returns a copy of the dimensions.
func (t *Tensor) Shape() Shape { return append(Shape(nil), t.shape[:t.rank]...) }

// Rank returns the number of dimensions.
func (t *Tensor) Rank() int { return t.rank }

// Dim returns dimension i; negative i counts from the end.
func (t *Tensor) Dim(i int) int {
	if i < 0 {
		i += t.rank
	}
	return t.shape[i]
}

// Len returns the number of elements.
func (t *Tensor) Len() int {
	t.live("Len")
	return t.buf.Len()
}

// SameShape reports whether t and u have identical shapes.
func (t *Tensor) SameShape(u *Tensor) bool {
	return t.rank == u.rank && t.shape == u.shape
}

// Float32s copies a float tensor to a new host slice (rounding float64
// values). It panics for an int32 tensor, saying to read it with Int32s.
func (t *Tensor) Float32s() []float32 {
	t.readable("Float32s", false)
	out := make([]float32, t.Len())
	t.dev.CopyToHost(out, t.buf)
	return out
}

// Float64s copies a float tensor to a new host slice of float64 (exact).
// It panics for an int32 tensor, saying to read it with Int32s.
func (t *Tensor) Float64s() []float64 {
	t.readable("Float64s", false)
	out := make([]float64, t.Len())
	t.dev.CopyFloat64ToHost(out, t.buf)
	return out
}

// Int32s copies an int32 tensor to a new host slice. It panics for a
// float tensor, saying to read it with Float32s or Float64s (or to Cast
// it to int32 first).
func (t *Tensor) Int32s() []int32 {
	t.readable("Int32s", true)
	out := make([]int32, t.Len())
	t.dev.CopyInt32ToHost(out, t.buf)
	return out
}

// Item returns the single value of a one-element float tensor (a loss).
// It panics for a tensor of another size, or an int32 one, naming it and
// the method that reads it: a programming error, like an index out of
// range.
func (t *Tensor) Item() float32 {
	t.readable("Item", false)
	if t.Len() != 1 {
		panic(fmt.Sprintf("tensor: Item of %s with %d elements: Item reads a one-element tensor; read this one with Float32s or Float64s", t.String(), t.Len()))
	}
	var v [1]float32
	t.dev.CopyToHost(v[:], t.buf)
	return v[0]
}

// Item64 is Item in float64: the single value of a one-element float
// tensor, exact for float32 and float64 alike (a float64 run's loss).
func (t *Tensor) Item64() float64 {
	t.readable("Item64", false)
	if t.Len() != 1 {
		panic(fmt.Sprintf("tensor: Item64 of %s with %d elements: Item64 reads a one-element tensor; read this one with Float32s or Float64s", t.String(), t.Len()))
	}
	var v [1]float64
	t.dev.CopyFloat64ToHost(v[:], t.buf)
	return v[0]
}

// readable panics, naming op and the right reader, when t is released or
// of the wrong kind for op: int32 for Int32s (ints), float for the others.
func (t *Tensor) readable(op string, ints bool) {
	t.live(op)
	switch isInt := t.DType() == device.Int32; {
	case isInt && !ints:
		panic(fmt.Sprintf("tensor: %s of int32 %s: read an int32 tensor with Int32s (or Cast it to a float dtype first)", op, t.describe()))
	case !isInt && ints:
		panic(fmt.Sprintf("tensor: %s of %v %s: read a float tensor with Float32s or Float64s (or Cast it to int32 first)", op, t.DType(), t.describe()))
	}
}

// Reshape returns a view with a new shape of the same element count. One
// dimension may be -1 and is inferred.
func (t *Tensor) Reshape(shape ...int) (*Tensor, error) {
	t.live("Reshape")
	infer, known := -1, 1
	for i, d := range shape {
		if d == -1 {
			if infer >= 0 {
				return nil, fmt.Errorf("tensor: Reshape %v to %v: more than one -1", t.Shape(), Shape(shape))
			}
			infer = i
			continue
		}
		known *= d
	}
	var s [MaxRank]int
	if len(shape) > MaxRank {
		return nil, checkShape("Reshape", shape)
	}
	copy(s[:], shape)
	if infer >= 0 {
		if known == 0 || t.Len()%known != 0 {
			return nil, fmt.Errorf("tensor: Reshape %v to %v: %d elements do not divide", t.Shape(), Shape(shape), t.Len())
		}
		s[infer] = t.Len() / known
	}
	if err := checkShape("Reshape", s[:len(shape)]); err != nil {
		return nil, err
	}
	if Shape(s[:len(shape)]).Numel() != t.Len() {
		return nil, fmt.Errorf("tensor: Reshape %v (%d elements) to %v", t.Shape(), t.Len(), Shape(shape))
	}
	v := &Tensor{dev: t.dev, buf: t.buf, shape: s, rank: len(shape), Name: t.Name, base: t.root(),
		minIndex: t.minIndex, maxIndex: t.maxIndex, rangeKnown: t.rangeKnown, rangeVersion: t.rangeVersion}
	return v, nil
}

// RequiresGrad reports whether gradients flow to this tensor.
func (t *Tensor) RequiresGrad() bool { return t.requiresGrad }

// SetRequiresGrad marks a tensor (typically a parameter) as one whose
// gradient autograd computes and accumulates into Grad.
func (t *Tensor) SetRequiresGrad(on bool) { t.requiresGrad = on }

// Grad returns the accumulated gradient, or nil before any backward pass.
func (t *Tensor) Grad() *Tensor { return t.grad }

// SetGrad replaces the gradient slot (autograd and optimizers use it).
func (t *Tensor) SetGrad(g *Tensor) { t.grad = g }

// ZeroGrad sets the gradients of params to zero (those that have one).
func ZeroGrad(params []*Tensor) {
	for _, p := range params {
		if g := p.Grad(); g != nil {
			g.Device().Fill(g.Buffer(), 0)
		}
	}
}

// String describes the tensor without its values.
func (t *Tensor) String() string {
	name := ""
	if t.Name != "" {
		name = " " + t.Name
	}
	if t.Released() {
		return fmt.Sprintf("Tensor%s(released %v on %s)", name, t.Shape(), t.dev.Name())
	}
	return fmt.Sprintf("Tensor%s(%v %v on %s)", name, t.buf.DType(), t.Shape(), t.dev.Name())
}

// MoveTo returns a view of t with a new shape (same element count) that
// takes over t's pool ownership: releasing the view returns the buffer, and
// releasing t no longer does. Autograd uses it to hand a gradient to a
// reshaped input without copying.
func (t *Tensor) MoveTo(shape ...int) (*Tensor, error) {
	v, err := t.Reshape(shape...)
	if err != nil {
		return nil, err
	}
	v.pooled, t.pooled = t.pooled, false
	return v, nil
}

// MarkOutput marks t as the output of an operation recorded under origin,
// a non-zero id of the recording (autograd's graph and pass, so that a
// tensor recorded elsewhere is refused rather than its gradient lost);
// tensors not so marked are leaves, whose gradients persist. It panics for
// origin 0, which would leave t a leaf.
func (t *Tensor) MarkOutput(origin uint64) {
	if origin == 0 {
		panic("tensor: MarkOutput(0): a recorded output needs a non-zero origin")
	}
	t.origin = origin
}

// Origin returns the id MarkOutput recorded t under, or 0 for a leaf.
func (t *Tensor) Origin() uint64 { return t.origin }

// IsLeaf reports whether t is a leaf: not the output of a recorded op.
func (t *Tensor) IsLeaf() bool { return t.origin == 0 }
