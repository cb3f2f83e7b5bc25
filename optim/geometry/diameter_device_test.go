package geometry

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/cpu"
)

// onCPU copies s into a buffer of the CPU backend.
func onCPU(s []float32) device.Buffer { return cpu.NewFloat32(append([]float32(nil), s...)) }

// checkDevice runs RowDiameterDevice on the CPU backend and requires the
// exact diameter: equal to the brute force, to RowDiameter's D, and
// attained by the pair it names.
func checkDevice(t *testing.T, what string, s []float32, v, d int) Diameter {
	t.Helper()
	r, err := RowDiameterDevice(onCPU(s), v, d)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	host, err := RowDiameter(cpu.New(), s, v, d)
	if err != nil {
		t.Fatalf("%s: host: %v", what, err)
	}
	want := bruteDiameter(s, v, d)
	if !r.Exact || r.D != want || r.Upper != r.D || host.D != want || !host.Exact {
		t.Fatalf("%s (v %d, d %d, tile %d): device D = %.17g (exact %v, upper %v), host %.17g (exact %v), brute force %.17g",
			what, v, d, DiameterTile, r.D, r.Exact, r.Upper, host.D, host.Exact, want)
	}
	if v >= 2 {
		if got := rowDistance(s, d, r.I, r.J); got != r.D || r.I >= r.J || r.J >= v {
			t.Fatalf("%s: pair (%d, %d) has distance %v, D %v", what, r.I, r.J, got, r.D)
		}
	}
	return r
}

// The recipe's worked examples (the same values as TestReferenceValues).
func TestRowDiameterDeviceReference(t *testing.T) {
	r := checkDevice(t, "3 points", f32(0, 0, 3, 4, -3, 4), 3, 2)
	approx(t, "D(3 points)", r.D, 6, 1e-15)
	if r.I != 1 || r.J != 2 || r.Candidates < 1 {
		t.Errorf("pair (%d, %d), %d candidates, want (1, 2)", r.I, r.J, r.Candidates)
	}
	s := f32(1, 2, -1, -2, 0.5, 3, 4, -1, 2, 0, 0, 0)
	approx(t, "D(4 points)", checkDevice(t, "4 points", s, 4, 3).D, 6.264982043070834, 1e-15)
	for i := range s {
		s[i] += f32(7, -4, 2)[i%3]
	}
	approx(t, "D(4 points shifted)", checkDevice(t, "4 points shifted", s, 4, 3).D, 6.264982043070834, 1e-15)
	approx(t, "D(S) of the backward bound", checkDevice(t, "backward", f32(1, 0, 0, 2, -1, -1), 3, 2).D, 3.1622776601683795, 1e-15)
	approx(t, "D(S) V = d = 2", checkDevice(t, "V=d=2", f32(0.5, 0, -0.5, 0), 2, 2).D, 1, 0)
}

// Random matrices of the four kinds of TestRowDiameterBruteForce (plain;
// shifted by a vector of norm 1e4, which ruins an uncentred fp32 Gram;
// rows on a sphere, with many near-ties; near copies of two rows) at
// tile sizes that exercise diagonal and ragged tiles, V = 1 and 2, V a
// multiple of the tile and one more: the device version equals the
// brute force and RowDiameter.
func TestRowDiameterDeviceBruteForce(t *testing.T) {
	defer func(t0 int) { DiameterTile = t0 }(DiameterTile)
	rng := rand.New(rand.NewPCG(4, 4))
	vs := []int{1, 2, 3, 16, 17, 63, 64, 65, 150}
	for trial := range 48 {
		v, d := vs[trial%len(vs)], 1+rng.IntN(40)
		if trial >= 2*len(vs) {
			v = 2 + rng.IntN(200)
		}
		DiameterTile = []int{1, 3, 7, 16, 64, 1024}[trial%6]
		s := randMatrix(rng, v, d, 1)
		makeTrialKind(rng, s, trial%4, v, d)
		checkDevice(t, "trial", s, v, d)
	}
}

// Scales where float32 squares overflow (1e25, 1e37) or underflow
// (1e-25, and 1e-41: subnormal entries): the power-of-two scaling keeps
// the result exact, on the device and (scaled likewise) on the host.
func TestRowDiameterDeviceScales(t *testing.T) {
	defer func(t0 int) { DiameterTile = t0 }(DiameterTile)
	DiameterTile = 16
	rng := rand.New(rand.NewPCG(5, 5))
	for _, scale := range []float64{1e-41, 1e-25, 1e-3, 1e25, 1e37} {
		v, d := 50, 13
		s := randMatrix(rng, v, d, 1)
		for i := range s {
			s[i] = float32(float64(s[i]) * scale)
		}
		checkDevice(t, fmt.Sprintf("scale %g", scale), s, v, d)
	}
	// Entries near the float32 maximum whose mean is 0: the centred rows
	// are the rows, and the distance (above MaxFloat32) comes out right.
	checkDevice(t, "3e38", f32(3e38, -3e38, -3e38, 3e38), 2, 2)
	// Equal rows, also subnormal ones: D = 0 exactly.
	for _, x := range []float32{0, 3, math.Float32frombits(1)} {
		r := checkDevice(t, "equal rows", []float32{x, x, x, x, x, x}, 3, 2)
		if r.D != 0 || r.I != 0 || r.J != 1 {
			t.Errorf("equal rows %v: %+v", x, r)
		}
	}
	// Two rows one subnormal step apart.
	tiny := math.Float32frombits(1)
	r := checkDevice(t, "subnormal step", []float32{0, 0, tiny, 0, 0, 0}, 3, 2)
	if r.D != float64(tiny) {
		t.Errorf("D = %v, want %v", r.D, tiny)
	}
}

func TestRowDiameterDeviceEdges(t *testing.T) {
	if r, err := RowDiameterDevice(onCPU(nil), 0, 3); err != nil || r.D != 0 || !r.Exact {
		t.Errorf("empty: %+v %v", r, err)
	}
	if r, err := RowDiameterDevice(onCPU(f32(1, 2)), 1, 2); err != nil || r.D != 0 || !r.Exact {
		t.Errorf("one row: %+v %v", r, err)
	}
	if r, err := RowDiameterDevice(onCPU(nil), 2, 0); err != nil || r.D != 0 || r.J != 1 || !r.Exact {
		t.Errorf("d = 0: %+v %v", r, err)
	}
	s := f32(1, 2, 3, 4, 5, 6)
	s[3] = float32(math.NaN())
	if _, err := RowDiameterDevice(onCPU(s), 3, 2); err == nil || !strings.Contains(err.Error(), "row 1, column 1") {
		t.Errorf("NaN: %v, want an error naming row 1, column 1", err)
	}
	s[3] = float32(math.Inf(-1))
	if _, err := RowDiameterDevice(onCPU(s), 3, 2); err == nil || !strings.Contains(err.Error(), "-Inf at row 1, column 1") {
		t.Errorf("-Inf: %v", err)
	}
	// The mean 1e38 takes the last row to -4e38 when centred.
	if _, err := RowDiameterDevice(onCPU(f32(3e38, 3e38, -3e38)), 3, 1); err == nil || !strings.Contains(err.Error(), "overflow") {
		t.Errorf("centring overflow: %v", err)
	}
	if _, err := RowDiameterDevice(onCPU(f32(1, 2, 3)), 2, 2); err == nil {
		t.Error("wrong length accepted")
	}
	ids, _ := cpu.New().Alloc(device.Int32, 4)
	if _, err := RowDiameterDevice(ids, 2, 2); err == nil || !strings.Contains(err.Error(), "int32") {
		t.Errorf("int32 buffer: %v", err)
	}
	if _, err := RowDiameterDevice(nil, 2, 2); err == nil {
		t.Error("nil buffer accepted")
	}
}

// More near-ties than the candidate buffer holds: Exact is false, D is a
// true pair distance and Upper bounds the diameter. Both fallbacks: too
// many pairs (the largest are rechecked) and too many rows (each row's
// farthest column is rechecked).
func TestRowDiameterDeviceOverflow(t *testing.T) {
	defer func(c int) { maxDeviceCandidates = c }(maxDeviceCandidates)
	rng := rand.New(rand.NewPCG(6, 6))
	v, d := 150, 20
	s := randMatrix(rng, v, d, 1)
	for i := 2; i < v; i++ {
		for k := range d {
			s[i*d+k] = s[(i%2)*d+k] + float32(rng.NormFloat64()*1e-6)
		}
	}
	want := bruteDiameter(s, v, d)
	for _, c := range []int{1000, 40} { // 75*75 pairs, 75+ rows qualify
		maxDeviceCandidates = c
		r, err := RowDiameterDevice(onCPU(s), v, d)
		if err != nil {
			t.Fatal(err)
		}
		if r.Exact || r.Candidates > c || !(r.D <= want && want <= r.Upper) || r.Upper > want*(1+1e-5) {
			t.Fatalf("cap %d: %+v, brute force %v", c, r, want)
		}
		if got := rowDistance(s, d, r.I, r.J); got != r.D {
			t.Fatalf("cap %d: pair (%d, %d) has distance %v, D %v", c, r.I, r.J, got, r.D)
		}
	}
}

// hostCounter is the CPU backend with its device-to-host traffic counted.
type hostCounter struct {
	device.Device
	n int
}

func (h *hostCounter) CopyToHost(dst []float32, src device.Buffer) {
	h.n += len(dst)
	h.Device.CopyToHost(dst, src)
}

func (h *hostCounter) CopyInt32ToHost(dst []int32, src device.Buffer) {
	h.n += len(dst)
	h.Device.CopyInt32ToHost(dst, src)
}

// Through the real tile size, on rows far from the origin: exact, and what
// comes back to the host is a few values per row, not the v x d step.
func TestRowDiameterDeviceMediumTraffic(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	v, d := 1500, 64
	s := randMatrix(rng, v, d, 1e-3)
	for i := range s {
		s[i] += 100
	}
	checkDevice(t, "medium", s, v, d)
	h := &hostCounter{Device: cpu.New()}
	r := &devRun{dev: h, s: onCPU(s), v: v, d: d, t: DiameterTile}
	res, err := r.run()
	r.release()
	if err != nil || res.D != bruteDiameter(s, v, d) {
		t.Fatalf("%+v %v", res, err)
	}
	if h.n > 4*v+(2*res.Candidates+1)*d+v*8 {
		t.Errorf("%d values copied to the host for a %d x %d step (%d candidates)", h.n, v, d, res.Candidates)
	}
	t.Logf("%d values to the host for %d x %d, %d candidates", h.n, v, d, res.Candidates)
}
