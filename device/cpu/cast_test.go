package cpu

import (
	"math"
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
	d.Scale(b, b, 2)
}

func contains(r any, s string) bool {
	msg, ok := r.(string)
	return ok && strings.Contains(msg, s)
}
