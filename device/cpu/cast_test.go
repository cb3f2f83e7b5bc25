package cpu

import (
	"math"
	"strings"
	"testing"

	"github.com/hilbert-ml/hilbert/device"
)

func TestBFloat16StorageAndGemm(t *testing.T) {
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

	// A GEMM with bfloat16 operands is the float32 GEMM of the rounded
	// values, bit for bit.
	const m, n, k = 5, 7, 9
	av, bv := make([]float32, m*k), make([]float32, k*n)
	for i := range av {
		av[i] = float32(math.Sin(float64(i)))
	}
	for i := range bv {
		bv[i] = float32(math.Cos(float64(i) * 0.7))
	}
	a16, _ := d.Alloc(device.BFloat16, m*k)
	b16, _ := d.Alloc(device.BFloat16, k*n)
	d.CopyFromHost(a16, av)
	d.CopyFromHost(b16, bv)
	ar, br := make([]float32, m*k), make([]float32, k*n)
	d.CopyToHost(ar, a16)
	d.CopyToHost(br, b16)
	got, want := make([]float32, m*n), make([]float32, m*n)
	d.Gemm(device.GemmArgs{M: m, N: n, K: k, Alpha: 1, A: a16, LDA: k, B: b16, LDB: n, C: NewFloat32(got), LDC: n})
	Sgemm(false, false, m, n, k, 1, ar, k, br, n, 0, want, n)
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("bf16 GEMM [%d] = %v, want %v", i, got[i], want[i])
		}
	}
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
