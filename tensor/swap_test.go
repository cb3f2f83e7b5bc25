package tensor

import (
	"slices"
	"testing"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/cpu"
)

// TestSwapStorage: two whole live buffers of one device, dtype and length
// trade places (values, not shapes or names, move, and both versions
// step); a view, a released tensor, a length or dtype that differs, or a
// tensor with itself is refused and nothing moves.
func TestSwapStorage(t *testing.T) {
	dev := cpu.New()
	mk := func(vals ...float32) *Tensor {
		x, err := FromFloat32(dev, vals, len(vals))
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	a, b := mk(1, 2, 3), mk(4, 5, 6)
	va, vb := a.Version(), b.Version()
	if !SwapStorage(a, b) {
		t.Fatal("SwapStorage refused two whole float32 buffers of length 3")
	}
	if got := a.Float32s(); !slices.Equal(got, []float32{4, 5, 6}) {
		t.Errorf("a after the swap: %v, want b's values", got)
	}
	if got := b.Float32s(); !slices.Equal(got, []float32{1, 2, 3}) {
		t.Errorf("b after the swap: %v, want a's values", got)
	}
	if a.Version() == va || b.Version() == vb {
		t.Errorf("versions %d %d unchanged by the swap", a.Version(), b.Version())
	}
	view, err := a.Reshape(3, 1)
	if err != nil {
		t.Fatal(err)
	}
	f64, err := NewOf(dev, device.Float64, 3)
	if err != nil {
		t.Fatal(err)
	}
	released, err := NewPooled(dev, device.Float32, 3)
	if err != nil {
		t.Fatal(err)
	}
	released.Release()
	for _, tc := range []struct {
		name string
		x, y *Tensor
	}{
		{"a view", view, b},
		{"another length", a, mk(1, 2)},
		{"another dtype", a, f64},
		{"a released tensor", a, released},
		{"itself", a, a},
	} {
		if SwapStorage(tc.x, tc.y) {
			t.Errorf("%s: swapped", tc.name)
		}
	}
	if got := a.Float32s(); !slices.Equal(got, []float32{4, 5, 6}) {
		t.Errorf("a after the refused swaps: %v", got)
	}
}
