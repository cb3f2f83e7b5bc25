// Package compose runs the optional capabilities of package device on
// any backend: each function here has the name and arguments of one
// capability method (RMSNorm, Attention, ...) with the device first. It
// calls the backend's kernel when the backend implements the capability,
// and otherwise runs the capability's composition from the Core, which is
// the capability's definition: device/devicetest checks every backend's
// kernels against it, and a backend of the Core alone trains through it.
// A few functions (Binary, Scale, FillFrom, AddRow) are compositions
// that callers share, with no kernel of their own.
//
// Run does the same for a capability declared outside package device (an
// optimizer's kernel declared by optim): the caller passes the kernel
// call and the composition, and Run finds the kernel also behind a
// Wrapper such as device/profile's, which sees the call.
//
// The compositions allocate their temporaries (and free them before
// returning: backends order a Free after the kernels queued before it), so
// unlike the fused kernels they are not allocation-free; the paper's fast
// path is the fused one. They work in the buffers' dtype (float32, or
// float64 where the backend's Core has it).
//
// This package depends only on package device.
package compose

import (
	"fmt"

	"github.com/hilbert-ml/hilbert/device"
)

// CoreOnly returns d seen through its Core alone, hiding every capability:
// the functions of this package run their compositions on it. It is the
// reference a conformance suite compares a backend's kernels with, and a
// backend of the Core alone for tests.
func CoreOnly(d device.Core) device.Core {
	if c, ok := d.(coreOnly); ok {
		return c
	}
	return coreOnly{d}
}

type coreOnly struct{ device.Core }

// Description passes on the wrapped backend's (device.Describe): hiding
// the capabilities does not change what the Core's numbers depend on.
func (c coreOnly) Description() device.Description { return device.Describe(c.Core) }

// Wrapper is a device that wraps another, such as device/profile's timing
// wrapper, and so cannot forward the methods of capabilities it does not
// know. Run looks through it (Unwrap) for the capability and runs the
// call inside Around, so that the wrapper sees each call (the profile
// times it) all the same.
type Wrapper interface {
	// Unwrap returns the wrapped device.
	Unwrap() device.Core
	// Around runs call, the capability method name on the wrapped device:
	// its kernel, or with composed set its composition.
	Around(name string, composed bool, call func())
}

// Run runs one call of the capability C on d: kernel on d when d
// implements C; when d is a Wrapper without C, Run on the device it wraps,
// inside its Around; otherwise composition on d, the Core calls that
// define the capability. name is the capability method, for the wrapper.
func Run[C any](d device.Core, name string, kernel func(C), composition func(device.Core)) {
	if k, ok := d.(C); ok {
		kernel(k)
		return
	}
	if w, ok := d.(Wrapper); ok {
		inner := w.Unwrap()
		w.Around(name, !Has[C](inner), func() { Run(inner, name, kernel, composition) })
		return
	}
	composition(d)
}

// Has reports whether Run finds capability C on d (on d itself or behind
// its wrappers), so that it runs a kernel rather than the composition.
func Has[C any](d device.Core) bool {
	for {
		if _, ok := d.(C); ok {
			return true
		}
		w, ok := d.(Wrapper)
		if !ok {
			return false
		}
		d = w.Unwrap()
	}
}

// temp allocates a scratch buffer for a composition; a backend that cannot
// allocate it leaves the kernel without a way to report, so it panics
// naming the op.
func temp(d device.Core, op string, dt device.DType, n int) device.Buffer {
	b, err := d.Alloc(dt, n)
	if err != nil {
		panic(fmt.Sprintf("compose: %s: scratch of %d %v: %v", op, n, dt, err))
	}
	return b
}

// scalar returns a one-element buffer holding v, read through a stride-0
// view as a broadcast constant.
func scalar(d device.Core, op string, dt device.DType, v float64) device.Buffer {
	b := temp(d, op, dt, 1)
	d.CopyFloat64FromHost(b, []float64{v})
	return b
}

// bcast is the view of a one-element buffer repeated over any dims.
func bcast(b device.Buffer) device.View { return device.View{Buf: b} }

// flat is the view of a contiguous buffer of n elements.
func flat(b device.Buffer) device.View { return device.Contiguous(b, device.DimsOf(b.Len())) }

// view places a buffer under strides and an offset.
func view(b device.Buffer, off int, strides ...int) device.View {
	v := device.View{Buf: b}
	v.Offset = off
	copy(v.Strides[:], strides)
	return v
}

// free gives the temporaries bufs back to d, in order.
func free(d device.Core, bufs ...device.Buffer) {
	for _, b := range bufs {
		d.Free(b)
	}
}

// scalarInto computes dst = src bop c over dst's elements through the Core
// (device.Mul scales src by c, device.Add adds c to it).
func scalarInto(d device.Core, op string, bop device.BinaryOp, dst, src device.Buffer, c float64) {
	s := scalar(d, op, dst.DType(), c)
	d.BinaryStrided(bop, device.DimsOf(dst.Len()), dst, flat(src), bcast(s))
	d.Free(s)
}
