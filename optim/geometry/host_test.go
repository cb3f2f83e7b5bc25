package geometry

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/compose"
	"github.com/hilbert-ml/hilbert/device/cpu"
)

// TestHostFunctionsOnDevices: the host functions give bit-identical results
// on the CPU (in place, through device.HostMemory), on a Core-only view of
// it (the copy path of a device without host memory), and, for HilbertRMS,
// to the float64 value within float32 rounding.
func TestHostFunctionsOnDevices(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, c := range []struct{ v, d, n, tile int }{
		{7, 3, 5, 1024}, {300, 17, 300, 64}, {129, 64, 2, 50}, {40, 0, 3, 1024},
	} {
		s := make([]float32, c.v*c.d)
		h := make([]float32, c.n*c.d)
		for i := range s {
			s[i] = float32(rng.NormFloat64())
		}
		for i := range h {
			h[i] = float32(rng.NormFloat64())
		}
		old := DiameterTile
		DiameterTile = c.tile
		devs := []device.Core{cpu.New(), compose.CoreOnly(cpu.New())}
		var dm [2]Diameter
		var rms [2]float64
		for i, dev := range devs {
			var err error
			if dm[i], err = RowDiameter(dev, s, c.v, c.d); err != nil {
				t.Fatal(err)
			}
			if rms[i], err = HilbertRMS(dev, s, c.v, c.d, h, c.n); err != nil {
				t.Fatal(err)
			}
		}
		DiameterTile = old
		if dm[0] != dm[1] || math.Float64bits(rms[0]) != math.Float64bits(rms[1]) {
			t.Errorf("%+v: cpu gives %+v, %v; Core only %+v, %v", c, dm[0], rms[0], dm[1], rms[1])
		}
		if want := hilbertRMS64(s, c.v, c.d, h, c.n); !(math.Abs(rms[0]-want) <= 1e-6*want) {
			t.Errorf("%+v: HilbertRMS = %v, float64 %v", c, rms[0], want)
		}
	}
	if _, err := RowDiameter(nil, []float32{1, 2}, 2, 1); err == nil {
		t.Errorf("RowDiameter on a nil device: no error")
	}
}
