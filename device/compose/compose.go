// Package compose runs the optional capabilities of package device on
// any backend: each function here has the name and arguments of one
// capability method (RMSNorm, AdamWStep, ...) with the device first. It
// calls the backend's kernel when the backend implements the capability,
// and otherwise runs the capability's composition from the Core, which is
// the capability's definition: device/devicetest checks every backend's
// kernels against it, and a backend of the Core alone trains through it.
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

// scaleInto computes dst = alpha * src over n elements through the Core.
func scaleInto(d device.Core, op string, dst, src device.Buffer, alpha float64) {
	s := scalar(d, op, dst.DType(), alpha)
	d.BinaryStrided(device.Mul, device.DimsOf(dst.Len()), dst, flat(src), bcast(s))
	d.Free(s)
}

// addScalar computes dst = src + c over n elements.
func addScalar(d device.Core, op string, dst, src device.Buffer, c float64) {
	s := scalar(d, op, dst.DType(), c)
	d.BinaryStrided(device.Add, device.DimsOf(dst.Len()), dst, flat(src), bcast(s))
	d.Free(s)
}
