package devicetest

import (
	"math"
	"math/big"
	"testing"

	"github.com/hilbert-ml/hilbert/device"
)

// int32CastReference is a float -> int32 Cast of x: rounded toward zero,
// saturated at the int32 limits, NaN to 0 (CUDA's __float2int_rz).
func int32CastReference(x float64) int32 {
	if math.IsNaN(x) {
		return 0
	}
	t := math.Trunc(x)
	switch {
	case t > math.MaxInt32:
		return math.MaxInt32
	case t < math.MinInt32:
		return math.MinInt32
	}
	return int32(t)
}

// intToFloatReference rounds v to prec significant bits (24 for float32,
// 8 for bfloat16), to nearest even, in one rounding (math/big), as a
// float64. Both formats hold every int32 magnitude without overflow.
func intToFloatReference(v int32, prec uint) float64 {
	f, _ := new(big.Float).SetPrec(prec).SetMode(big.ToNearestEven).SetInt64(int64(v)).Float64()
	return f
}

// int32CastCases are float -> int32 casts whose result is the same from
// float32, bfloat16 and float64 sources: negatives, fractions toward zero,
// the saturation limits and NaN.
var int32CastCases = []struct {
	in   float64
	want int32
}{
	{0, 0}, {math.Copysign(0, -1), 0}, {1, 1}, {-1, -1}, {2.7, 2}, {-2.7, -2},
	{0.5, 0}, {-0.5, 0}, {-0.99, 0}, {100.5, 100}, {-100.5, -100}, {1e-40, 0}, {-1e-40, 0},
	{65280, 65280}, {-65280, -65280},
	{1 << 31, math.MaxInt32}, {-1 << 31, math.MinInt32}, {1 << 30, 1 << 30}, {-1 << 30, -1 << 30},
	{3e9, math.MaxInt32}, {-3e9, math.MinInt32}, {1e38, math.MaxInt32}, {-1e38, math.MinInt32},
	{math.Inf(1), math.MaxInt32}, {math.Inf(-1), math.MinInt32}, {math.NaN(), 0},
}

// int32FloatCases are int32 -> float casts with their float32 and bfloat16
// results: exact values, ties to even in both directions, values that
// rounding through float32 first would round twice, and the limits.
var int32FloatCases = []struct {
	in      int32
	f32, bf float64
}{
	{0, 0, 0}, {1, 1, 1}, {-1, -1, -1}, {255, 255, 255}, {-256, -256, -256},
	{257, 257, 256}, {259, 259, 260}, {-257, -257, -256}, {-259, -259, -260}, // bfloat16 ties
	{16777216, 16777216, 16777216}, {16777217, 16777216, 16777216}, {16777219, 16777220, 16777216},
	{-16777217, -16777216, -16777216}, {-16777219, -16777220, -16777216}, // float32 ties
	{16777218, 16777218, 16777216},
	// Through float32 this is 2^24+2^16, a bfloat16 tie that would go
	// down to 2^24; rounded once it is above the tie.
	{1<<24 + 1<<16 + 1, 1<<24 + 1<<16, 1<<24 + 1<<17},
	{math.MaxInt32, 1 << 31, 1 << 31}, {math.MinInt32, -1 << 31, -1 << 31},
	{1<<31 - 64, 1 << 31, 1 << 31}, {1<<31 - 65, 1<<31 - 128, 1 << 31}, {1<<31 - 128, 1<<31 - 128, 1 << 31},
}

// castsInt32 checks Cast between int32 and every float dtype the device
// stores, both ways, against the references above, and empty casts.
func castsInt32(t *testing.T, dev device.Core, has func(device.DType) bool) {
	h := &harness{dev: dev, dt: device.Float32}
	for _, c := range int32CastCases {
		if got := int32CastReference(c.in); got != c.want {
			t.Fatalf("reference: int32(%v) = %d, want %d", c.in, got, c.want)
		}
	}
	for _, c := range int32FloatCases {
		if a, b := intToFloatReference(c.in, 24), intToFloatReference(c.in, 8); a != c.f32 || b != c.bf {
			t.Fatalf("reference: %d rounds to %v (float32), %v (bfloat16), want %v, %v", c.in, a, b, c.f32, c.bf)
		}
	}
	for _, dt := range []device.DType{device.Float32, device.BFloat16, device.Float64} {
		t.Run(dt.String(), func(t *testing.T) {
			if !has(dt) {
				t.Skipf("no %v storage", dt)
			}
			h.castsToInt32(t, dt)
			h.castsFromInt32(t, dt)
			// Empty casts do nothing, without error.
			e, ei := h.alloc(t, dt, 0), h.alloc(t, device.Int32, 0)
			dev.Cast(ei, e)
			dev.Cast(e, ei)
			h.sync(t)
		})
	}
}

// castsToInt32 checks float -> int32: the stored source values (read back
// exactly) against the reference, and the fixed cases.
func (h *harness) castsToInt32(t *testing.T, dt device.DType) {
	src := make([]float64, 0, len(int32CastCases)+400)
	for _, c := range int32CastCases {
		src = append(src, c.in)
	}
	src = append(src, randoms(91, 200, 10)...)
	src = append(src, randoms(92, 200, 3e9)...)
	src = append(src, 2147483520, -2147483904, 2147483647.9, -2147483648.9, 2147483647, -2147483649, 16777217.5)
	sb := h.alloc(t, dt, len(src))
	h.dev.CopyFloat64FromHost(sb, src)
	stored := h.download(t, sb)
	ib := h.alloc(t, device.Int32, len(src))
	h.dev.Cast(ib, sb)
	got := h.downloadInt32(t, ib)
	for i, x := range stored {
		want := int32CastReference(x)
		if i < len(int32CastCases) {
			want = int32CastCases[i].want
		}
		if got[i] != want {
			t.Errorf("Cast %v %v -> int32 = %d, want %d", dt, x, got[i], want)
		}
	}
}

// castsFromInt32 checks int32 -> float against the rounding reference and
// the fixed cases.
func (h *harness) castsFromInt32(t *testing.T, dt device.DType) {
	ints := make([]int32, 0, len(int32FloatCases)+300)
	for _, c := range int32FloatCases {
		ints = append(ints, c.in)
	}
	for _, r := range randoms(93, 300, 1e9) {
		ints = append(ints, int32CastReference(r))
	}
	is := h.uploadInt32(t, ints)
	fb := h.alloc(t, dt, len(ints))
	h.dev.Cast(fb, is)
	back := h.download(t, fb)
	for i, v := range ints {
		var want float64
		switch dt {
		case device.Float64:
			want = float64(v)
		case device.BFloat16:
			want = intToFloatReference(v, 8)
		default:
			want = intToFloatReference(v, 24)
		}
		if i < len(int32FloatCases) && dt != device.Float64 {
			want = int32FloatCases[i].f32
			if dt == device.BFloat16 {
				want = int32FloatCases[i].bf
			}
		}
		if back[i] != want {
			t.Errorf("Cast int32 %d -> %v = %v, want %v", v, dt, back[i], want)
		}
	}
}

// bf16From64Reference rounds a float64 to bfloat16 in one rounding to
// nearest even (math/big, 8 bits), overflowing to Inf past the largest
// bfloat16 as IEEE 754 does; v must be 0 or normal in bfloat16's range
// (math/big has no subnormals).
func bf16From64Reference(v float64) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return v
	}
	r, _ := new(big.Float).SetPrec(8).SetMode(big.ToNearestEven).SetFloat64(v).Float64()
	if math.Abs(r) > float64(math.Float32frombits(0x7f7f0000)) {
		return math.Copysign(math.Inf(1), v)
	}
	return r
}

// castsBF16Float64 checks Cast between bfloat16 and float64: widening is
// exact; narrowing rounds once to nearest even, so values within 2^-24 of
// a tie (where rounding through float32 would land on the tie) are
// rounded the right way.
func castsBF16Float64(t *testing.T, dev device.Core) {
	h := &harness{dev: dev, dt: device.Float32}
	cases := []struct{ in, want float64 }{
		{1 + 0x1p-8, 1}, {1 + 3*0x1p-8, 1 + 0x1p-6}, // ties to even
		{1 + 0x1p-8 + 0x1p-40, 1 + 0x1p-7}, {-(1 + 0x1p-8 + 0x1p-40), -(1 + 0x1p-7)}, // just above a tie
		{1 + 3*0x1p-8 - 0x1p-40, 1 + 0x1p-7}, // just below one
		{1e300, math.Inf(1)}, {-1e300, math.Inf(-1)}, {1e-300, 0}, {-1e-300, math.Copysign(0, -1)},
		{0x1.fep127, 0x1.fep127}, {0x1.fefffffffp127, 0x1.fep127}, // the largest bfloat16 and below its tie
		{0x1.ffp127, math.Inf(1)}, // the tie above the largest rounds to even: Inf
		{math.Inf(1), math.Inf(1)}, {math.NaN(), math.NaN()},
	}
	src := make([]float64, 0, len(cases)+300)
	for _, c := range cases {
		src = append(src, c.in)
		if !math.IsNaN(c.in) && math.Abs(c.in) > 1e-30 && bf16From64Reference(c.in) != c.want {
			t.Fatalf("reference: bfloat16(%v) = %v, want %v", c.in, bf16From64Reference(c.in), c.want)
		}
	}
	for _, r := range randoms(94, 300, 1e3) {
		// Near ties: a bfloat16 tie point moved by a little over float32's
		// resolution either way.
		b := float64(math.Float32frombits(math.Float32bits(float32(r))&^0xffff | 0x8000))
		src = append(src, b*(1+float64(int(r)%3-1)*0x1p-30))
	}
	s64 := h.alloc(t, device.Float64, len(src))
	dev.CopyFloat64FromHost(s64, src)
	bf := h.alloc(t, device.BFloat16, len(src))
	dev.Cast(bf, s64)
	back := h.alloc(t, device.Float64, len(src))
	dev.Cast(back, bf) // widening, exact
	h.sync(t)
	// A host copy into bfloat16 rounds as the Cast does, once.
	direct := h.alloc(t, device.BFloat16, len(src))
	dev.CopyFloat64FromHost(direct, src)
	got, viaF32, copied := h.download(t, back), h.download(t, bf), h.download(t, direct)
	for i, v := range src {
		want := bf16From64Reference(v)
		if i < len(cases) {
			want = cases[i].want
		}
		if !(got[i] == want && math.Signbit(got[i]) == math.Signbit(want)) && !(want != want && got[i] != got[i]) {
			t.Errorf("Cast float64 %v -> bfloat16 = %v, want %v", v, got[i], want)
		}
		if !(copied[i] == got[i]) && !(got[i] != got[i] && copied[i] != copied[i]) {
			t.Errorf("CopyFloat64FromHost %v into bfloat16 = %v, Cast gives %v", v, copied[i], got[i])
		}
		if !(got[i] == viaF32[i]) && !(got[i] != got[i] && viaF32[i] != viaF32[i]) {
			t.Errorf("Cast bfloat16 %v -> float64 = %v, not exact", viaF32[i], got[i])
		}
	}
}
