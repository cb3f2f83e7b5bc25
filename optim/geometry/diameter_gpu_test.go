package geometry

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/device/cuda"
	"github.com/hilbert-ml/hilbert/internal/cudaemu"
)

// TestGPURowDiameterDevice runs RowDiameterDevice on CUDA (cuBLAS Gram
// tiles and the PairDistanceMax kernel) and requires the exact diameter:
// equal to RowDiameter on the host and, where it is affordable, to the
// brute force. It skips, saying why, without a GPU; -short skips the
// paper's shape (V = 50257, d = 512).
func TestGPURowDiameterDevice(t *testing.T) { rowDiameterOnCUDA(t, openGPU(t), 1<<30) }

// TestEmulatorRowDiameterDevice runs the same cases, up to V = 3000, on the
// CPU emulation of CUDA (internal/cudaemu): the real host code, cuBLAS
// calls and the PairDistanceMax kernel's source.
func TestEmulatorRowDiameterDevice(t *testing.T) { rowDiameterOnCUDA(t, openEmulator(t), 3000) }

// trialKinds names makeTrialKind's kinds.
var trialKinds = map[string]int{"plain": 0, "shifted": 1, "sphere": 2, "copies": 3}

// openGPU opens CUDA device 0 with float32 products or skips, saying why.
func openGPU(t *testing.T) *cuda.Device {
	t.Setenv(cuda.TF32Env, "0") // the guarantees need float32 products
	g, err := cuda.New(0)
	if err != nil {
		t.Skipf("no CUDA device: %v", err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

// openEmulator opens the emulated CUDA device (skipping without g++).
func openEmulator(t *testing.T) *cuda.Device {
	cudaemu.Setenv(t)
	g, err := cuda.New(0)
	if err != nil {
		t.Fatalf("CUDA emulator: %v", err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

// rowDiameterOnCUDA checks RowDiameterDevice on g for the cases with at
// most maxV rows.
func rowDiameterOnCUDA(t *testing.T, g *cuda.Device, maxV int) {
	rng := rand.New(rand.NewPCG(7, 7))
	cases := []struct {
		v, d  int
		kind  string
		brute bool
	}{
		{1, 8, "plain", true},
		{2, 8, "plain", true},
		{1025, 17, "plain", true},
		{3000, 64, "shifted", true},
		{2049, 128, "sphere", true},
		{400, 32, "copies", true},  // 40,000 near-maximal pairs: all rechecked
		{1500, 32, "copies", true}, // 562,500: more than 65536, so not Exact
		{50257, 512, "step", false},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s/%dx%d", c.kind, c.v, c.d), func(t *testing.T) {
			if c.v > 10000 && testing.Short() {
				t.Skip("-short")
			}
			if c.v > maxV {
				t.Skipf("V = %d: more than this device's limit of %d for the test", c.v, maxV)
			}
			v, d := c.v, c.d
			s := randMatrix(rng, v, d, 1)
			if kind, ok := trialKinds[c.kind]; ok {
				makeTrialKind(rng, s, kind, v, d)
			} else { // "step"
				s = benchStep(v, d)
			}
			buf, err := g.Alloc(device.Float32, v*d)
			if err != nil {
				t.Fatal(err)
			}
			defer g.Free(buf)
			g.CopyFromHost(buf, s)
			r, err := RowDiameterDevice(buf, v, d)
			if err != nil {
				t.Fatal(err)
			}
			host, err := RowDiameter(cpu.New(), s, v, d)
			if err != nil {
				t.Fatal(err)
			}
			want := host.D
			if c.brute {
				want = bruteDiameter(s, v, d)
			}
			if overflow := c.kind == "copies" && c.v*c.v/4 > 1<<16; overflow {
				// Too many near-maximal pairs: the documented fallback.
				if r.Exact || r.D > want || r.Upper < want || host.D != want {
					t.Fatalf("CUDA D = %.17g (exact %v, upper %.17g), host %.17g, want not exact, D <= %.17g <= upper", r.D, r.Exact, r.Upper, host.D, want)
				}
			} else if !r.Exact || r.D != want || host.D != want {
				t.Fatalf("CUDA D = %.17g (exact %v, %d candidates), host %.17g, want %.17g", r.D, r.Exact, r.Candidates, host.D, want)
			}
			if v >= 2 && rowDistance(s, d, r.I, r.J) != r.D {
				t.Fatalf("pair (%d, %d) does not attain D", r.I, r.J)
			}
			t.Logf("D = %.9g, pair (%d, %d), %d candidates (host %d)", r.D, r.I, r.J, r.Candidates, host.Candidates)
		})
	}
}

// TestGPUHilbertRMSDevice compares HilbertRMSDevice on CUDA with
// HilbertRMS on the host (float32 products in another order: a few ulps of
// float32).
func TestGPUHilbertRMSDevice(t *testing.T) { hilbertRMSOnCUDA(t, openGPU(t), 50257) }

// TestEmulatorHilbertRMSDevice runs the comparison at V = 3001 on the CUDA
// emulator.
func TestEmulatorHilbertRMSDevice(t *testing.T) { hilbertRMSOnCUDA(t, openEmulator(t), 3001) }

func hilbertRMSOnCUDA(t *testing.T, g *cuda.Device, v int) {
	rng := rand.New(rand.NewPCG(9, 9))
	d, n := 128, 600
	s, h := randMatrix(rng, v, d, 1e-3), randMatrix(rng, n, d, 1)
	sb, hb := upload(t, g, s), upload(t, g, h)
	defer g.Free(sb)
	defer g.Free(hb)
	got, err := HilbertRMSDevice(sb, v, d, hb, n)
	if err != nil {
		t.Fatal(err)
	}
	want, err := HilbertRMS(cpu.New(), s, v, d, h, n)
	if err != nil {
		t.Fatal(err)
	}
	approx(t, "CUDA HilbertRMS", got, want, 1e-5*want)
}

// TestGPUHilbertRMSCommonRow runs TestHilbertRMSCommonRow's steps through
// HilbertRMSDevice on CUDA: within float32 rounding of the float64 value
// whatever row the step's rows share.
func TestGPUHilbertRMSCommonRow(t *testing.T) { hilbertRMSCommonRowOnCUDA(t, openGPU(t)) }

// TestEmulatorHilbertRMSCommonRow runs them on the CUDA emulator (the
// device's ReduceAxis, AddRow and cuBLAS products).
func TestEmulatorHilbertRMSCommonRow(t *testing.T) { hilbertRMSCommonRowOnCUDA(t, openEmulator(t)) }

func hilbertRMSCommonRowOnCUDA(t *testing.T, g *cuda.Device) {
	rng := rand.New(rand.NewPCG(26, 1))
	for _, c := range commonRowCases {
		s, h := commonRowStep(rng, c.v, c.d, c.n, c.common)
		sb, hb := upload(t, g, s), upload(t, g, h)
		got, err := HilbertRMSDevice(sb, c.v, c.d, hb, c.n)
		g.Free(sb)
		g.Free(hb)
		if err != nil {
			t.Fatal(err)
		}
		if want := hilbertRMS64(s, c.v, c.d, h, c.n); !(math.Abs(got-want) <= 1e-6*want) {
			t.Errorf("v %d, d %d, common row %g x spread: CUDA HilbertRMSDevice = %.9g, float64 %.9g (relative error %.2g)",
				c.v, c.d, c.common, got, want, math.Abs(got-want)/want)
		}
	}
}

// upload copies x into a new float32 buffer on g.
func upload(t *testing.T, g *cuda.Device, x []float32) device.Buffer {
	b, err := g.Alloc(device.Float32, len(x))
	if err != nil {
		t.Fatal(err)
	}
	g.CopyFromHost(b, x)
	return b
}
