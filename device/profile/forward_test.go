package profile_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/compose"
	"github.com/hilbert-ml/hilbert/device/profile"
)

// fake is a device.Device with every capability that records which
// methods were called. It must implement every method by hand: a method
// added to an interface breaks this file until it is added here too, and then the test below checks
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
func (f *fake) Axpby(device.Buffer, device.Buffer, float32, float32)       { f.call("Axpby") }
func (f *fake) Reduce(device.ReduceOp, int, device.Buffer, device.Buffer, int, int) {
	f.call("Reduce")
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

var (
	_ device.Device = (*fake)(nil)
	_ device.Fused  = (*fake)(nil)
)

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

// methods lists the methods of the Core and of every capability.
func methods() []reflect.Method {
	var ms []reflect.Method
	for _, iface := range []reflect.Type{reflect.TypeFor[device.Core](), reflect.TypeFor[device.Fused]()} {
		for i := range iface.NumMethod() {
			ms = append(ms, iface.Method(i))
		}
	}
	return ms
}

// callAll calls every method of the Core and the capabilities on p with
// recording on; check sees each method's name, the calls that reached the
// wrapped device and the operations recorded.
func callAll(t *testing.T, p *profile.Device, f *fake, check func(name string, calls []string, ops []profile.Op)) {
	t.Helper()
	p.Record(true)
	pv := reflect.ValueOf(p)
	for _, m := range methods() {
		args := make([]reflect.Value, m.Type.NumIn())
		for j := range args {
			args[j] = argument(m.Type.In(j))
		}
		f.calls = nil
		p.Reset()
		pv.MethodByName(m.Name).Call(args)
		check(m.Name, f.calls, p.Ops())
	}
}

// recorded reports whether ops holds one call of an operation named name
// or name/...
func recorded(ops []profile.Op, name string) bool {
	for _, o := range ops {
		if (o.Name == name || strings.HasPrefix(o.Name, name+"/")) && o.Calls == 1 {
			return true
		}
	}
	return false
}

// TestEveryMethodForwardedAndTimed calls every method of device.Core and
// of every capability on the wrapper through reflection, with recording
// on, and checks that the call reached the wrapped device (which has every
// capability) and that an operation named after the method ("Gemm", or
// "Binary/add" for Binary) was recorded. Only Name is exempt from timing.
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
	callAll(t, p, f, func(name string, calls []string, ops []profile.Op) {
		if !slices.Contains(calls, name) {
			t.Errorf("%s: the call did not reach the wrapped device (it saw %v)", name, calls)
		}
		if name == "Name" {
			return
		}
		if !recorded(ops, name) {
			t.Errorf("%s: no operation recorded for the call (recorded %v)", name, ops)
		}
		for _, o := range ops {
			if strings.HasSuffix(o.Name, "/composed") {
				t.Errorf("%s: recorded %s although the wrapped device has the capability", name, o.Name)
			}
		}
	})
}

// TestCapabilitiesComposedWhenMissing wraps a device of the Core alone:
// every capability method must still be recorded, as "Name/composed", and
// must not reach the wrapped device under its own name (the wrapped device
// has no such method; the composition runs core methods on it).
func TestCapabilitiesComposedWhenMissing(t *testing.T) {
	f := &fake{}
	p := profile.Wrap(compose.CoreOnly(f))
	core := reflect.TypeFor[device.Core]()
	callAll(t, p, f, func(name string, calls []string, ops []profile.Op) {
		if _, isCore := core.MethodByName(name); isCore {
			if !slices.Contains(calls, name) {
				t.Errorf("%s: the core call did not reach the wrapped device (it saw %v)", name, calls)
			}
			return
		}
		if slices.Contains(calls, name) {
			t.Errorf("%s: reached the wrapped device's own method through a Core-only view", name)
		}
		if !recorded(ops, name+"/composed") && !recorded(ops, name) {
			t.Errorf("%s: no operation recorded (recorded %v)", name, ops)
		}
		found := false
		for _, o := range ops {
			found = found || (strings.HasPrefix(o.Name, name) && strings.HasSuffix(o.Name, "/composed"))
		}
		if !found {
			t.Errorf("%s: not recorded as composed (recorded %v)", name, ops)
		}
	})
}

// outsider is a capability declared outside package device, as optim
// declares its kernels: the wrapper cannot forward it by name.
type outsider interface{ Outside(device.Buffer) }

// withOutside is the fake with the outside capability.
type withOutside struct{ *fake }

func (w withOutside) Outside(device.Buffer) { w.call("Outside") }

// runOutside runs the outside capability on d through compose.Run, its
// composition one Fill.
func runOutside(d device.Device) {
	compose.Run(d, "Outside", func(k outsider) { k.Outside(fakeBuffer{}) },
		func(c device.Core) { c.Fill(fakeBuffer{}, 1) })
}

// TestCapabilityDeclaredOutside checks that a capability the wrapper does
// not know reaches the wrapped device's kernel through compose.Run and is
// timed (through Around) under its name; that without the kernel its
// composition runs on the wrapped device, timed as "Outside/composed"
// once (its Fill is not timed again); and that nested wrappers each time
// it.
func TestCapabilityDeclaredOutside(t *testing.T) {
	for _, c := range []struct {
		name      string
		kernel    bool // the wrapped device has it (else its Core alone)
		wrappings int
		wantCall  string
		wantOp    string
	}{
		{"kernel", true, 1, "Outside", "Outside"},
		{"composed", false, 1, "Fill", "Outside/composed"},
		{"nested", true, 2, "Outside", "Outside"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := &fake{}
			var d device.Device = withOutside{f}
			if !c.kernel {
				d = compose.CoreOnly(d)
			}
			var ps []*profile.Device
			for range c.wrappings {
				p := profile.Wrap(d)
				p.Record(true)
				ps = append(ps, p)
				d = p
			}
			if got := compose.Has[outsider](d); got != c.kernel {
				t.Errorf("Has = %v through %d wrappers, want %v", got, c.wrappings, c.kernel)
			}
			runOutside(d)
			// Synchronize is the wrappers' own (recording waits for each call).
			calls := slices.DeleteFunc(f.calls, func(s string) bool { return s == "Synchronize" })
			if !slices.Equal(calls, []string{c.wantCall}) {
				t.Errorf("the wrapped device saw %v, want [%s]", calls, c.wantCall)
			}
			for i, p := range ps {
				ops := slices.DeleteFunc(p.Ops(), func(o profile.Op) bool { return o.Name == "Synchronize" })
				if len(ops) != 1 || ops[0].Name != c.wantOp || ops[0].Calls != 1 {
					t.Errorf("wrapper %d recorded %+v, want one call of %s", i, ops, c.wantOp)
				}
			}
		})
	}
}
