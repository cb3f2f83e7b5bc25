package cpu_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/cpu"
)

// The tests in this package compare every kernel with a float64 reference
// written here, independently of the kernel code. They call the backend's
// own methods (the Core and every capability), the kernels device/compose
// dispatches to.
//
// Tolerances: float32 has a unit roundoff u = 2^-24 ~ 6e-8. A kernel that
// rounds each input and output once and accumulates in float64 is within a
// few u of the exact result; one that accumulates n terms in float32 (GEMM)
// is within about n*u times the sum of the magnitudes of the terms (the
// classical gamma_n bound). Each test states which case it is in. A wrong
// formula, index or transposition produces errors of order 1, many orders of
// magnitude above these bounds.

// u32 is the unit roundoff of float32.
const u32 = 1.0 / (1 << 24)

// dev is the device under test.
var dev = cpu.New()

func TestMain(m *testing.M) {
	// Report the GEMM once so that a log of the two CI passes (OpenBLAS and
	// HILBERT_GEMM=go) shows which one each ran.
	fmt.Fprintf(os.Stderr, "device/cpu tests: GEMM %s, %d threads\n", cpu.GemmName(), cpu.Threads())
	os.Exit(m.Run())
}

// newRand returns a deterministic generator per test.
func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15)) }

// randSlice returns n values uniform in [-scale, scale).
func randSlice(r *rand.Rand, n int, scale float32) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = scale * (2*r.Float32() - 1)
	}
	return s
}

// buf wraps a copy of data as a CPU buffer.
func buf(data []float32) device.Buffer { return cpu.NewFloat32(append([]float32(nil), data...)) }

// ibuf makes an Int32 buffer holding data.
func ibuf(t testing.TB, data []int32) device.Buffer {
	t.Helper()
	b, err := dev.Alloc(device.Int32, len(data))
	if err != nil {
		t.Fatal(err)
	}
	dev.CopyInt32FromHost(b, data)
	return b
}

// zeros allocates a float32 buffer of n zeros.
func zeros(t testing.TB, n int) device.Buffer {
	t.Helper()
	b, err := dev.Alloc(device.Float32, n)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// host returns the contents of a float32 buffer.
func host(b device.Buffer) []float32 {
	s := make([]float32, b.Len())
	dev.CopyToHost(s, b)
	return s
}

// f64 converts to float64.
func f64(s []float32) []float64 {
	d := make([]float64, len(s))
	for i, v := range s {
		d[i] = float64(v)
	}
	return d
}

// checkClose fails t if any got[i] differs from want[i] by more than
// atol + rtol*|want[i]|, or if the lengths differ, or if got is NaN where
// want is not. It reports the first few offending indices.
func checkClose(t testing.TB, what string, got []float32, want []float64, rtol, atol float64) {
	t.Helper()
	checkCloseTol(t, what, got, want, func(i int) float64 { return atol + rtol*math.Abs(want[i]) })
}

// checkCloseTol is checkClose with a per-element tolerance.
func checkCloseTol(t testing.TB, what string, got []float32, want []float64, tol func(i int) float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %d values, want %d", what, len(got), len(want))
	}
	bad, worst, worstAt := 0, 0.0, -1
	for i := range got {
		g, w := float64(got[i]), want[i]
		if math.IsNaN(w) && math.IsNaN(g) {
			continue
		}
		if math.IsInf(w, 0) && g == w {
			continue
		}
		d := math.Abs(g - w)
		if !(d <= tol(i)) { // also catches NaN in got
			if bad < 5 {
				t.Errorf("%s[%d] = %v, want %v (|diff| %.3g > tol %.3g)", what, i, g, w, d, tol(i))
			}
			bad++
		}
		if d > worst || math.IsNaN(d) {
			worst, worstAt = d, i
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d of %d values out of tolerance; worst |diff| %.3g at %d", what, bad, len(got), worst, worstAt)
	}
}

// checkEqual fails t unless got and want are bitwise-equal as float32
// values (NaN matching NaN).
func checkEqual(t testing.TB, what string, got, want []float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %d values, want %d", what, len(got), len(want))
	}
	bad := 0
	for i := range got {
		if got[i] != want[i] && !(got[i] != got[i] && want[i] != want[i]) {
			if bad < 5 {
				t.Errorf("%s[%d] = %v, want %v", what, i, got[i], want[i])
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d of %d values differ", what, bad, len(got))
	}
}

// withThreads runs f with the kernel thread count set to n and restores it.
func withThreads(n int, f func()) {
	old := cpu.Threads()
	cpu.SetThreads(n)
	defer cpu.SetThreads(old)
	f()
}
