package geometry

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/hilbert-ml/hilbert/device/cpu"
)

func f32(x ...float64) []float32 {
	y := make([]float32, len(x))
	for i, v := range x {
		y[i] = float32(v)
	}
	return y
}

func approx(t *testing.T, what string, got, want, tol float64) {
	t.Helper()
	if !(math.Abs(got-want) <= tol) {
		t.Errorf("%s = %.17g, want %.17g (tolerance %g)", what, got, want, tol)
	}
}

// Small worked examples of the recipe. Inputs are fp32; the tolerances
// are a few ulps of fp32 where the inputs are not exactly representable,
// float64 rounding where they are.
func TestReferenceValues(t *testing.T) {
	approx(t, "||[1,-2,4]||_var", VarNorm(f32(1, -2, 4)), 6, 0)
	approx(t, "H(z1, z2)", HilbertDistance(f32(0.3, -1.2, 2, 0.5), f32(1, 0.1, -0.4, 0.5)), 3.7, 5e-7)

	// Step logits [[1,-2,4],[3,3,-1]] as S h for S = [[1,3],[-2,3],[4,-1]]
	// and the panel h = e1, e2.
	rms, err := HilbertRMS(cpu.New(), f32(1, 3, -2, 3, 4, -1), 3, 2, f32(1, 0, 0, 1), 2)
	if err != nil {
		t.Fatal(err)
	}
	approx(t, "Hilbert RMS", rms, math.Sqrt(26), 1e-12)
	rms, _ = HilbertRMSLogits(f32(1, -2, 4, 3, 3, -1), 2, 3)
	approx(t, "Hilbert RMS of logits", rms, math.Sqrt(26), 1e-12)

	diam := func(s []float32, v, d int) Diameter {
		t.Helper()
		r, err := RowDiameter(cpu.New(), s, v, d)
		if err != nil {
			t.Fatal(err)
		}
		if !r.Exact {
			t.Fatalf("inexact diameter %+v", r)
		}
		return r
	}
	r := diam(f32(0, 0, 3, 4, -3, 4), 3, 2)
	approx(t, "D(3 points)", r.D, 6, 1e-15)
	if r.I != 1 || r.J != 2 {
		t.Errorf("pair (%d, %d), want (1, 2)", r.I, r.J)
	}
	s := f32(1, 2, -1, -2, 0.5, 3, 4, -1, 2, 0, 0, 0)
	approx(t, "D(4 points)", diam(s, 4, 3).D, 6.264982043070834, 1e-15)
	for i := range s {
		s[i] += f32(7, -4, 2)[i%3]
	}
	approx(t, "D(4 points shifted)", diam(s, 4, 3).D, 6.264982043070834, 1e-15)

	// Backward bound: ||S^T r|| <= D/2 ||r||_1 for 1^T r = 0.
	S := f32(1, 0, 0, 2, -1, -1)
	rr := []float64{0.5, -0.2, -0.3}
	var st [2]float64
	for i := range 3 {
		for k := range 2 {
			st[k] += float64(S[i*2+k]) * rr[i]
		}
	}
	approx(t, "||S^T r||", math.Hypot(st[0], st[1]), 0.806225774829855, 1e-15)
	approx(t, "D/2 ||r||_1", diam(S, 3, 2).D/2*1.0, 1.5811388300841898, 1e-15)

	// V = d = 2, eta = 1, M = 10, h = e1.
	U := []float64{0, 10, 0, -10}
	Sv := f32(0.5, 0, -0.5, 0)
	z := []float64{U[0], U[2]}                                    // U h
	zq := []float64{U[0] + float64(Sv[0]), U[2] + float64(Sv[2])} // (U + S) h
	p, q := softmax(z), softmax(zq)
	approx(t, "p", p[0], 0.5, 0)
	approx(t, "q0", q[0], 0.7310585786300049, 1e-15)
	approx(t, "q1", q[1], 0.2689414213699951, 1e-15)
	approx(t, "H(q, p)", HilbertDistance(f32(zq...), f32(z...)), 1, 0)
	approx(t, "D(S)", diam(Sv, 2, 2).D, 1, 0)
	approx(t, "U^T(q-p)_0", U[0]*(q[0]-p[0])+U[2]*(q[1]-p[1]), 0, 0)
	approx(t, "U^T(q-p)_1", U[1]*(q[0]-p[0])+U[3]*(q[1]-p[1]), 4.6211715726000975, 1e-14)
}

func softmax(z []float64) []float64 {
	m := math.Inf(-1)
	for _, v := range z {
		m = max(m, v)
	}
	var s float64
	p := make([]float64, len(z))
	for i, v := range z {
		p[i] = math.Exp(v - m)
		s += p[i]
	}
	for i := range p {
		p[i] /= s
	}
	return p
}

// bruteDiameter is the double loop over all pairs in float64.
func bruteDiameter(s []float32, v, d int) float64 {
	best := 0.0
	for i := range v {
		for j := i + 1; j < v; j++ {
			best = max(best, rowDistance(s, d, i, j))
		}
	}
	return best
}

func randMatrix(rng *rand.Rand, v, d int, std float64) []float32 {
	s := make([]float32, v*d)
	for i := range s {
		s[i] = float32(rng.NormFloat64() * std)
	}
	return s
}

// The exact D equals the brute-force double loop, with tiles small enough
// to exercise every edge (diagonal tiles, ragged last tiles), also when
// every row is shifted by a vector of norm 1e4 (cancellation without
// centring), and on rows with many near-ties.
func TestRowDiameterBruteForce(t *testing.T) {
	defer func(t0 int) { DiameterTile = t0 }(DiameterTile)
	rng := rand.New(rand.NewPCG(1, 1))
	for trial := range 40 {
		v, d := 2+rng.IntN(150), 1+rng.IntN(40)
		DiameterTile = []int{1, 3, 7, 16, 64, 1024}[trial%6]
		s := randMatrix(rng, v, d, 1)
		makeTrialKind(rng, s, trial%4, v, d)
		r, err := RowDiameter(cpu.New(), s, v, d)
		if err != nil {
			t.Fatal(err)
		}
		want := bruteDiameter(s, v, d)
		if !r.Exact || r.D != want {
			t.Fatalf("trial %d (v %d, d %d, tile %d): D = %.17g (exact %v), brute force %.17g", trial, v, d, DiameterTile, r.D, r.Exact, want)
		}
		if got := rowDistance(s, d, r.I, r.J); got != r.D || r.I >= r.J {
			t.Fatalf("pair (%d, %d) has distance %v, D %v", r.I, r.J, got, r.D)
		}
	}
}

// Properties on random inputs: D(S + 1 a^T) = D(S); ||S h||_var <= D(S)
// ||h||; for 1^T r = 0, ||S^T r|| <= D(S)/2 ||r||_1; TV(p, q) <=
// tanh(H(p, q)/4).
func TestBounds(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 2))
	for range 30 {
		v, d := 2+rng.IntN(60), 1+rng.IntN(20)
		s := randMatrix(rng, v, d, 1)
		r, _ := RowDiameter(cpu.New(), s, v, d)
		D := r.D

		// Row shift: the shifted fp32 matrix rounds each entry (|a| <= 10,
		// so by at most 5e-7); D moves by at most 2 sqrt(d) 5e-7.
		sh := make([]float32, len(s))
		a := randMatrix(rng, 1, d, 10)
		for i := range s {
			sh[i] = s[i] + a[i%d]
		}
		r2, _ := RowDiameter(cpu.New(), sh, v, d)
		approx(t, "D(S + 1a^T)", r2.D, D, 2*math.Sqrt(float64(d))*1e-6)

		// ||S h||_var <= D ||h||
		h := randMatrix(rng, 1, d, 1)
		z := make([]float32, v)
		var hn float64
		for k := range d {
			hn += float64(h[k]) * float64(h[k])
		}
		for i := range v {
			var x float64
			for k := range d {
				x += float64(s[i*d+k]) * float64(h[k])
			}
			z[i] = float32(x)
		}
		if vn := VarNorm(z); vn > D*math.Sqrt(hn)*(1+1e-6) {
			t.Fatalf("||S h||_var = %v > D ||h|| = %v", vn, D*math.Sqrt(hn))
		}
		rms, _ := HilbertRMS(cpu.New(), s, v, d, h, 1)
		approx(t, "HilbertRMS of one h", rms, VarNorm(z), 1e-5*(1+rms))

		// ||S^T r|| <= D/2 ||r||_1 with 1^T r = 0
		rv := make([]float64, v)
		var mean, l1 float64
		for i := range rv {
			rv[i] = rng.NormFloat64()
			mean += rv[i] / float64(v)
		}
		for i := range rv {
			rv[i] -= mean
			l1 += math.Abs(rv[i])
		}
		var n2 float64
		for k := range d {
			var x float64
			for i := range v {
				x += float64(s[i*d+k]) * rv[i]
			}
			n2 += x * x
		}
		if math.Sqrt(n2) > D/2*l1*(1+1e-9) {
			t.Fatalf("||S^T r|| = %v > D/2 ||r||_1 = %v", math.Sqrt(n2), D/2*l1)
		}

		// TV(p, q) <= tanh(H/4)
		z1, z2 := randMatrix(rng, 1, v, 2), randMatrix(rng, 1, v, 2)
		p, q := softmax(f64s(z1)), softmax(f64s(z2))
		var tv float64
		for i := range p {
			tv += math.Abs(p[i]-q[i]) / 2
		}
		if H := HilbertDistance(z1, z2); tv > math.Tanh(H/4)+1e-12 {
			t.Fatalf("TV = %v > tanh(H/4) = %v", tv, math.Tanh(H/4))
		}
	}
}

func f64s(x []float32) []float64 {
	y := make([]float64, len(x))
	for i, v := range x {
		y[i] = float64(v)
	}
	return y
}

func TestRowDiameterEdges(t *testing.T) {
	if r, err := RowDiameter(cpu.New(), nil, 0, 3); err != nil || r.D != 0 {
		t.Errorf("empty: %+v %v", r, err)
	}
	if r, _ := RowDiameter(cpu.New(), f32(1, 2), 1, 2); r.D != 0 {
		t.Errorf("one row: %+v", r)
	}
	if r, _ := RowDiameter(cpu.New(), f32(1, 2, 1, 2, 1, 2), 3, 2); r.D != 0 || !r.Exact {
		t.Errorf("equal rows: %+v", r)
	}
	if _, err := RowDiameter(cpu.New(), f32(1, float64(math.NaN())), 2, 1); err == nil {
		t.Error("NaN accepted")
	}
	if _, err := RowDiameter(cpu.New(), f32(1, 2, 3), 2, 2); err == nil {
		t.Error("wrong length accepted")
	}
}

// A medium case through the real tile size and OpenBLAS, against the
// brute force.
func TestRowDiameterMedium(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	v, d := 1500, 64
	s := randMatrix(rng, v, d, 1e-3)
	for i := range s { // far from the origin
		s[i] += 100
	}
	r, err := RowDiameter(cpu.New(), s, v, d)
	if err != nil {
		t.Fatal(err)
	}
	if want := bruteDiameter(s, v, d); r.D != want || !r.Exact {
		t.Fatalf("D = %v (exact %v), brute force %v", r.D, r.Exact, want)
	}
}

// makeTrialKind turns a random v x d matrix into one of the brute-force
// trial kinds: 0 plain; 1 shifted by a vector of norm 1e4 (which ruins an
// uncentred fp32 Gram); 2 rows on a sphere (many near-ties); 3 near copies
// of two rows.
func makeTrialKind(rng *rand.Rand, s []float32, kind, v, d int) {
	switch kind {
	case 1:
		w := make([]float64, d)
		var n float64
		for k := range w {
			w[k] = rng.NormFloat64()
			n += w[k] * w[k]
		}
		for i := range s {
			s[i] = float32(float64(s[i]) + 1e4*w[i%d]/math.Sqrt(n))
		}
	case 2:
		for i := range v {
			row := s[i*d : (i+1)*d]
			var n float64
			for _, x := range row {
				n += float64(x) * float64(x)
			}
			for k := range row {
				row[k] = float32(float64(row[k]) / math.Sqrt(n))
			}
		}
	case 3:
		for i := 2; i < v; i++ {
			for k := range d {
				s[i*d+k] = s[(i%2)*d+k] + float32(rng.NormFloat64()*1e-6)
			}
		}
	}
}
