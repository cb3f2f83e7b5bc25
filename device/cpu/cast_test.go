package cpu

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/hilbert-ml/hilbert/device"
)

func TestBFloat16Storage(t *testing.T) {
	d := New()
	x := []float32{1, -2.5, 1 + 1.0/256, 3.14159, float32(math.Inf(-1)), 1e-30}
	b, err := d.Alloc(device.BFloat16, len(x))
	if err != nil {
		t.Fatal(err)
	}
	if b.DType() != device.BFloat16 || b.Len() != len(x) || b.Slice(1, 2).DType() != device.BFloat16 {
		t.Fatalf("dtype %v len %d", b.DType(), b.Len())
	}
	src := NewFloat32(x)
	d.Cast(b, src)
	back := make([]float32, len(x))
	d.CopyToHost(back, b)
	for i, v := range x {
		if want := device.Float32FromBFloat16(device.BFloat16FromFloat32(v)); back[i] != want {
			t.Errorf("cast %v -> %v, want %v", v, back[i], want)
		}
	}
	// CopyFromHost rounds too; Cast back to float32 widens exactly.
	d.CopyFromHost(b, x)
	f := NewFloat32(make([]float32, len(x)))
	d.Cast(f, b)
	for i := range x {
		if Float32s(f)[i] != back[i] {
			t.Errorf("CopyFromHost+Cast [%d] = %v, want %v", i, Float32s(f)[i], back[i])
		}
	}

	// Gemm with bfloat16 operands: TestGemmBFloat16Paths.
}

func TestBFloat16RefusedByArithmeticKernels(t *testing.T) {
	d := New()
	b, _ := d.Alloc(device.BFloat16, 4)
	defer func() {
		r := recover()
		if r == nil || !contains(r, "bfloat16 buffer used where float32 is required") {
			t.Fatalf("panic %v", r)
		}
	}()
	d.Axpby(b, b, 2, 0)
}

func contains(r any, s string) bool {
	msg, ok := r.(string)
	return ok && strings.Contains(msg, s)
}

// TestBFloat16Conversions checks the conversions Cast runs (AVX-512 where
// the CPU has it) bit for bit against device.BFloat16FromFloat32 and
// Float32FromBFloat16: every bfloat16 widened, and float32 values of every
// kind rounded: ties to even both ways, the largest values and overflow to
// Inf, denormals, NaNs of either sign and payload, and random bits, at
// lengths that leave every tail.
func TestBFloat16Conversions(t *testing.T) {
	var in []float32
	for _, u := range []uint32{0, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 0xffc00001, 0x7f800001, 0xff812345,
		0x7f7fffff, 0x7f7f8000, 0x7f7f7fff, 0xff7fffff, 0x00000001, 0x007fffff, 0x80008000, 0x00018000, 0x3f808000,
		0x3f818000, 0x3f807fff, 0x3f80ffff, 0x4effffff} {
		in = append(in, math.Float32frombits(u))
	}
	rng := rand.New(rand.NewPCG(21, 22))
	for range 100000 {
		in = append(in, math.Float32frombits(rng.Uint32()))
	}
	for range 1000 { // ties: the low 16 bits exactly 0x8000
		in = append(in, math.Float32frombits(rng.Uint32()&0xffff0000|0x8000))
	}
	d := New()
	for _, n := range []int{1, 15, 16, 17, 33, len(in)} {
		src := NewFloat32(append([]float32(nil), in[:n]...))
		dst, err := d.Alloc(device.BFloat16, n)
		if err != nil {
			t.Fatal(err)
		}
		d.Cast(dst, src)
		for i, got := range BFloat16s(dst) {
			if want := device.BFloat16FromFloat32(in[i]); got != want {
				t.Fatalf("n %d: Cast %#08x to bfloat16 = %#04x, want %#04x", n, math.Float32bits(in[i]), got, want)
			}
		}
	}
	src, err := d.Alloc(device.BFloat16, 1<<16)
	if err != nil {
		t.Fatal(err)
	}
	for i := range BFloat16s(src) {
		BFloat16s(src)[i] = uint16(i)
	}
	dst := NewFloat32(make([]float32, 1<<16))
	d.Cast(dst, src)
	for i, v := range Float32s(dst) {
		if math.Float32bits(v) != math.Float32bits(device.Float32FromBFloat16(uint16(i))) {
			t.Fatalf("Cast bfloat16 %#04x to float32 = %#08x, want %#08x", i, math.Float32bits(v), uint32(i)<<16)
		}
	}
}
