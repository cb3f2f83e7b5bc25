package devicetest

import (
	"fmt"
	"math"
	"testing"

	"github.com/hilbert-ml/hilbert/device"
)

// fillValues are the values Fill is checked with: float32 ones, since
// Fill takes a float32.
var fillValues = []float32{0, float32(math.Copysign(0, -1)), 1, -2.5, 1e-40, 3.4e38,
	float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())}

// fill checks Fill on whole buffers (empty, ragged, large) and on a view
// into a larger buffer, whose neighbours must be left as they were.
func (h *harness) fill(t *testing.T) {
	for _, n := range []int{0, 1, 7, 1000, large(1<<20+3, 4099)} {
		for _, v := range fillValues {
			t.Run(fmt.Sprintf("n%d_%v", n, v), func(t *testing.T) {
				pad := 5
				base := h.roundAll(randoms(uint64(n)+7, n+2*pad, 1))
				buf := h.upload(t, base)
				h.dev.Fill(buf.Slice(pad, n), v)
				got := h.download(t, buf)
				want := append([]float64(nil), base...)
				for i := pad; i < pad+n; i++ {
					want[i] = float64(v) // exact in float32 and float64
				}
				compare(t, "Fill", got, want, exact)
			})
		}
	}
}

// copy checks Copy between views of the harness dtype and of int32 (and
// bfloat16 where the device stores it): exact, neighbours untouched.
func (h *harness) copy(t *testing.T) {
	for _, n := range []int{0, 1, 33, large(1<<20+5, 5003)} {
		t.Run(fmt.Sprintf("n%d", n), func(t *testing.T) {
			src := randoms(uint64(n)+11, n, 3)
			copy(src[max(0, n-len(specials)):], specials) // NaN, Inf, -0 at the end
			src = h.roundAll(src)
			sb := h.upload(t, append(append([]float64{1, 2}, src...), 3))
			dst := h.roundAll(randoms(uint64(n)+12, n+4, 1))
			db := h.upload(t, dst)
			h.dev.Copy(db.Slice(1, n), sb.Slice(2, n))
			got := h.download(t, db)
			want := append([]float64(nil), dst...)
			copy(want[1:], src)
			compare(t, "Copy", got, want, exact)

			ints := make([]int32, n+3)
			for i := range ints {
				ints[i] = int32(i*2654435761) ^ -7
			}
			is, id := h.uploadInt32(t, ints), h.uploadInt32(t, make([]int32, n+3))
			h.dev.Copy(id.Slice(2, n), is.Slice(0, n))
			gi := h.downloadInt32(t, id)
			for i := range n {
				if gi[i+2] != ints[i] {
					t.Fatalf("int32 Copy: element %d = %d, want %d", i, gi[i+2], ints[i])
				}
			}
			if gi[0] != 0 || gi[1] != 0 {
				t.Fatalf("int32 Copy wrote before its view: %v", gi[:2])
			}
		})
	}
}

// bf16Reference rounds f to bfloat16 by its definition, independently of
// device.BFloat16FromFloat32: the nearer of the two bfloat16 neighbours,
// the one with an even last mantissa bit on a tie; NaN stays NaN.
func bf16Reference(f float32) float32 {
	if f != f {
		return f
	}
	u := math.Float32bits(f)
	lo := u &^ 0xffff  // toward zero
	hi := lo + 0x10000 // away from zero (the next bfloat16, or Inf)
	if lo == u {
		return f
	}
	dl := math.Abs(float64(f) - float64(math.Float32frombits(lo)))
	var dh float64
	if hf := math.Float32frombits(hi); math.IsInf(float64(hf), 0) {
		// Past the largest bfloat16: Inf is "one step" further, 2^128.
		dh = math.Abs(math.Ldexp(math.Copysign(1, float64(f)), 128) - float64(f))
	} else {
		dh = math.Abs(float64(hf) - float64(f))
	}
	switch {
	case dl < dh, dl == dh && lo&0x10000 == 0:
		return math.Float32frombits(lo)
	}
	return math.Float32frombits(hi)
}

// castF32Values are the float32 inputs of the bfloat16 casts: ties in
// both directions, neighbours of ties, subnormals, the top of the range
// (which rounds to Inf), infinities and NaN.
func castF32Values() []float32 {
	bits := []uint32{0x3f808000, 0x3f818000, 0x3f808001, 0x3f817fff, 0xbf808000, 0xbf818000,
		0x00008000, 0x00018000, 0x00000001, 0x807fffff, 0x7f7fffff, 0xff7fffff, 0x7f7f8000, 0x7f7f7fff,
		0x7f800000, 0xff800000, 0x7fc00000, 0x7f800001, 0xffc12345, 0x00000000, 0x80000000}
	v := make([]float32, 0, len(bits)+300)
	for _, b := range bits {
		v = append(v, math.Float32frombits(b))
	}
	for _, r := range randoms(77, 300, 50) {
		v = append(v, float32(r))
	}
	return v
}

// casts checks Cast between every pair of dtypes the device stores:
// float32 <-> bfloat16 (round to nearest even, NaN and Inf kept), float32
// <-> float64 and bfloat16 <-> float64 (rounded to nearest even in one
// rounding; widening exact), int32 <-> every float
// dtype (castsInt32), and equal dtypes (int32 included) as a copy.
func casts(t *testing.T, dev device.Core) {
	h := &harness{dev: dev, dt: device.Float32}
	has := func(dt device.DType) bool {
		b, err := dev.Alloc(dt, 1)
		if err != nil {
			t.Logf("%s declares no %v (Alloc: %v): its casts are not checked", dev.Name(), dt, err)
			return false
		}
		dev.Free(b)
		return true
	}
	vals := castF32Values()
	f32 := h.alloc(t, device.Float32, len(vals))
	dev.CopyFromHost(f32, vals)
	t.Run("float32_bfloat16", func(t *testing.T) {
		if !has(device.BFloat16) {
			t.Skip("no bfloat16 storage")
		}
		h.castsFloat32BF16(t, f32, vals)
	})
	t.Run("float32_float64", func(t *testing.T) {
		if !has(device.Float64) {
			t.Skip("no float64")
		}
		h.castsFloat32Float64(t, f32, vals)
	})
	t.Run("bfloat16_float64", func(t *testing.T) {
		if !has(device.BFloat16) || !has(device.Float64) {
			t.Skip("no bfloat16 or no float64")
		}
		castsBF16Float64(t, dev)
	})
	t.Run("int32", func(t *testing.T) { castsInt32(t, dev, has) })
	t.Run("equal", func(t *testing.T) { h.castsEqual(t, f32, vals) })
}

// readF32 returns a float32 buffer's values, after the device's pending
// work.
func (h *harness) readF32(t *testing.T, b device.Buffer) []float32 {
	h.sync(t)
	out := make([]float32, b.Len())
	h.dev.CopyToHost(out, b)
	h.sync(t)
	return out
}

// sameF32 reports whether a and b have the same bits or are both NaN.
func sameF32(a, b float32) bool {
	return math.Float32bits(a) == math.Float32bits(b) || (a != a && b != b)
}

// castsFloat32BF16 checks float32 -> bfloat16 (round to nearest even)
// through the exact way back.
func (h *harness) castsFloat32BF16(t *testing.T, f32 device.Buffer, vals []float32) {
	bf := h.alloc(t, device.BFloat16, len(vals))
	h.dev.Cast(bf, f32)
	// bfloat16 -> float32 is exact: read back through a Cast, too.
	back := h.alloc(t, device.Float32, len(vals))
	h.dev.Cast(back, bf)
	got := h.readF32(t, back)
	for i, v := range vals {
		if want := bf16Reference(v); !sameF32(got[i], want) {
			t.Errorf("Cast float32 %#08x (%v) -> bfloat16 -> float32 = %v (%#08x), want %v (%#08x)",
				math.Float32bits(v), v, got[i], math.Float32bits(got[i]), want, math.Float32bits(want))
		}
	}
}

// castsFloat32Float64 checks float32 -> float64 (exact) and float64 ->
// float32 (nearest, overflowing to Inf).
func (h *harness) castsFloat32Float64(t *testing.T, f32 device.Buffer, vals []float32) {
	n := len(vals)
	f64 := h.alloc(t, device.Float64, n)
	h.dev.Cast(f64, f32)
	wide := h.download(t, f64)
	for i, v := range vals {
		if !(float64(v) == wide[i] && math.Signbit(wide[i]) == math.Signbit(float64(v))) && !(v != v && wide[i] != wide[i]) {
			t.Errorf("Cast float32 %v -> float64 = %v (must be exact)", v, wide[i])
		}
	}
	src := append(randoms(78, 200, 1e3), 1e300, -1e300, 1e-300, -1e-300, 3.4028235677973366e38,
		math.Inf(1), math.Inf(-1), math.NaN(), 1+0x1p-24, 1+0x1p-24+0x1p-50, 1+3*0x1p-24)
	s64 := h.alloc(t, device.Float64, len(src))
	h.dev.CopyFloat64FromHost(s64, src)
	d32 := h.alloc(t, device.Float32, len(src))
	h.dev.Cast(d32, s64)
	got := h.readF32(t, d32)
	for i, v := range src {
		if want := float32(v); !sameF32(got[i], want) {
			t.Errorf("Cast float64 %v -> float32 = %v, want %v", v, got[i], want)
		}
	}
}

// castsEqual checks that a cast between equal dtypes copies.
func (h *harness) castsEqual(t *testing.T, f32 device.Buffer, vals []float32) {
	out := h.alloc(t, device.Float32, len(vals))
	h.dev.Cast(out, f32)
	got := h.readF32(t, out)
	for i, v := range vals {
		if !sameF32(got[i], v) {
			t.Fatalf("Cast float32 -> float32: element %d = %v, want %v", i, got[i], v)
		}
	}
	ints := []int32{0, -1, 1 << 30, -1 << 31, 1<<31 - 1, 12345}
	is, id := h.uploadInt32(t, ints), h.alloc(t, device.Int32, len(ints))
	h.dev.Cast(id, is)
	gi := h.downloadInt32(t, id)
	for i, v := range ints {
		if gi[i] != v {
			t.Fatalf("Cast int32 -> int32: element %d = %d, want %d", i, gi[i], v)
		}
	}
}
