package tensor

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/hilbert-ml/hilbert/device"
)

// Host data in and out of a tensor: the creation functions that copy it
// in (and RandN, drawn on the host), the setters and readers, and the
// recorded range of an int32 tensor's ids.

// FromFloat32 copies host data into a new float32 tensor of the given
// shape; len(data) must equal the shape's element count.
func FromFloat32(dev device.Device, data []float32, shape ...int) (*Tensor, error) {
	return fromHost("FromFloat32", dev, device.Float32, data, shape, device.Device.CopyFromHost)
}

// fromHost returns a new tensor of dtype and shape holding data, copied in
// through copyIn (one of the device's host copies) as its creation (at
// version 0), or an error for a bad shape or data not its element count.
func fromHost[T any](op string, dev device.Device, dtype device.DType, data []T, shape []int, copyIn func(device.Device, device.Buffer, []T)) (*Tensor, error) {
	if err := checkShape(op, shape); err != nil {
		return nil, err
	}
	if want := Shape(shape).Numel(); len(data) != want {
		return nil, fmt.Errorf("tensor: %s: %d values for shape %v (want %d)", op, len(data), Shape(shape), want)
	}
	t, err := NewOf(dev, dtype, shape...)
	if err != nil {
		return nil, err
	}
	copyIn(dev, t.buf, data)
	return t, nil
}

// FromInt32 copies host token ids into a new int32 tensor and records
// their range, so index ops can check them against a table's size.
func FromInt32(dev device.Device, data []int32, shape ...int) (*Tensor, error) {
	t, err := fromHost("FromInt32", dev, device.Int32, data, shape, device.Device.CopyInt32FromHost)
	if err != nil {
		return nil, err
	}
	t.SetIndexRange(int32Range(data))
	return t, nil
}

// FromFloat64 copies host data into a new float64 tensor of the given
// shape (on a backend that supports float64: the CPU).
func FromFloat64(dev device.Device, data []float64, shape ...int) (*Tensor, error) {
	return fromHost("FromFloat64", dev, device.Float64, data, shape, device.Device.CopyFloat64FromHost)
}

// SetInt32 overwrites an int32 tensor with host data of the same length
// and records its range. It lets a training loop reuse one input tensor.
// A tensor of another dtype, or data of another length, is an error and
// leaves t unchanged.
func (t *Tensor) SetInt32(data []int32) error {
	if err := write(t, "SetInt32", data, true, device.Device.CopyInt32FromHost); err != nil {
		return err
	}
	t.SetIndexRange(int32Range(data))
	return nil
}

// write overwrites t with data through copyIn, one of the device's host
// copies, after checkSet's checks for op, and marks t modified.
func write[T any](t *Tensor, op string, data []T, ints bool, copyIn func(device.Device, device.Buffer, []T)) error {
	if err := t.checkSet(op, len(data), ints); err != nil {
		return err
	}
	copyIn(t.dev, t.buf, data)
	t.MarkModified()
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
	return write(t, "SetFloat32", data, false, device.Device.CopyFromHost)
}

// SetFloat64 overwrites a float tensor with host float64 data of the same
// length (rounded to its dtype), with SetFloat32's errors.
func (t *Tensor) SetFloat64(data []float64) error {
	return write(t, "SetFloat64", data, false, device.Device.CopyFloat64FromHost)
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

// Float32s copies a float tensor to a new host slice (rounding float64
// values). It panics for an int32 tensor, saying to read it with Int32s.
func (t *Tensor) Float32s() []float32 { return read(t, "Float32s", false, device.Device.CopyToHost) }

// Float64s copies a float tensor to a new host slice of float64 (exact).
// It panics for an int32 tensor, saying to read it with Int32s.
func (t *Tensor) Float64s() []float64 {
	return read(t, "Float64s", false, device.Device.CopyFloat64ToHost)
}

// Int32s copies an int32 tensor to a new host slice. It panics for a
// float tensor, saying to read it with Float32s or Float64s (or to Cast
// it to int32 first).
func (t *Tensor) Int32s() []int32 { return read(t, "Int32s", true, device.Device.CopyInt32ToHost) }

// read copies t to a new host slice with copyOut, one of the device's
// host copies, after readable's check of t for op.
func read[T any](t *Tensor, op string, ints bool, copyOut func(device.Device, []T, device.Buffer)) []T {
	t.readable(op, ints)
	out := make([]T, t.Len())
	copyOut(t.dev, out, t.buf)
	return out
}

// Item returns the single value of a one-element float tensor (a loss).
// It panics for a tensor of another size, or an int32 one, naming it and
// the method that reads it: a programming error, like an index out of
// range.
func (t *Tensor) Item() float32 { return item(t, "Item", device.Device.CopyToHost) }

// Item64 is Item in float64: the single value of a one-element float
// tensor, exact for float32 and float64 alike (a float64 run's loss).
func (t *Tensor) Item64() float64 { return item(t, "Item64", device.Device.CopyFloat64ToHost) }

// item reads the single value of a one-element float tensor for Item and
// Item64 (op), panicking as they document.
func item[T any](t *Tensor, op string, copyOut func(device.Device, []T, device.Buffer)) T {
	t.readable(op, false)
	if t.Len() != 1 {
		panic(fmt.Sprintf("tensor: %s of %s with %d elements: %s reads a one-element tensor; read this one with Float32s or Float64s", op, t.String(), t.Len(), op))
	}
	var v [1]T
	copyOut(t.dev, v[:], t.buf)
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
