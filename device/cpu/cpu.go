// Package cpu is Hilbert's CPU backend: a device.Device whose kernels are
// plain Go loops, parallel over row blocks with at most Threads()
// goroutines, and whose matrix products go through Hilbert's native GEMM
// (Go and Go assembly: AVX-512 or AVX2+FMA micro-kernels chosen at run
// time, see native.go), through OpenBLAS loaded at run time
// (github.com/ebitengine/purego, so the module builds with CGO_ENABLED=0),
// or through gonum's pure-Go GEMM.
//
// The environment variable HILBERT_GEMM forces the GEMM: "native",
// "openblas" (an error, and the native GEMM, if the library cannot be
// loaded) or "go" (gonum). Unset, the native GEMM runs where it has an
// assembly kernel, OpenBLAS elsewhere when it loads (see gemm.go).
// HILBERT_OPENBLAS names the shared library to load instead of the
// system's libopenblas.so.0. Which GEMM is in use is printed once, on
// stderr, the first time a device is created.
//
// This package depends only on device/.
package cpu

import (
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/hilbert-ml/hilbert/device"
)

// Device is the CPU backend. The zero value is not usable; call New.
type Device struct{}

var (
	defaultDevice = &Device{}
	threads       atomic.Int32
)

func init() { threads.Store(int32(runtime.GOMAXPROCS(0))) }

// New returns the CPU device. All CPU devices share one GEMM and one thread
// setting, so New always returns the same value.
func New() *Device {
	initGemm()
	return defaultDevice
}

// SetThreads sets how many goroutines kernels use and how many threads
// OpenBLAS uses; n < 1 means GOMAXPROCS.
func SetThreads(n int) {
	if n < 1 {
		n = runtime.GOMAXPROCS(0)
	}
	threads.Store(int32(n))
	setBLASThreads(n)
}

// Threads returns the current thread setting.
func Threads() int { return int(threads.Load()) }

// Name returns "cpu".
func (d *Device) Name() string { return "cpu" }

// buffer is host memory; exactly one of f, i, h and d is set (non-nil,
// even when empty).
type buffer struct {
	f []float32
	i []int32
	h []uint16 // bfloat16 bits
	d []float64
}

func (b *buffer) Device() device.Device { return defaultDevice }
func (b *buffer) DType() device.DType {
	switch {
	case b.i != nil:
		return device.Int32
	case b.h != nil:
		return device.BFloat16
	case b.d != nil:
		return device.Float64
	}
	return device.Float32
}
func (b *buffer) Len() int {
	switch {
	case b.i != nil:
		return len(b.i)
	case b.h != nil:
		return len(b.h)
	case b.d != nil:
		return len(b.d)
	}
	return len(b.f)
}
func (b *buffer) Slice(off, n int) device.Buffer {
	switch {
	case b.i != nil:
		return &buffer{i: b.i[off : off+n : off+n]}
	case b.h != nil:
		return &buffer{h: b.h[off : off+n : off+n]}
	case b.d != nil:
		return &buffer{d: b.d[off : off+n : off+n]}
	}
	return &buffer{f: b.f[off : off+n : off+n]}
}

// Alloc returns a zeroed buffer. BFloat16 buffers are storage only: Cast,
// Copy, CopyStrided, host copies and Gemm operands (widened to float32 for
// the product); other kernels refuse them. Float64 buffers take the core
// ops (device.Core) and Fill; the other kernels refuse them.
func (d *Device) Alloc(dtype device.DType, n int) (device.Buffer, error) {
	if n < 0 {
		return nil, fmt.Errorf("cpu: alloc of %d elements", n)
	}
	// Non-nil slices even for n == 0 keep the dtype recognisable.
	switch dtype {
	case device.Float32:
		return &buffer{f: make([]float32, n, max(n, 1))}, nil
	case device.Int32:
		return &buffer{i: make([]int32, n, max(n, 1))}, nil
	case device.BFloat16:
		return &buffer{h: make([]uint16, n, max(n, 1))}, nil
	case device.Float64:
		return &buffer{d: make([]float64, n, max(n, 1))}, nil
	}
	return nil, fmt.Errorf("cpu: dtype %v is not supported by the CPU backend", dtype)
}

// Free is a no-op: the Go garbage collector owns CPU memory.
func (d *Device) Free(device.Buffer) {}

// Synchronize returns nil: CPU kernels complete before they return.
func (d *Device) Synchronize() error { return nil }

// Float32s returns the host slice behind a CPU float32 buffer. It panics if
// b does not belong to the CPU backend: callers above the device layer
// should use the tensor package instead.
func Float32s(b device.Buffer) []float32 {
	cb := cpuBuffer(b)
	if cb.f == nil && (cb.i != nil || cb.h != nil || cb.d != nil) {
		panic(fmt.Sprintf("cpu: %v buffer used where float32 is required", cb.DType()))
	}
	return cb.f
}

// Float64s returns the host slice behind a CPU float64 buffer.
func Float64s(b device.Buffer) []float64 { return required(cpuBuffer(b).d, b, "float64") }

// BFloat16s returns the bfloat16 bits behind a CPU bfloat16 buffer.
func BFloat16s(b device.Buffer) []uint16 { return required(cpuBuffer(b).h, b, "bfloat16") }

// Int32s returns the host slice behind a CPU int32 buffer.
func Int32s(b device.Buffer) []int32 { return required(cpuBuffer(b).i, b, "int32") }

// cpuBuffer returns b as a CPU buffer; it panics if b belongs to another
// backend.
func cpuBuffer(b device.Buffer) *buffer {
	cb, ok := b.(*buffer)
	if !ok {
		panic(fmt.Sprintf("cpu: buffer of %s given to the CPU backend", b.Device().Name()))
	}
	return cb
}

// required returns s, the slice of b's buffer that holds dtype want; it
// panics if s is nil, which means b holds another dtype.
func required[T any](s []T, b device.Buffer, want string) []T {
	if s == nil {
		panic(fmt.Sprintf("cpu: %v buffer used where %s is required", b.DType(), want))
	}
	return s
}

// NewFloat32 wraps a host slice as a CPU buffer without copying.
func NewFloat32(data []float32) device.Buffer { return &buffer{f: data} }

// CopyFromHost copies src into dst, rounding to bfloat16 for a bfloat16
// buffer and widening for a float64 one.
func (d *Device) CopyFromHost(dst device.Buffer, src []float32) {
	switch dst.DType() {
	case device.BFloat16:
		toBFloat16(BFloat16s(dst), src)
	case device.Float64:
		convertFloats(Float64s(dst)[:len(src)], src)
	default:
		copy(Float32s(dst), src)
	}
}

// CopyToHost copies src into dst, widening bfloat16 and rounding float64.
func (d *Device) CopyToHost(dst []float32, src device.Buffer) {
	switch src.DType() {
	case device.BFloat16:
		fromBFloat16(dst, BFloat16s(src))
	case device.Float64:
		convertFloats(dst, Float64s(src))
	default:
		copy(dst, Float32s(src))
	}
}

// CopyFloat64FromHost copies src into dst, rounding for a float32 or
// bfloat16 buffer.
func (d *Device) CopyFloat64FromHost(dst device.Buffer, src []float64) {
	switch dst.DType() {
	case device.Float64:
		copy(Float64s(dst), src)
	case device.BFloat16:
		convertEach(BFloat16s(dst), src, bf16FromFloat64) // one rounding
	default:
		convertFloats(Float32s(dst)[:len(src)], src)
	}
}

// CopyFloat64ToHost copies src into dst, widening float32 and bfloat16.
func (d *Device) CopyFloat64ToHost(dst []float64, src device.Buffer) {
	switch src.DType() {
	case device.Float64:
		copy(dst, Float64s(src))
	case device.BFloat16:
		x := BFloat16s(src)[:len(dst)]
		for i, v := range x {
			dst[i] = float64(device.Float32FromBFloat16(v))
		}
	default:
		convertFloats(dst, Float32s(src))
	}
}

// convertFloats sets dst[i] = src[i] rounded or widened to D for every
// element of dst; src must be at least as long.
func convertFloats[D, S float](dst []D, src []S) {
	src = src[:len(dst)]
	for i, v := range src {
		dst[i] = D(v)
	}
}

// CopyInt32FromHost copies src into dst.
func (d *Device) CopyInt32FromHost(dst device.Buffer, src []int32) { copy(Int32s(dst), src) }

// CopyInt32ToHost copies src into dst.
func (d *Device) CopyInt32ToHost(dst []int32, src device.Buffer) { copy(dst, Int32s(src)) }

// Copy copies src to dst.
func (d *Device) Copy(dst, src device.Buffer) {
	switch dst.DType() {
	case device.Int32:
		copyParallel(Int32s(dst), Int32s(src))
	case device.BFloat16:
		copyParallel(BFloat16s(dst), BFloat16s(src))
	case device.Float64:
		copyParallel(Float64s(dst), Float64s(src))
	default:
		copyParallel(Float32s(dst), Float32s(src))
	}
}

// copyGrain is the least elements a worker of Copy takes: a large copy
// (a parameter's first gradient of a step) goes at the bandwidth of all
// the workers, a small one stays a single memmove.
const copyGrain = 1 << 16

// copyParallel is copy(dst, src) split over the workers in contiguous
// chunks.
func copyParallel[T any](dst, src []T) {
	n := min(len(dst), len(src))
	parallelFor(n, copyGrain, func(lo, hi int) { copy(dst[lo:hi], src[lo:hi]) })
}

// Cast converts between float32, bfloat16, float64 and int32 (or copies
// equal dtypes), with the semantics of device.Core.Cast: floats round to
// nearest even, a float becomes an int32 rounded toward zero and
// saturated (NaN gives 0), an int32 becomes float32 or bfloat16 rounded to
// nearest even (float64 exactly).
func (d *Device) Cast(dst, src device.Buffer) {
	switch dt, st := dst.DType(), src.DType(); {
	case dt == st:
		d.Copy(dst, src)
	case dt == device.Int32:
		toInt32(Int32s(dst), src)
	case st == device.Int32:
		fromInt32(dst, Int32s(src))
	case dt == device.BFloat16 && st == device.Float32:
		toBFloat16(BFloat16s(dst), Float32s(src))
	case dt == device.Float32 && st == device.BFloat16:
		fromBFloat16(Float32s(dst), BFloat16s(src))
	case st == device.Float64:
		d.CopyFloat64FromHost(dst, Float64s(src))
	case dt == device.Float64:
		d.CopyFloat64ToHost(Float64s(dst), src)
	default:
		panic(fmt.Sprintf("cpu: Cast from %v to %v", st, dt))
	}
}

// int32FromFloat converts v to int32 as CUDA's __float2int_rz does:
// rounded toward zero, saturated at the int32 limits (infinities
// included), NaN to 0.
func int32FromFloat(v float64) int32 {
	switch {
	case v != v:
		return 0
	case v >= 1<<31:
		return math.MaxInt32
	case v <= -1<<31:
		return math.MinInt32
	}
	return int32(v) // Go truncates toward zero
}

// bf16FromInt32 rounds v to the nearest bfloat16, ties to even, in one
// rounding (through float32 a tie could be rounded twice).
func bf16FromInt32(v int32) uint16 {
	a := uint32(v)
	if v < 0 {
		a = -a
	}
	sh := 0 // bits below the 8 significant ones bfloat16 keeps
	for t := a >> 8; t != 0; t >>= 1 {
		sh++
	}
	if sh > 0 {
		keep, rem, half := a>>sh, a&(1<<sh-1), uint32(1)<<(sh-1)
		if rem > half || rem == half && keep&1 == 1 {
			keep++
		}
		a = keep << sh // at most 1<<31: fits
	}
	f := float32(a) // exact: at most 8 significant bits
	if v < 0 {
		f = -f
	}
	return device.BFloat16FromFloat32(f) // exact
}

// bf16FromFloat64 rounds v to the nearest bfloat16, ties to even, in one
// rounding: v is first rounded to float32 by round-to-odd (toward zero,
// then the last bit set when inexact), which keeps the information a tie
// needs, since float32 has more than two bits beyond bfloat16's 8.
func bf16FromFloat64(v float64) uint16 {
	if v != v {
		return device.BFloat16FromFloat32(float32(v))
	}
	f := float32(v)
	if math.Abs(float64(f)) > math.Abs(v) { // rounded away from zero (or to Inf)
		f = math.Nextafter32(f, 0)
	}
	if float64(f) != v {
		f = math.Float32frombits(math.Float32bits(f) | 1)
	}
	return device.BFloat16FromFloat32(f)
}

// toInt32 converts the float buffer src into dst (see int32FromFloat).
func toInt32(dst []int32, src device.Buffer) {
	switch src.DType() {
	case device.Float64:
		convertEach(dst, Float64s(src), int32FromFloat)
	case device.BFloat16:
		convertEach(dst, BFloat16s(src), func(v uint16) int32 { return int32FromFloat(float64(device.Float32FromBFloat16(v))) })
	case device.Float32:
		convertEach(dst, Float32s(src), func(v float32) int32 { return int32FromFloat(float64(v)) })
	default:
		panic(fmt.Sprintf("cpu: Cast from %v to int32", src.DType()))
	}
}

// fromInt32 converts src into the float buffer dst: float32 and bfloat16
// rounded to nearest even, float64 exactly.
func fromInt32(dst device.Buffer, src []int32) {
	src = src[:dst.Len()]
	switch dst.DType() {
	case device.Float64:
		convertEach(Float64s(dst), src, func(v int32) float64 { return float64(v) })
	case device.BFloat16:
		convertEach(BFloat16s(dst), src, bf16FromInt32)
	case device.Float32:
		convertEach(Float32s(dst), src, func(v int32) float32 { return float32(v) }) // round to nearest even
	default:
		panic(fmt.Sprintf("cpu: Cast from int32 to %v", dst.DType()))
	}
}

// convertEach sets dst[i] = f(src[i]) for every element of src, over the
// threads. It serves the conversions off the training path (int32 and
// float64); the float32 <-> bfloat16 casts of autocast keep loops of their
// own without a call per element.
func convertEach[S, D any](dst []D, src []S, f func(S) D) {
	dst = dst[:len(src)]
	parallelFor(len(src), elementGrain, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			dst[i] = f(src[i])
		}
	})
}

// toBFloat16 rounds src to bfloat16 into dst (device.BFloat16FromFloat32),
// in parallel chunks, each with AVX-512 where the CPU has it
// (toBFloat16Chunk).
func toBFloat16(dst []uint16, src []float32) {
	dst = dst[:len(src)]
	parallelFor(len(src), elementGrain, func(lo, hi int) {
		toBFloat16Chunk(dst[lo:hi], src[lo:hi])
	})
}

// fromBFloat16 widens src into dst (exactly), as toBFloat16.
func fromBFloat16(dst []float32, src []uint16) {
	dst = dst[:len(src)]
	parallelFor(len(src), elementGrain, func(lo, hi int) {
		fromBFloat16Chunk(dst[lo:hi], src[lo:hi])
	})
}

// toBFloat16Go and fromBFloat16Go are the portable conversions.
func toBFloat16Go(dst []uint16, src []float32) {
	for i, v := range src {
		dst[i] = device.BFloat16FromFloat32(v)
	}
}

func fromBFloat16Go(dst []float32, src []uint16) {
	for i, v := range src {
		dst[i] = device.Float32FromBFloat16(v)
	}
}

// parallelFor runs body over [0, n) split into contiguous chunks, using at
// most Threads() goroutines and chunks of at least grain items.
func parallelFor(n, grain int, body func(lo, hi int)) {
	if n <= 0 {
		return
	}
	workers := Threads()
	if grain < 1 {
		grain = 1
	}
	if w := (n + grain - 1) / grain; w < workers {
		workers = w
	}
	if workers <= 1 {
		body(0, n)
		return
	}
	var wg sync.WaitGroup
	chunk := (n + workers - 1) / workers
	for lo := chunk; lo < n; lo += chunk {
		wg.Add(1)
		go func(lo, hi int) {
			defer wg.Done()
			body(lo, hi)
		}(lo, min(lo+chunk, n))
	}
	body(0, min(chunk, n))
	wg.Wait()
}

var _ device.Device = (*Device)(nil)
