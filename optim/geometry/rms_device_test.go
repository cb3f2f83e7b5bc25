package geometry

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/hilbert-ml/hilbert/device/compose"
	"github.com/hilbert-ml/hilbert/device/cpu"
)

// HilbertRMSDevice on the CPU backend equals HilbertRMS (the same float32
// logits; only the float64 sum's order differs): the recipe's example,
// and random steps and panels of one and several chunks.
func TestHilbertRMSDevice(t *testing.T) {
	rms, err := HilbertRMSDevice(onCPU(f32(1, 3, -2, 3, 4, -1)), 3, 2, onCPU(f32(1, 0, 0, 1)), 2)
	if err != nil {
		t.Fatal(err)
	}
	approx(t, "Hilbert RMS", rms, math.Sqrt(26), 1e-12)
	rng := rand.New(rand.NewPCG(8, 8))
	for _, sh := range [][3]int{{1, 1, 1}, {97, 16, 5}, {300, 33, 256}, {500, 64, 700}} {
		v, d, n := sh[0], sh[1], sh[2]
		s, h := randMatrix(rng, v, d, 1e-3), randMatrix(rng, n, d, 1)
		want, err := HilbertRMS(cpu.New(), s, v, d, h, n)
		if err != nil {
			t.Fatal(err)
		}
		got, err := HilbertRMSDevice(onCPU(s), v, d, onCPU(h), n)
		if err != nil {
			t.Fatal(err)
		}
		approx(t, "HilbertRMSDevice", got, want, 1e-12*want)
	}
	if r, err := HilbertRMSDevice(onCPU(nil), 0, 2, onCPU(f32(1, 2)), 1); err != nil || r != 0 {
		t.Errorf("empty step: %v %v", r, err)
	}
	if _, err := HilbertRMSDevice(onCPU(f32(1, 2)), 1, 2, onCPU(nil), 0); err == nil {
		t.Error("empty panel accepted")
	}
	if _, err := HilbertRMSDevice(onCPU(f32(1, 2)), 1, 2, onCPU(f32(1)), 1); err == nil {
		t.Error("short panel accepted")
	}
}

// hilbertRMS64 is the Hilbert RMS of the float32 step s over the panel h
// in float64 throughout: the reference of the float32 computations.
func hilbertRMS64(s []float32, v, d int, h []float32, n int) float64 {
	var sum float64
	for k := range n {
		lo, hi := math.Inf(1), math.Inf(-1)
		for i := range v {
			var z float64
			for j := range d {
				z += float64(s[i*d+j]) * float64(h[k*d+j])
			}
			lo, hi = min(lo, z), max(hi, z)
		}
		sum += (hi - lo) * (hi - lo)
	}
	return math.Sqrt(sum / float64(n))
}

// commonRowCases are steps with a row common to all their rows, in units
// of the rows' spread (0: none), of one block of rows and of several.
var commonRowCases = []struct {
	v, d, n int
	common  float64
}{
	{50, 16, 40, 0}, {50, 16, 40, 1e3}, {50, 16, 40, 1e7},
	{stepBlock + 37, 8, 3, 1e3}, {stepBlock + 37, 8, 3, 1e7},
}

// commonRowStep returns a random step (v x d, entries of size 1e-3) plus
// a common row of common x its spread, and a panel (n x d).
func commonRowStep(rng *rand.Rand, v, d, n int, common float64) (s, h []float32) {
	s, h = randMatrix(rng, v, d, 1e-3), randMatrix(rng, n, d, 1)
	row := make([]float64, d)
	for j := range row {
		row[j] = common * 1e-3 * (1 + rng.Float64())
	}
	for i := range v {
		for j := range d {
			s[i*d+j] = float32(float64(s[i*d+j]) + row[j])
		}
	}
	return s, h
}

// TestHilbertRMSCommonRow: a row common to every row of the step changes
// no logit difference, so the Hilbert RMS must not see it; uncentred
// float32 products lost 1.9e-6 of the value to a common row 1000 times the
// rows' norm and 44% to one 1e7 times their spread. Every path (the host
// function on the CPU and on a Core-only view, the device function) stays
// within float32 rounding of the float64 value, for steps of one block of
// rows and of several. (The CUDA path: TestEmulatorHilbertRMSCommonRow.)
func TestHilbertRMSCommonRow(t *testing.T) {
	rng := rand.New(rand.NewPCG(26, 1))
	for _, c := range commonRowCases {
		s, h := commonRowStep(rng, c.v, c.d, c.n, c.common)
		want := hilbertRMS64(s, c.v, c.d, h, c.n)
		host, err := HilbertRMS(cpu.New(), s, c.v, c.d, h, c.n)
		if err != nil {
			t.Fatal(err)
		}
		core, err := HilbertRMS(compose.CoreOnly(cpu.New()), s, c.v, c.d, h, c.n)
		if err != nil {
			t.Fatal(err)
		}
		dev, err := HilbertRMSDevice(onCPU(s), c.v, c.d, onCPU(h), c.n)
		if err != nil {
			t.Fatal(err)
		}
		for _, got := range []struct {
			name string
			rms  float64
		}{{"HilbertRMS", host}, {"HilbertRMS (Core only)", core}, {"HilbertRMSDevice", dev}} {
			if !(math.Abs(got.rms-want) <= 1e-6*want) {
				t.Errorf("v %d, d %d, common row %g x spread: %s = %.9g, float64 %.9g (relative error %.2g)",
					c.v, c.d, c.common, got.name, got.rms, want, math.Abs(got.rms-want)/want)
			}
		}
	}
}
