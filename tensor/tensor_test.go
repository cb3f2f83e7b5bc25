package tensor

import (
	"fmt"
	"strings"
	"testing"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/cpu"
)

func TestCreationAndViews(t *testing.T) {
	dev := cpu.New()
	x, err := FromFloat32(dev, []float32{1, 2, 3, 4, 5, 6}, 2, 3)
	if err != nil {
		t.Fatal(err)
	}
	if got := x.Shape().String(); got != "[2 3]" || x.Len() != 6 || x.Dim(-1) != 3 {
		t.Fatalf("shape %s len %d", got, x.Len())
	}
	v, err := x.Reshape(3, -1)
	if err != nil || v.Shape().String() != "[3 2]" {
		t.Fatalf("Reshape(3, -1) = %v, %v", v, err)
	}
	// A view shares memory.
	v.SetFloat32([]float32{9, 8, 7, 6, 5, 4})
	if got := x.Float32s(); got[0] != 9 || got[5] != 4 {
		t.Fatalf("view write not seen: %v", got)
	}
	bad := []struct {
		shape []int
		want  string
	}{
		{[]int{4, 2}, "6 elements"},
		{[]int{-1, -1}, "more than one -1"},
		{[]int{4, -1}, "do not divide"},
		{[]int{1, 1, 1, 1, 1, 1, 6}, "rank 7"},
	}
	for _, b := range bad {
		if _, err := x.Reshape(b.shape...); err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("Reshape%v: got %v, want %q", b.shape, err, b.want)
		}
	}
	if _, err := FromFloat32(dev, []float32{1, 2}, 3); err == nil || !strings.Contains(err.Error(), "2 values for shape [3]") {
		t.Errorf("FromFloat32 count mismatch: %v", err)
	}
	ids, err := FromInt32(dev, []int32{3, -1, 7}, 3)
	if err != nil {
		t.Fatal(err)
	}
	if lo, hi, ok := ids.IndexRange(); !ok || lo != -1 || hi != 7 || ids.DType() != device.Int32 {
		t.Errorf("IndexRange = %d %d %v", lo, hi, ok)
	}
}

func TestPoolReusesReleasedBuffers(t *testing.T) {
	dev := cpu.New()
	DrainPool()
	a, err := NewPooled(dev, device.Float32, 4, 5)
	if err != nil {
		t.Fatal(err)
	}
	buf := a.Buffer()
	a.Release()
	if !a.Released() || PoolBytes() != 80 {
		t.Fatalf("after Release: released %v, pool %d bytes", a.Released(), PoolBytes())
	}
	b, _ := NewPooled(dev, device.Float32, 20) // same element count, other shape
	if b.Buffer() != buf || PoolBytes() != 0 {
		t.Fatal("the released buffer was not reused")
	}
	// MoveTo hands pool ownership to the view: releasing the original no
	// longer frees the buffer, releasing the view does.
	m, err := b.MoveTo(2, 10)
	if err != nil {
		t.Fatal(err)
	}
	b.Release()
	if PoolBytes() != 0 || !m.Pooled() {
		t.Fatal("release of the moved-from tensor returned the buffer")
	}
	m.Release()
	if PoolBytes() != 80 {
		t.Fatalf("pool holds %d bytes, want 80", PoolBytes())
	}
	DrainPool()
	if PoolBytes() != 0 {
		t.Fatal("DrainPool left bytes")
	}
}

// TestFreeBypassesPool: Free releases a pooled tensor without giving its
// buffer to the pool, and does nothing to a tensor that is not pooled.
func TestFreeBypassesPool(t *testing.T) {
	dev := cpu.New()
	DrainPool()
	a, err := NewPooled(dev, device.Float32, 3, 7)
	if err != nil {
		t.Fatal(err)
	}
	a.Free()
	if !a.Released() || a.Pooled() || PoolBytes() != 0 {
		t.Fatalf("after Free: released %v, pooled %v, pool %d bytes; want released, not pooled, 0", a.Released(), a.Pooled(), PoolBytes())
	}
	a.Release() // a second release is a no-op
	if PoolBytes() != 0 {
		t.Fatal("Release after Free pooled the buffer")
	}
	b, _ := New(dev, 2)
	b.Free()
	if b.Released() {
		t.Error("Free released a tensor that is not pooled")
	}
}

// TestVersionCountsWrites: every setter bumps the version, which views
// share.
func TestVersionCountsWrites(t *testing.T) {
	dev := cpu.New()
	x, _ := FromFloat32(dev, []float32{1, 2, 3, 4}, 2, 2)
	v, _ := x.Reshape(4)
	if x.Version() != 0 {
		t.Fatalf("fresh tensor at version %d", x.Version())
	}
	x.SetFloat32([]float32{5, 6, 7, 8})
	v.SetFloat64([]float64{1, 1, 1, 1})
	x.MarkModified()
	if x.Version() != 3 || v.Version() != 3 {
		t.Fatalf("versions %d and %d after three writes, want 3", x.Version(), v.Version())
	}
	ids, _ := FromInt32(dev, []int32{1, 2}, 2)
	ids.SetInt32([]int32{0, 0})
	if ids.Version() != 1 {
		t.Fatalf("SetInt32 left version %d", ids.Version())
	}
}

// TestUseAfterReleasePanicsClearly: reading a released tensor, or a view
// of one, panics with a message saying it was released (never a nil
// dereference); String still works.
func TestUseAfterReleasePanicsClearly(t *testing.T) {
	dev := cpu.New()
	x, _ := NewPooled(dev, device.Float32, 2, 3)
	x.Name = "activations"
	view, _ := x.Reshape(6)
	x.Release()
	for name, use := range map[string]func(){
		"Len":          func() { x.Len() },
		"Float32s":     func() { x.Float32s() },
		"view Len":     func() { view.Len() },
		"view Item":    func() { view.Item() },
		"view Buffer":  func() { view.Buffer() },
		"view Reshape": func() { view.Reshape(3, 2) },
		"SetFloat32":   func() { x.SetFloat32(make([]float32, 6)) },
	} {
		func() {
			defer func() {
				msg := fmt.Sprint(recover())
				if !strings.Contains(msg, "released") || !strings.Contains(msg, "activations") || !strings.Contains(msg, "Keep") {
					t.Errorf("%s after Release: panic %q, want one saying the tensor was released", name, msg)
				}
			}()
			use()
		}()
	}
	if s := view.String(); !strings.Contains(s, "released") {
		t.Errorf("String of a released view = %q", s)
	}
	DrainPool()
}

func TestFloat64Tensors(t *testing.T) {
	dev := cpu.New()
	x, err := FromFloat64(dev, []float64{1 + 1e-12, -2}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if got := x.Float64s(); got[0] != 1+1e-12 || got[1] != -2 || x.DType() != device.Float64 {
		t.Fatalf("float64 round trip %v (%v)", got, x.DType())
	}
	if _, err := FromFloat64(dev, []float64{1}, 2); err == nil || !strings.Contains(err.Error(), "1 values for shape [2]") {
		t.Errorf("FromFloat64 count mismatch: %v", err)
	}
}

// TestIndexRange: the range of int32 ids is known from host data, lapses
// on an in-place write, and is restored by SetIndexRange or
// ComputeIndexRange (which reads the ids back); views carry it.
func TestIndexRange(t *testing.T) {
	dev := cpu.New()
	ids, err := FromInt32(dev, []int32{4, -1, 7, 2}, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name   string
		do     func()
		lo, hi int32
		known  bool
	}{
		{"from host", func() {}, -1, 7, true},
		{"written on the device", func() {
			dev.CopyInt32FromHost(ids.Buffer(), []int32{0, 9, 3, 3})
			ids.MarkModified()
		}, 0, 0, false},
		{"computed", func() { ids.ComputeIndexRange() }, 0, 9, true},
		{"written again", func() { ids.MarkModified() }, 0, 0, false},
		{"declared", func() { ids.SetIndexRange(0, 15) }, 0, 15, true},
		{"SetInt32", func() { ids.SetInt32([]int32{5, 5, 6, 5}) }, 5, 6, true},
	}
	for _, s := range steps {
		s.do()
		lo, hi, ok := ids.IndexRange()
		if ok != s.known || (ok && (lo != s.lo || hi != s.hi)) {
			t.Fatalf("%s: range [%d, %d] known %v, want [%d, %d] known %v", s.name, lo, hi, ok, s.lo, s.hi, s.known)
		}
	}
	v, err := ids.Reshape(4)
	if err != nil {
		t.Fatal(err)
	}
	if lo, hi, ok := v.IndexRange(); !ok || lo != 5 || hi != 6 {
		t.Fatalf("view: range [%d, %d] known %v", lo, hi, ok)
	}
	f, _ := New(dev, 2)
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "SetIndexRange of a float32") {
			t.Errorf("SetIndexRange on float32: %v", r)
		}
	}()
	f.SetIndexRange(0, 1)
}

// TestSettersReturnErrors: a setter given data of the wrong length, or
// writing the wrong kind of tensor, returns an error naming the tensor and
// the fix, and leaves the tensor unchanged (it used to panic).
func TestSettersReturnErrors(t *testing.T) {
	dev := cpu.New()
	f, _ := FromFloat32(dev, []float32{1, 2, 3, 4, 5, 6}, 2, 3)
	f.Name = "w"
	ids, _ := FromInt32(dev, []int32{1, 2}, 2)
	for _, c := range []struct {
		name string
		set  func() error
		want string
	}{
		{"SetFloat32 short", func() error { return f.SetFloat32([]float32{1, 2}) }, "tensor: SetFloat32: 2 values into Tensor w([2 3] on cpu) of 6 elements (want exactly 6)"},
		{"SetFloat64 long", func() error { return f.SetFloat64(make([]float64, 7)) }, "SetFloat64: 7 values into Tensor w([2 3] on cpu) of 6 elements"},
		{"SetInt32 into float", func() error { return f.SetInt32(make([]int32, 6)) }, "tensor: SetInt32 into float32 Tensor w([2 3] on cpu): a float tensor is written with SetFloat32 or SetFloat64"},
		{"SetFloat32 into ids", func() error { return ids.SetFloat32([]float32{1, 2}) }, "SetFloat32 into int32 Tensor([2] on cpu): an int32 tensor is written with SetInt32"},
		{"SetInt32 short", func() error { return ids.SetInt32([]int32{1}) }, "SetInt32: 1 values into Tensor([2] on cpu) of 2 elements"},
	} {
		v0 := f.Version()
		err := c.set()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
		if f.Version() != v0 {
			t.Errorf("%s: a refused write bumped the version", c.name)
		}
	}
	if got := f.Float32s(); got[0] != 1 || got[5] != 6 {
		t.Errorf("refused writes changed the tensor: %v", got)
	}
	if got := ids.Int32s(); got[0] != 1 || got[1] != 2 {
		t.Errorf("refused writes changed the ids: %v", got)
	}
	if _, err := FromInt32(dev, []int32{1}, 2); err == nil {
		t.Error("FromInt32 with one value for shape [2] was accepted")
	}
}

// TestReadersPanicClearly: reading a tensor the wrong way is a documented
// panic naming the tensor and the reader to use (Item of a non-scalar,
// Int32s of a float tensor, Float32s of ids), not the backend's message.
func TestReadersPanicClearly(t *testing.T) {
	dev := cpu.New()
	f, _ := FromFloat32(dev, []float32{1, 2, 3, 4, 5, 6}, 2, 3)
	ids, _ := FromInt32(dev, []int32{1, 2}, 2)
	for name, c := range map[string]struct {
		read func()
		want string
	}{
		"Item of [2 3]":     {func() { f.Item() }, "Item of Tensor(float32 [2 3] on cpu) with 6 elements: Item reads a one-element tensor; read this one with Float32s or Float64s"},
		"Int32s of float32": {func() { f.Int32s() }, "Int32s of float32 Tensor([2 3] on cpu): read a float tensor with Float32s or Float64s"},
		"Float32s of ids":   {func() { ids.Float32s() }, "Float32s of int32 Tensor([2] on cpu): read an int32 tensor with Int32s"},
		"Float64s of ids":   {func() { ids.Float64s() }, "Float64s of int32"},
		"Item of ids":       {func() { ids.Item() }, "Item of int32"},
	} {
		func() {
			defer func() {
				if msg := fmt.Sprint(recover()); !strings.Contains(msg, c.want) {
					t.Errorf("%s: panic %q, want one containing %q", name, msg, c.want)
				}
			}()
			c.read()
		}()
	}
	one, _ := FromFloat64(dev, []float64{2.5}, 1, 1)
	if one.Item() != 2.5 {
		t.Errorf("Item of a [1 1] float64 tensor = %v", one.Item())
	}
}

func TestPart(t *testing.T) {
	dev := cpu.New()
	x, err := NewPooled(dev, device.Float32, 2, 3, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := x.SetFloat32([]float32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}); err != nil {
		t.Fatal(err)
	}
	row, err := x.Part(6, 1, 2, 2) // batch row 1, its first two positions
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(row.Shape(), row.Float32s()); got != "[1 2 2] [6 7 8 9]" {
		t.Fatalf("Part(6, 1, 2, 2) = %s", got)
	}
	if err := row.SetFloat32([]float32{-6, -7, -8, -9}); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(x.Float32s()[5:11]); got != "[5 -6 -7 -8 -9 10]" {
		t.Fatalf("a write through the part: x[5:11] = %s", got)
	}
	for _, bad := range []struct {
		off   int
		shape []int
		want  string
	}{
		{8, []int{1, 3, 2}, "past its 12"},
		{-1, []int{2}, "offset -1"},
		{0, []int{-2}, "Part"},
	} {
		if _, err := x.Part(bad.off, bad.shape...); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("Part(%d, %v): error %v, want one saying %q", bad.off, bad.shape, err, bad.want)
		}
	}
	x.Release()
	if !row.Released() {
		t.Fatal("a part of a released tensor is not released")
	}
}
