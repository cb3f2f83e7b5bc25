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
	// gradZero marks grad as zero with its contents not yet written:
	// ZeroGrad defers the fill to the gradient's first use (Grad fills
	// it, GradToOverwrite lets a writer skip it).
	gradZero bool
	origin   uint64 // MarkOutput's recording id; 0 for a leaf

	// For Int32 tensors: bounds of the values (from host data, or declared
	// by the op that wrote them), so that index ops can refuse out-of-range
	// ids before a kernel runs. They hold while the storage's version is
	// rangeVersion: an in-place write (MarkModified) makes them unknown.
	minIndex, maxIndex int32
	rangeKnown         bool
	rangeVersion       uint64
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

// Part returns a view of the shape.Numel() consecutive elements of t
// from element offset, in t's row-major order, with the given shape: one
// row of a batch, or the filled prefix of a buffer kept with room to
// grow (nn.KVCache). Writes through the view are writes to t; the view
// is released with t. A range past t's end or a bad shape is an error.
func (t *Tensor) Part(offset int, shape ...int) (*Tensor, error) {
	t.live("Part")
	if err := checkShape("Part", shape); err != nil {
		return nil, err
	}
	n := Shape(shape).Numel()
	if offset < 0 || offset+n > t.Len() {
		return nil, fmt.Errorf("tensor: Part of %v: %d elements %v from offset %d, past its %d", t.Shape(), n, Shape(shape), offset, t.Len())
	}
	v := &Tensor{dev: t.dev, buf: t.buf.Slice(offset, n), rank: len(shape), Name: t.Name, base: t.root()}
	copy(v.shape[:], shape)
	return v, nil
}

// RequiresGrad reports whether gradients flow to this tensor.
func (t *Tensor) RequiresGrad() bool { return t.requiresGrad }

// SetRequiresGrad marks a tensor (typically a parameter) as one whose
// gradient autograd computes and accumulates into Grad.
func (t *Tensor) SetRequiresGrad(on bool) { t.requiresGrad = on }

// Grad returns the accumulated gradient, or nil before any backward pass.
// After ZeroGrad its values are zero: the fill ZeroGrad deferred runs
// here, at the first Grad call, unless a backward pass has written the
// gradient first (GradToOverwrite).
func (t *Tensor) Grad() *Tensor {
	if t.gradZero {
		t.gradZero = false
		t.grad.Device().Fill(t.grad.Buffer(), 0)
	}
	return t.grad
}

// GradToOverwrite returns the gradient slot and whether it stands for
// zero with contents never written since ZeroGrad. Then the caller must
// write every element of it (a copy where Grad's user would add to
// zeros), and the gradient counts as written: autograd uses it to give a
// parameter its first gradient of a step without the fill and the add.
func (t *Tensor) GradToOverwrite() (grad *Tensor, overwrite bool) {
	overwrite, t.gradZero = t.gradZero, false
	return t.grad, overwrite
}

// SetGrad replaces the gradient slot (autograd and optimizers use it).
func (t *Tensor) SetGrad(g *Tensor) { t.grad, t.gradZero = g, false }

// ZeroGrad sets the gradients of params to zero (those that have one). The
// fill is deferred to the gradient's next use (Grad), and skipped where a
// backward pass overwrites the whole gradient first, which leaves the
// same values as a fill and an add. That pass may give the gradient
// another buffer (autograd hands over its scratch: SwapStorage), so a
// view of a gradient (Reshape) taken before ZeroGrad is not one after.
func ZeroGrad(params []*Tensor) {
	for _, p := range params {
		if p.grad != nil {
			p.gradZero = true
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
