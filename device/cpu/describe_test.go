package cpu

import (
	"reflect"
	"strconv"
	"testing"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/compose"
	"github.com/hilbert-ml/hilbert/device/profile"
)

// TestDescription: the CPU describes itself by kind, GEMM and threads (the
// resume settings train compared before it stopped importing this
// package), and the wrappers pass that on.
func TestDescription(t *testing.T) {
	want := device.Description{Kind: "cpu", Settings: []device.Setting{
		{Name: "gemm", Value: GemmName()}, {Name: "threads", Value: strconv.Itoa(Threads())},
	}}
	for _, c := range []struct {
		name string
		dev  device.Core
	}{
		{"cpu", New()},
		{"core only", compose.CoreOnly(New())},
		{"profiled", profile.Wrap(New())},
	} {
		if got := device.Describe(c.dev); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: Describe = %+v, want %+v", c.name, got, want)
		}
	}
}

// TestHostMemory: a CPU float32 buffer's host slice is its memory, and
// other dtypes are refused.
func TestHostMemory(t *testing.T) {
	d := New()
	s := []float32{1, 2, 3}
	b := d.WrapFloat32s(s)
	d.Fill(b, 7)
	if s[0] != 7 || s[2] != 7 {
		t.Fatalf("WrapFloat32s: filling the buffer gave %v, want the slice written", s)
	}
	h, ok := d.HostFloat32s(b.Slice(1, 2))
	if !ok || len(h) != 2 || &h[0] != &s[1] {
		t.Fatalf("HostFloat32s of a view: %v, %v; want s[1:3] itself", h, ok)
	}
	ib, _ := d.Alloc(device.Int32, 2)
	if _, ok := d.HostFloat32s(ib); ok {
		t.Errorf("HostFloat32s of an int32 buffer: ok, want refused")
	}
}
