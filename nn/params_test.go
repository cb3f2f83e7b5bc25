package nn

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/safetensors"
	"github.com/hilbert-ml/hilbert/tensor"
)

type inner struct {
	W     *tensor.Tensor
	Extra *tensor.Tensor `nn:"bias_like"`
}

type outer struct {
	Embedded
	First   Linear
	Layers  []inner
	Pair    [2]*inner
	Skipped *tensor.Tensor `nn:"-"`
	Nil     *tensor.Tensor
	Any     any
	Width   int
	private *tensor.Tensor
	Self    *outer
}

type Embedded struct{ Promoted *tensor.Tensor }

func TestParametersNaming(t *testing.T) {
	dev := cpu.New()
	in := NewInit(dev, 1, 1)
	mk := func() *tensor.Tensor { return in.Normal(2) }
	m := &outer{
		Embedded: Embedded{Promoted: mk()},
		First:    Linear{Weight: mk()},
		Layers:   []inner{{W: mk(), Extra: mk()}, {W: mk()}},
		Pair:     [2]*inner{nil, {W: mk()}},
		Skipped:  mk(),
		Any:      &Linear{Weight: mk()},
		private:  mk(),
	}
	m.Self = m // cycles are followed once
	want := []string{"promoted", "first.weight", "layers.0.w", "layers.0.bias_like", "layers.1.w", "pair.1.w", "any.weight"}
	ps := Parameters(m)
	var got []string
	for _, p := range ps {
		got = append(got, p.Name)
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("names %v, want %v", got, want)
	}
	if m.Skipped.Name != "" || m.private.Name != "" {
		t.Error("skipped fields were named")
	}
	if NumParams(ps) != 2*len(want) {
		t.Errorf("NumParams %d", NumParams(ps))
	}
}

func TestParametersPanics(t *testing.T) {
	cases := []struct {
		name string
		m    any
		want string
	}{
		{"not a struct", 3, "want a struct"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			defer func() {
				r := recover()
				if s, _ := r.(string); !strings.Contains(s, c.want) {
					t.Errorf("panic %v, want %q", r, c.want)
				}
			}()
			Parameters(c.m)
		})
	}
}

type pair struct{ A, B Linear }

func newPair(seed uint64, bRows int) *pair {
	in := NewInit(cpu.New(), seed, 1)
	return &pair{NewLinear(in, 3, 2), NewLinear(in, 3, bRows)}
}

func TestCheckpoint(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.safetensors")
	src := newPair(1, 4)
	if err := Save(path, src, map[string]string{"step": "5"}); err != nil {
		t.Fatal(err)
	}
	dst := newPair(2, 4)
	meta, err := Load(path, dst)
	if err != nil {
		t.Fatal(err)
	}
	if meta["step"] != "5" {
		t.Errorf("metadata %v", meta)
	}
	for i, p := range Parameters(src) {
		a, b := p.Float32s(), Parameters(dst)[i].Float32s()
		for j := range a {
			if a[j] != b[j] {
				t.Fatalf("%s differs after load", p.Name)
			}
		}
	}

	// Files that do not match the model are refused, naming the tensor,
	// before any parameter changes.
	write := func(name string, ts []safetensors.Tensor) string {
		p := filepath.Join(dir, name)
		if err := safetensors.Save(p, ts, nil); err != nil {
			t.Fatal(err)
		}
		return p
	}
	f32 := func(name string, shape ...int) safetensors.Tensor {
		return safetensors.Tensor{Name: name, DType: safetensors.F32, Shape: shape, Data: make([]byte, 4*tensor.Shape(shape).Numel())}
	}
	cases := []struct {
		name string
		path string
		want string
	}{
		{"missing", write("missing", []safetensors.Tensor{f32("a.weight", 2, 3)}), `tensor "b.weight" is missing`},
		{"shape", write("shape", []safetensors.Tensor{f32("a.weight", 2, 3), f32("b.weight", 3, 4)}), `tensor "b.weight" has shape [3 4] (the model's is [4 3])`},
		{"dtype", write("dtype", []safetensors.Tensor{f32("a.weight", 2, 3), {Name: "b.weight", DType: safetensors.I32, Shape: []int{4, 3}, Data: make([]byte, 48)}}), `tensor "b.weight" has dtype I32`},
		{"extra", write("extra", []safetensors.Tensor{f32("a.weight", 2, 3), f32("b.weight", 4, 3), f32("c.weight", 1)}), `tensors not in the model: "c.weight"`},
		{"corrupt", func() string {
			p := filepath.Join(dir, "corrupt")
			os.WriteFile(p, []byte("garbage!garbage!"), 0o644)
			return p
		}(), "header"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := newPair(3, 4)
			before := m.B.Weight.Float32s()
			_, err := Load(c.path, m)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want %q", err, c.want)
			}
			if after := m.B.Weight.Float32s(); after[0] != before[0] {
				t.Error("a failed load changed a parameter")
			}
		})
	}
}

func newPairOf(seed uint64, dt device.DType) *pair {
	in := NewInit(cpu.New(), seed, 1)
	in.DType = dt
	return &pair{NewLinearBias(in, 3, 2), NewLinear(in, 3, 4)}
}

// TestCheckpointFloat64: float64 parameters save as F64 and load back bit
// for bit; a float32 checkpoint loads into a float64 model exactly; an F64
// tensor is refused by a float32 model, saying how to load it.
func TestCheckpointFloat64(t *testing.T) {
	dir := t.TempDir()
	p64, p32 := filepath.Join(dir, "m64.safetensors"), filepath.Join(dir, "m32.safetensors")
	src := newPairOf(1, device.Float64)
	if err := Save(p64, src, nil); err != nil {
		t.Fatal(err)
	}
	f, err := safetensors.Open(p64)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range f.Tensors() {
		if in.DType != safetensors.F64 {
			t.Errorf("%s saved as %s, want F64", in.Name, in.DType)
		}
	}
	f.Close()
	dst := newPairOf(2, device.Float64)
	if _, err := Load(p64, dst); err != nil {
		t.Fatal(err)
	}
	for i, p := range Parameters(src) {
		a, b := p.Float64s(), Parameters(dst)[i].Float64s()
		for j := range a {
			if a[j] != b[j] {
				t.Fatalf("%s[%d] = %v after load, saved %v", p.Name, j, b[j], a[j])
			}
		}
	}

	src32 := newPairOf(3, device.Float32)
	if err := Save(p32, src32, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(p32, dst); err != nil {
		t.Fatalf("float32 checkpoint into a float64 model: %v", err)
	}
	for i, p := range Parameters(src32) {
		a, b := p.Float32s(), Parameters(dst)[i].Float64s()
		for j := range a {
			if float64(a[j]) != b[j] {
				t.Fatalf("%s[%d] = %v, float32 checkpoint %v", p.Name, j, b[j], a[j])
			}
		}
	}
	_, err = Load(p64, newPairOf(4, device.Float32))
	if err == nil || !strings.Contains(err.Error(), `tensor "a.weight" is F64 and the model's parameter float32 (build the model with DType float64`) {
		t.Fatalf("F64 into float32: error %v", err)
	}
}
