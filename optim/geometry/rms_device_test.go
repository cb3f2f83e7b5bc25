package geometry

import (
	"math"
	"math/rand/v2"
	"testing"

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
