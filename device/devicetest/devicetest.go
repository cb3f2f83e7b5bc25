// Package devicetest is the conformance suite of Hilbert's backends: Run
// checks every core op of a device.Core (device.Device is one) against
// references computed on the host in float64, on broadcast shapes,
// non-contiguous and negative strides, offsets, empty tensors, NaN, Inf and
// signed zeros, and large and ragged sizes.
//
// A backend's test calls it once:
//
//	func TestConformance(t *testing.T) { devicetest.Run(t, mybackend.New()) }
//
// Every Core method is checked: Fill, Copy, Cast (float32 <-> bfloat16
// round to nearest even, float32 <-> float64, int32 <-> each float dtype
// with truncation, saturation and ties, equal dtypes), the
// host copies, Gemm (batched, every transpose, pitches and batch strides,
// alpha and beta, beta 0 over a NaN C, ragged, large and empty sizes) and
// the strided ops below.
//
// Float32 is always checked; Float64 too when the device declares it by
// accepting it in Alloc (a backend that refuses it, CUDA today, has the
// float64 subtests reported as skipped, with the reason). Ops whose float32 result is exactly rounded (copies, add, sub, mul,
// div, maximum, minimum, comparisons, where, gather, neg, abs, square,
// reciprocal, sqrt) must match the correctly rounded reference bit for bit
// (signed zeros included); transcendental functions within a few units in
// the last place; sums within float32 rounding of the float64 sum; random
// fills bit for bit (normals within a few units in the last place: the
// backends' log and cos may differ in the last bit).
//
// Each optional capability the device has (device/capability.go) is run
// through device/compose on the device and on its Core alone, from the
// same buffers, and must agree with the composition that defines it
// (float32, within a few float32 roundings; copies exactly). A package
// that declares its own capabilities checks them with Capabilities.
//
// The suite uses -short to skip its largest sizes.
package devicetest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/hilbert-ml/hilbert/device"
)

// Run runs the conformance suite on dev: the Core, then its capabilities.
func Run(t *testing.T, dev device.Core) {
	for _, dt := range []device.DType{device.Float32, device.Float64} {
		t.Run(dt.String(), func(t *testing.T) {
			if dt == device.Float64 {
				// A backend declares float64 by accepting it in Alloc
				// (device.Float64); then every compute method must take it.
				b, err := dev.Alloc(device.Float64, 1)
				if err != nil {
					t.Skipf("%s declares no float64 (Alloc: %v): the float64 checks do not apply", dev.Name(), err)
				}
				dev.Free(b)
			}
			h := &harness{dev: dev, dt: dt}
			for _, s := range []struct {
				name string
				run  func(*testing.T)
			}{
				{"Fill", h.fill},
				{"Copy", h.copy},
				{"Gemm", h.gemm},
				{"CopyStrided", h.copyStrided},
				{"Unary", h.unary},
				{"BinaryStrided", h.binary},
				{"BinarySpecials", h.binarySpecials},
				{"Where", h.where},
				{"ReduceAxis", h.reduce},
				{"GatherAxis", h.gatherAxis},
				{"ScatterAddAxis", h.scatterAddAxis},
				{"Random", h.random},
			} {
				t.Run(s.name, func(t *testing.T) {
					s.run(t)
					h.sync(t)
				})
			}
		})
	}
	t.Run("Cast", func(t *testing.T) { casts(t, dev) })
	t.Run("RawDTypes", func(t *testing.T) { rawDTypes(t, dev) })
	t.Run("Capabilities", func(t *testing.T) { capabilities(t, dev) })
}

// harness runs the checks of one dtype.
type harness struct {
	dev device.Core
	dt  device.DType
}

// round rounds v to the harness dtype.
func (h *harness) round(v float64) float64 {
	if h.dt == device.Float32 {
		return float64(float32(v))
	}
	return v
}

func (h *harness) roundAll(v []float64) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = h.round(x)
	}
	return out
}

// alloc returns a buffer of n elements of dtype, freed at the end of t.
func (h *harness) alloc(t *testing.T, dtype device.DType, n int) device.Buffer {
	t.Helper()
	b, err := h.dev.Alloc(dtype, n)
	if err != nil {
		t.Fatalf("Alloc(%v, %d): %v", dtype, n, err)
	}
	t.Cleanup(func() { h.dev.Free(b) })
	return b
}

// upload returns a buffer of the harness dtype holding vals (rounded).
func (h *harness) upload(t *testing.T, vals []float64) device.Buffer {
	t.Helper()
	b := h.alloc(t, h.dt, len(vals))
	if len(vals) > 0 {
		h.dev.CopyFloat64FromHost(b, vals)
	}
	return b
}

func (h *harness) uploadInt32(t *testing.T, vals []int32) device.Buffer {
	t.Helper()
	b := h.alloc(t, device.Int32, len(vals))
	if len(vals) > 0 {
		h.dev.CopyInt32FromHost(b, vals)
	}
	return b
}

// download reads a buffer back as float64.
func (h *harness) download(t *testing.T, b device.Buffer) []float64 {
	t.Helper()
	h.sync(t)
	out := make([]float64, b.Len())
	if len(out) > 0 {
		h.dev.CopyFloat64ToHost(out, b)
	}
	h.sync(t)
	return out
}

func (h *harness) downloadInt32(t *testing.T, b device.Buffer) []int32 {
	t.Helper()
	h.sync(t)
	out := make([]int32, b.Len())
	if len(out) > 0 {
		h.dev.CopyInt32ToHost(out, b)
	}
	h.sync(t)
	return out
}

func (h *harness) sync(t *testing.T) {
	t.Helper()
	if err := h.dev.Synchronize(); err != nil {
		t.Fatalf("%s: %v", h.dev.Name(), err)
	}
}

// tol is a comparison: exact (bit for bit after rounding to the dtype,
// NaN matching any NaN) or |got-want| <= atol + rtol*|want|. NaN and
// infinities must match in any case.
type tol struct {
	exact      bool
	rtol, atol float64
}

var exact = tol{exact: true}

// approx is the tolerance of transcendental functions for the dtype.
func (h *harness) approx() tol {
	if h.dt == device.Float32 {
		return tol{rtol: 4e-6, atol: 1e-6}
	}
	return tol{rtol: 1e-13, atol: 1e-14}
}

// agree reports whether got matches want (already rounded to the dtype).
func agree(got, want float64, c tol) bool {
	switch {
	case math.IsNaN(want):
		return math.IsNaN(got)
	case math.IsInf(want, 0) || math.IsInf(got, 0):
		return got == want
	case c.exact:
		return math.Float64bits(got) == math.Float64bits(want)
	}
	return math.Abs(got-want) <= c.atol+c.rtol*math.Abs(want)
}

// compare fails t at the first few mismatches of got against want.
func compare(t *testing.T, what string, got, want []float64, c tol) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	bad := 0
	for i := range got {
		if !agree(got[i], want[i], c) {
			if bad < 5 {
				t.Errorf("%s: element %d = %v, want %v", what, i, got[i], want[i])
			}
			bad++
		}
	}
	if bad > 5 {
		t.Errorf("%s: %d of %d elements differ", what, bad, len(got))
	}
}

// specials are inputs every elementwise op sees.
var specials = []float64{0, math.Copysign(0, -1), 1, -1, 0.5, -0.5, 2, -3, 1e-3, -1e-3, 1e-30, -1e-30,
	10, -10, 30, -30, 88, -88, 100, -100, math.Inf(1), math.Inf(-1), math.NaN()}

// randoms returns n normal values of scale s from a generator seeded by
// seed.
func randoms(seed uint64, n int, s float64) []float64 {
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	v := make([]float64, n)
	for i := range v {
		v[i] = s * rng.NormFloat64()
	}
	return v
}

// large returns big unless -short, then small.
func large(big, small int) int {
	if testing.Short() {
		return small
	}
	return big
}

// operand is a strided input: host storage and a layout over some dims.
type operand struct {
	name    string
	storage []float64
	layout  device.Layout
}

// at returns the operand's value at linear index i of dims.
func (o *operand) at(dims device.Dims, i int) float64 {
	return o.storage[offsetAt(dims, o.layout, i)]
}

// offsetAt returns the element offset of linear index i of dims in l.
func offsetAt(dims device.Dims, l device.Layout, i int) int {
	off := l.Offset
	for d := dims.Rank - 1; d >= 0; d-- {
		n := dims.N[d]
		off += (i % n) * l.Strides[d]
		i /= n
	}
	return off
}

// contiguousOperand stores shape row-major and broadcasts it to dims.
func contiguousOperand(vals []float64, shape []int, dims device.Dims) operand {
	v, ok := device.Broadcast(nil, shape, dims)
	if !ok {
		panic(fmt.Sprintf("devicetest: %v does not broadcast to %v", shape, dims))
	}
	return operand{name: fmt.Sprint(shape), storage: vals, layout: v.Layout}
}

// transposedOperand stores dims with the axes reversed and reads it back
// in dims' order: every stride is non-unit but one.
func transposedOperand(vals []float64, dims device.Dims) operand {
	rev := device.Dims{Rank: dims.Rank}
	for i := range dims.Rank {
		rev.N[i] = dims.N[dims.Rank-1-i]
	}
	rs := rev.RowMajor()
	var l device.Layout
	for i := range dims.Rank {
		l.Strides[i] = rs.Strides[dims.Rank-1-i]
	}
	return operand{name: "transposed " + dims.String(), storage: vals, layout: l}
}

// flippedOperand reads a row-major array of dims backwards along every
// axis (negative strides), from a buffer with 3 elements of padding on
// each side.
func flippedOperand(vals []float64, dims device.Dims) operand {
	l := dims.RowMajor()
	off := 3
	for i := range dims.Rank {
		off += (dims.N[i] - 1) * l.Strides[i]
		l.Strides[i] = -l.Strides[i]
	}
	l.Offset = off
	storage := append(append([]float64{7, 7, 7}, vals...), 7, 7, 7)
	return operand{name: "flipped " + dims.String(), storage: storage, layout: l}
}

// view uploads the operand's storage.
func (h *harness) view(t *testing.T, o operand) device.View {
	return device.View{Buf: h.upload(t, o.storage), Layout: o.layout}
}
