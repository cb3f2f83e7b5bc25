package geometry

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
)

// The CPU and CUDA backends have the kernel (by its method alone).
var (
	_ PairDistanceMaxer = (*cpu.Device)(nil)
	_ PairDistanceMaxer = (*cuda.Device)(nil)
)

// pairCase checks PairDistanceMax against its composition: the running
// maximum over two column tiles of one row block, a diagonal tile (only
// pairs above the diagonal count) and one to its right; best starts at
// -Inf but for a few rows, and one NaN is in g.
func pairCase() devicetest.Capability {
	const pr, pc = 17, 23
	best := make([]float64, pr)
	for i := range best {
		best[i] = math.Inf(-1)
	}
	best[3], best[10] = 1e9, -1e9
	g := devicetest.Randoms(69, pr*2*pc, 1)
	g[5] = math.NaN()
	norms := func(seed uint64, n int) devicetest.Data {
		v := devicetest.Randoms(seed, n, 2)
		for i := range v {
			v[i] = math.Abs(v[i]) + 0.05
		}
		return devicetest.Data{Floats: v}
	}
	return devicetest.Capability{Name: "PairDistanceMax", Has: compose.Has[PairDistanceMaxer],
		Buffers: []devicetest.Data{{Floats: best}, {Int32s: make([]int32, pr)}, {Floats: g}, norms(70, pr), norms(71, 2*pc)},
		Run: func(d device.Core, b []device.Buffer) {
			for k, c0 := range []int{0, 40} {
				if err := pairDistanceMax(d, b[0], b[1], b[2].Slice(k*pr*pc, pr*pc), b[3], b[4].Slice(k*pc, pc), pr, pc, 0, c0); err != nil {
					panic(err) // scratch allocation on the CPU or the emulator
				}
			}
		}}
}

// TestPairDistanceMaxAgainstComposition runs pairCase on the CPU backend,
// on the CPU through device/profile (which must record the kernel) and
// on the CUDA backend over its CPU emulator (skipped without g++).
func TestPairDistanceMaxAgainstComposition(t *testing.T) {
	prof := profile.Wrap(cpu.New())
	for _, c := range []struct {
		name string
		dev  func(t *testing.T) device.Device
	}{
		{"cpu", func(*testing.T) device.Device { return cpu.New() }},
		{"profiled", func(*testing.T) device.Device { return prof }},
		{"cuda-emulator", func(t *testing.T) device.Device { return openEmulator(t) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := c.dev(t)
			if !compose.Has[PairDistanceMaxer](d) {
				t.Fatalf("%s: the kernel is not found", c.name)
			}
			prof.Record(true)
			devicetest.Capabilities(t, d, []devicetest.Capability{pairCase()})
			prof.Record(false)
		})
	}
	if ops := prof.Ops(); !slices.ContainsFunc(ops, func(o profile.Op) bool { return o.Name == "PairDistanceMax" }) {
		t.Errorf("the profile recorded %+v, want PairDistanceMax", ops)
	}
}
