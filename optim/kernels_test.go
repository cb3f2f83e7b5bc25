package optim

import (
	"math"
	"slices"
	"testing"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/compose"
	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/device/cuda"
	"github.com/hilbert-ml/hilbert/device/devicetest"
	"github.com/hilbert-ml/hilbert/device/profile"
	"github.com/hilbert-ml/hilbert/internal/cudaemu"
)

// The CPU and CUDA backends have both kernels (by their methods alone).
var (
	_ AdamWStepper = (*cpu.Device)(nil)
	_ RowScaler    = (*cpu.Device)(nil)
	_ AdamWStepper = (*cuda.Device)(nil)
	_ RowScaler    = (*cuda.Device)(nil)
)

// kernelCases checks optim's kernels against their compositions: AdamW
// with and without the step output, RowScale out of place and in place.
func kernelCases() []devicetest.Capability {
	r := func(seed uint64, n int, s float64) devicetest.Data {
		return devicetest.Data{Floats: devicetest.Randoms(seed, n, s)}
	}
	moment := r(4, 1001, 0.01) // second moments are not negative
	for i, x := range moment.Floats {
		moment.Floats[i] = math.Abs(x)
	}
	s := adamScalars{lr: 1e-2, beta1: 0.9, beta2: 0.95, eps: 1e-8, wd: 0.1,
		bc1: 1 - math.Pow(0.9, 3), bc2: 1 - math.Pow(0.95, 3)}
	must := func(err error) {
		if err != nil {
			panic(err) // scratch allocation on the CPU or the emulator
		}
	}
	var cs []devicetest.Capability
	for _, withStep := range []bool{false, true} {
		name := "AdamWStep"
		if withStep {
			name += "/step"
		}
		cs = append(cs, devicetest.Capability{Name: name, Has: compose.Has[AdamWStepper],
			Buffers: []devicetest.Data{r(1, 1001, 1), r(2, 1001, 1), r(3, 1001, 0.1), moment, r(5, 1001, 1)},
			Run: func(d device.Core, b []device.Buffer) {
				step := b[4]
				if !withStep {
					step = nil
				}
				must(adamWStep(d, b[0], b[1], b[2], b[3], step, s))
			}})
	}
	return append(cs,
		devicetest.Capability{Name: "RowScale", Has: compose.Has[RowScaler],
			Buffers: []devicetest.Data{r(6, 37*129, 1), r(7, 37*129, 1)},
			Run: func(d device.Core, b []device.Buffer) {
				must(rowScale(d, b[0], b[1], 37, 129, 0.5, 1e-8))
			}},
		devicetest.Capability{Name: "RowScale/inplace", Has: compose.Has[RowScaler],
			Buffers: []devicetest.Data{r(8, 37*129, 1)},
			Run: func(d device.Core, b []device.Buffer) {
				must(rowScale(d, b[0], b[0], 37, 129, 1, 0.1))
			}})
}

// TestKernelsAgainstCompositions runs kernelCases on the CPU backend, on
// the CPU through device/profile (compose.Run finds the kernels behind
// the wrapper, which times them) and on the CUDA backend over its CPU
// emulator (skipped without g++).
func TestKernelsAgainstCompositions(t *testing.T) {
	prof := profile.Wrap(cpu.New())
	for _, c := range []struct {
		name string
		dev  func(t *testing.T) device.Device
	}{
		{"cpu", func(*testing.T) device.Device { return cpu.New() }},
		{"profiled", func(*testing.T) device.Device { return prof }},
		{"cuda-emulator", emulator},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := c.dev(t)
			if !compose.Has[AdamWStepper](d) || !compose.Has[RowScaler](d) {
				t.Fatalf("%s: the kernels are not found", c.name)
			}
			prof.Record(true)
			devicetest.Capabilities(t, d, kernelCases())
			prof.Record(false)
		})
	}
	var names []string
	for _, o := range prof.Ops() {
		names = append(names, o.Name)
	}
	for _, want := range []string{"AdamWStep", "RowScale"} {
		if !slices.Contains(names, want) {
			t.Errorf("the profile of the kernels recorded %v, want %s", names, want)
		}
	}
}

// TestKernelsComposedThroughProfile: on a backend of the Core alone the
// kernels run as their compositions, recorded so by device/profile.
func TestKernelsComposedThroughProfile(t *testing.T) {
	p := profile.Wrap(compose.CoreOnly(cpu.New()))
	b := make([]device.Buffer, 3)
	for i := range b {
		var err error
		if b[i], err = p.Alloc(device.Float32, 12); err != nil {
			t.Fatal(err)
		}
		p.Fill(b[i], float32(i+1))
	}
	p.Record(true)
	s := adamScalars{lr: 1e-2, beta1: 0.9, beta2: 0.95, eps: 1e-8, bc1: 0.1, bc2: 0.05}
	if err := adamWStep(p, b[0], b[1], b[2], b[2], nil, s); err != nil {
		t.Fatal(err)
	}
	if err := rowScale(p, b[0], b[1], 3, 4, 1, 0); err != nil {
		t.Fatal(err)
	}
	p.Record(false)
	var names []string
	for _, o := range p.Ops() {
		names = append(names, o.Name)
	}
	slices.Sort(names)
	if want := []string{"AdamWStep/composed", "RowScale/composed"}; !slices.Equal(names, want) {
		t.Errorf("recorded %v, want %v (each composition one row)", names, want)
	}
}

// emulator opens the CUDA backend on its CPU emulator, or skips without
// g++.
func emulator(t *testing.T) device.Device {
	cudaemu.Setenv(t)
	g, err := cuda.New(0)
	if err != nil {
		t.Fatalf("CUDA emulator: %v", err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}
