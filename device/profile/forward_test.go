package profile_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/profile"
)

// fake is a device.Device that records which methods were called. It must
// implement every method by hand: a method added to the interface breaks
// this file until it is added here too, and then the test below checks
// that the wrapper forwards and times it.
type fake struct{ calls []string }

func (f *fake) call(name string) { f.calls = append(f.calls, name) }

type fakeBuffer struct{}

func (fakeBuffer) Device() device.Device          { return nil }
func (fakeBuffer) DType() device.DType            { return device.Float32 }
func (fakeBuffer) Len() int                       { return 0 }
func (b fakeBuffer) Slice(int, int) device.Buffer { return b }

func (f *fake) Name() string { f.call("Name"); return "fake" }
func (f *fake) Alloc(device.DType, int) (device.Buffer, error) {
	f.call("Alloc")
	return fakeBuffer{}, nil
}
func (f *fake) Free(device.Buffer)                                 { f.call("Free") }
func (f *fake) Synchronize() error                                 { f.call("Synchronize"); return nil }
func (f *fake) CopyFromHost(device.Buffer, []float32)              { f.call("CopyFromHost") }
func (f *fake) CopyToHost([]float32, device.Buffer)                { f.call("CopyToHost") }
func (f *fake) CopyFloat64FromHost(device.Buffer, []float64)       { f.call("CopyFloat64FromHost") }
func (f *fake) CopyFloat64ToHost([]float64, device.Buffer)         { f.call("CopyFloat64ToHost") }
func (f *fake) CopyInt32FromHost(device.Buffer, []int32)           { f.call("CopyInt32FromHost") }
func (f *fake) CopyInt32ToHost([]int32, device.Buffer)             { f.call("CopyInt32ToHost") }
func (f *fake) Copy(device.Buffer, device.Buffer)                  { f.call("Copy") }
func (f *fake) Cast(device.Buffer, device.Buffer)                  { f.call("Cast") }
func (f *fake) Fill(device.Buffer, float32)                        { f.call("Fill") }
func (f *fake) Gemm(device.GemmArgs)                               { f.call("Gemm") }
func (f *fake) CopyStrided(device.Dims, device.View, device.View)  { f.call("CopyStrided") }
func (f *fake) Unary(device.UnaryOp, device.Buffer, device.Buffer) { f.call("Unary") }
func (f *fake) Where(device.Dims, device.Buffer, device.View, device.View, device.View) {
	f.call("Where")
}
func (f *fake) BinaryStrided(device.BinaryOp, device.Dims, device.Buffer, device.View, device.View) {
	f.call("BinaryStrided")
}
func (f *fake) ReduceAxis(device.ReduceOp, device.Buffer, device.Buffer, int, int, int) {
	f.call("ReduceAxis")
}
func (f *fake) GatherAxis(device.Buffer, device.Buffer, device.View, int, int, int, int) {
	f.call("GatherAxis")
}
func (f *fake) ScatterAddAxis(device.Buffer, device.Buffer, device.View, int, int, int, int) {
	f.call("ScatterAddAxis")
}
func (f *fake) Random(device.Distribution, device.Buffer, uint64, uint64, float32, float32) {
	f.call("Random")
}
func (f *fake) Transpose(device.Buffer, device.Buffer, int, int, int, int) { f.call("Transpose") }
func (f *fake) FillFrom(device.Buffer, device.Buffer, float32)             { f.call("FillFrom") }
func (f *fake) Binary(device.BinaryOp, device.Buffer, device.Buffer, device.Buffer) {
	f.call("Binary")
}
func (f *fake) Scale(device.Buffer, device.Buffer, float32)          { f.call("Scale") }
func (f *fake) Axpby(device.Buffer, device.Buffer, float32, float32) { f.call("Axpby") }
func (f *fake) Reduce(device.ReduceOp, int, device.Buffer, device.Buffer, int, int) {
	f.call("Reduce")
}
func (f *fake) RowScale(device.Buffer, device.Buffer, int, int, float32, float32) {
	f.call("RowScale")
}
func (f *fake) AddRow(device.Buffer, device.Buffer, int, int, float32) { f.call("AddRow") }
func (f *fake) PairDistanceMax(_, _, _, _, _ device.Buffer, _, _, _, _ int) {
	f.call("PairDistanceMax")
}
func (f *fake) Gather(device.Buffer, device.Buffer, device.Buffer, int)     { f.call("Gather") }
func (f *fake) ScatterAdd(device.Buffer, device.Buffer, device.Buffer, int) { f.call("ScatterAdd") }
func (f *fake) RMSNorm(_, _, _ device.Buffer, _, _ int, _ float32)          { f.call("RMSNorm") }
func (f *fake) RMSNormBackward(_, _, _, _ device.Buffer, _, _ int)          { f.call("RMSNormBackward") }
func (f *fake) RoPE(_, _, _, _ device.Buffer, _ device.AttentionShape, _ bool) {
	f.call("RoPE")
}
func (f *fake) SwiGLU(_, _, _ device.Buffer)               { f.call("SwiGLU") }
func (f *fake) SwiGLUBackward(_, _, _, _, _ device.Buffer) { f.call("SwiGLUBackward") }
func (f *fake) Attention(_, _, _, _, _ device.Buffer, _ device.AttentionShape, _ float32) {
	f.call("Attention")
}
func (f *fake) AttentionBackward(_, _, _, _, _, _, _, _, _ device.Buffer, _ device.AttentionShape, _ float32) {
	f.call("AttentionBackward")
}
func (f *fake) CrossEntropy(_, _, _, _ device.Buffer, _, _ int) { f.call("CrossEntropy") }
func (f *fake) CrossEntropyBackward(_, _, _, _, _ device.Buffer, _, _ int) {
	f.call("CrossEntropyBackward")
}
func (f *fake) CrossEntropyWithGrad(_, _, _, _ device.Buffer, _, _ int, _ float32) {
	f.call("CrossEntropyWithGrad")
}
func (f *fake) AdamWStep(_, _, _, _, _ device.Buffer, _ device.AdamW) { f.call("AdamWStep") }

var _ device.Device = (*fake)(nil)

// argument returns a value of type t for a call: a fake buffer for every
// device.Buffer (inside structs too), empty slices, zero otherwise.
func argument(t reflect.Type) reflect.Value {
	bufType := reflect.TypeFor[device.Buffer]()
	v := reflect.New(t).Elem()
	switch {
	case t == bufType:
		v.Set(reflect.ValueOf(fakeBuffer{}))
	case t.Kind() == reflect.Struct:
		for i := range t.NumField() {
			if f := v.Field(i); f.CanSet() {
				f.Set(argument(t.Field(i).Type))
			}
		}
	case t.Kind() == reflect.Slice:
		v.Set(reflect.MakeSlice(t, 0, 0))
	}
	return v
}

// TestEveryMethodForwardedAndTimed calls every method of device.Device on
// the wrapper through reflection, with recording on, and checks that the
// call reached the wrapped device and that an operation named after the
// method ("Gemm", or "Binary/add" for Binary) was recorded. Only Name is
// exempt from timing.
func TestEveryMethodForwardedAndTimed(t *testing.T) {
	st := reflect.TypeFor[profile.Device]()
	for i := range st.NumField() {
		if st.Field(i).Anonymous {
			t.Errorf("profile.Device embeds %v: its methods would be forwarded untimed", st.Field(i).Type)
		}
	}
	f := &fake{}
	p := profile.Wrap(f)
	if p.Unwrap() != device.Device(f) {
		t.Error("Unwrap does not return the wrapped device")
	}
	p.Record(true)
	iface := reflect.TypeFor[device.Device]()
	pv := reflect.ValueOf(p)
	for i := range iface.NumMethod() {
		m := iface.Method(i)
		args := make([]reflect.Value, m.Type.NumIn())
		for j := range args {
			args[j] = argument(m.Type.In(j))
		}
		f.calls = nil
		p.Reset()
		pv.MethodByName(m.Name).Call(args)
		if !slices.Contains(f.calls, m.Name) {
			t.Errorf("%s: the call did not reach the wrapped device (it saw %v)", m.Name, f.calls)
		}
		if m.Name == "Name" {
			continue
		}
		timed := false
		for _, o := range p.Ops() {
			if (o.Name == m.Name || strings.HasPrefix(o.Name, m.Name+"/")) && o.Calls == 1 {
				timed = true
			}
		}
		if !timed {
			t.Errorf("%s: no operation recorded for the call (recorded %v)", m.Name, p.Ops())
		}
	}
}
