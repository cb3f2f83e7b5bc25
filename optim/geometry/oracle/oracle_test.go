package oracle

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/optim/geometry"
)

const testTol = 1e-5

func solve(t *testing.T, g []float64, v, d int) *Result {
	t.Helper()
	r, err := Solve(g, v, d, Options{Tol: testTol})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Converged {
		t.Fatalf("V %d d %d: not converged: gap %.3g after %d iterations", v, d, r.Gap, r.Iterations)
	}
	checkCertificates(t, g, r)
	return r
}

// checkCertificates verifies a result independently of the solver: Phi
// is centred and every pair distance (brute force) is at most 1, <G, Phi>
// is Lower, the flow balances G and costs Upper, and Lower <= Upper.
func checkCertificates(t *testing.T, g []float64, r *Result) {
	t.Helper()
	v, d := r.V, r.D
	gc := Centre(g, v, d)
	scale := 0.0
	for i := 0; i < v; i++ {
		scale = max(scale, norm(gc[i*d:(i+1)*d]))
	}
	// Potential: centred, feasible, value Lower.
	for c := 0; c < d; c++ {
		var s float64
		for i := 0; i < v; i++ {
			s += r.Phi[i*d+c]
		}
		if math.Abs(s) > 1e-12*float64(v) {
			t.Errorf("column %d of Phi sums to %g, want 0", c, s)
		}
	}
	var dmax float64
	for i := 0; i < v; i++ {
		for j := i + 1; j < v; j++ {
			dmax = max(dmax, math.Sqrt(sqDiff(r.Phi[i*d:(i+1)*d], r.Phi[j*d:(j+1)*d])))
		}
	}
	if dmax > 1+1e-12 {
		t.Errorf("Phi has a pair at distance %.17g > 1", dmax)
	}
	if math.Abs(dmax-r.MaxPairDistance) > 1e-12 {
		t.Errorf("MaxPairDistance %.17g, brute force %.17g", r.MaxPairDistance, dmax)
	}
	if v >= 2 && d > 0 {
		// The package's exact fp32 diameter agrees (to fp32 rounding).
		p32 := make([]float32, len(r.Phi))
		for i, x := range r.Phi {
			p32[i] = float32(x)
		}
		if dg, err := geometry.RowDiameter(cpu.New(), p32, v, d); err != nil || math.Abs(dg.D-dmax) > 1e-6 {
			t.Errorf("geometry.RowDiameter %v (%v), brute force %v", dg.D, err, dmax)
		}
	}
	if lo := dot(gc, r.Phi); math.Abs(lo-r.Lower) > 1e-12*max(1, math.Abs(lo)) {
		t.Errorf("<G, Phi> = %.17g, Lower %.17g", lo, r.Lower)
	}
	// Flow: balanced, cost Upper.
	div := r.Flow.Divergence()
	var worst float64
	for i := 0; i < v; i++ {
		var s2 float64
		for c := 0; c < d; c++ {
			e := div[i*d+c] - gc[i*d+c]
			s2 += e * e
		}
		worst = max(worst, math.Sqrt(s2))
	}
	if scale > 0 && worst > 1e-11*scale {
		t.Errorf("flow balance residual %.3g (rows of G up to %.3g)", worst, scale)
	}
	var cost float64
	y := make([]float64, d)
	for i := 0; i < v; i++ {
		for j := i + 1; j < v; j++ {
			cost += norm(r.Flow.At(i, j, y))
			// Antisymmetry.
			yji := r.Flow.At(j, i, nil)
			for c := range y {
				if yji[c] != -y[c] {
					t.Fatalf("y_%d%d != -y_%d%d", j, i, i, j)
				}
			}
		}
	}
	if math.Abs(cost-r.Upper) > 1e-11*max(1, cost) {
		t.Errorf("sum ||y_ij|| = %.17g, Upper %.17g", cost, r.Upper)
	}
	if r.Lower > r.Upper*(1+1e-14) {
		t.Errorf("Lower %.17g > Upper %.17g", r.Lower, r.Upper)
	}
	if r.Upper > 0 && math.Abs(r.Gap-(r.Upper-r.Lower)/r.Upper) > 1e-15 {
		t.Errorf("Gap %g, want %g", r.Gap, (r.Upper-r.Lower)/r.Upper)
	}
	// The step: diameter eta, decrease eta Lower; the gap is the sum of
	// the active-edge violations.
	step := r.Step(0.25)
	if got := dot(gc, step); math.Abs(got+0.25*r.Lower) > 1e-12*max(1, r.Lower) {
		t.Errorf("<G, S> = %.17g, want -eta Lower = %.17g", got, -0.25*r.Lower)
	}
	if got := maxPairDistance(step, v, d, 1); got > 0.25*(1+1e-12) {
		t.Errorf("D(S) = %.17g > eta", got)
	}
	var slack float64
	dphi := make([]float64, d)
	for i := 0; i < v; i++ {
		for j := i + 1; j < v; j++ {
			r.Flow.At(i, j, y)
			for c := range dphi {
				dphi[c] = r.Phi[i*d+c] - r.Phi[j*d+c]
			}
			slack += norm(y) - dot(y, dphi)
		}
	}
	if math.Abs(slack-(r.Upper-r.Lower)) > 1e-10*max(1, r.Upper) {
		t.Errorf("active-edge violations sum to %.6g, Upper - Lower = %.6g", slack, r.Upper-r.Lower)
	}
	// RowNorm's potential is feasible, so T >= RowNormHalf.
	if r.RowNormHalf > r.Upper*(1+1e-12) {
		t.Errorf("RowNormHalf %.17g > Upper %.17g", r.RowNormHalf, r.Upper)
	}
}

// randRank returns a v x d matrix of rank k (before centring).
func randRank(rng *rand.Rand, v, d, k int) []float64 {
	a, b := make([]float64, v*k), make([]float64, k*d)
	for i := range a {
		a[i] = rng.NormFloat64()
	}
	for i := range b {
		b[i] = rng.NormFloat64()
	}
	return mulMat(a, b, v, k, d)
}

// ceGradient mimics a cross-entropy head gradient: token frequencies
// following Zipf's law, so row norms span orders of magnitude.
func ceGradient(rng *rand.Rand, v, d, n int) []float64 {
	g := make([]float64, v*d)
	h := make([]float64, d)
	z := make([]float64, v)
	w := make([]float64, v)
	var ws float64
	for i := range w {
		w[i] = 1 / float64(i+1)
		ws += w[i]
	}
	for t := 0; t < n; t++ {
		for c := range h {
			h[c] = rng.NormFloat64()
		}
		var zs float64
		for i := range z {
			z[i] = w[i] * math.Exp(0.5*rng.NormFloat64())
			zs += z[i]
		}
		u, tgt := rng.Float64()*ws, 0
		for acc := w[0]; acc < u && tgt < v-1; acc += w[tgt] {
			tgt++
		}
		for i := range z {
			p := z[i] / zs
			if i == tgt {
				p--
			}
			for c, e := range h {
				g[i*d+c] += p * e / float64(n)
			}
		}
	}
	return g
}

func TestTwoTokens(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	for _, d := range []int{1, 2, 7} {
		g := make([]float64, 2*d)
		for i := range g {
			g[i] = rng.NormFloat64() * 3
		}
		r := solve(t, g, 2, d)
		g1 := norm(Centre(g, 2, d)[:d])
		if math.Abs(r.Lower-g1) > 1e-12*g1 || math.Abs(r.Upper-g1) > 1e-12*g1 {
			t.Errorf("d %d: T in [%.17g, %.17g], want ||g_1|| = %.17g", d, r.Lower, r.Upper, g1)
		}
		if mid, _, _ := r.Ratio(); math.Abs(mid-1) > 1e-12 {
			t.Errorf("d %d: ratio %.17g, want 1", d, mid)
		}
	}
}

// simplex returns k+1 rows forming a regular simplex with unit edges,
// embedded in d >= k+1 dimensions by a random rotation and shifted by a
// random common row, times scale.
func simplex(rng *rand.Rand, k, d int, scale float64) []float64 {
	v := k + 1
	e := make([]float64, v*v) // rows e_i / sqrt(2) in R^{k+1}
	for i := 0; i < v; i++ {
		e[i*v+i] = 1 / math.Sqrt2
	}
	q := randOrthonormal(rng, v, d) // v x d, orthonormal rows
	g := mulMat(e, q, v, v, d)
	shift := make([]float64, d)
	for c := range shift {
		shift[c] = rng.NormFloat64()
	}
	for i := 0; i < v; i++ {
		for c := 0; c < d; c++ {
			g[i*d+c] = scale * (g[i*d+c] + shift[c])
		}
	}
	return g
}

// randOrthonormal returns n x d (n <= d) with orthonormal rows.
func randOrthonormal(rng *rand.Rand, n, d int) []float64 {
	q := make([]float64, n*d)
	for i := 0; i < n; i++ {
		row := q[i*d : (i+1)*d]
		for c := range row {
			row[c] = rng.NormFloat64()
		}
		for pass := 0; pass < 2; pass++ {
			for j := 0; j < i; j++ {
				prev := q[j*d : (j+1)*d]
				p := dot(row, prev)
				for c := range row {
					row[c] -= p * prev[c]
				}
			}
		}
		n := norm(row)
		for c := range row {
			row[c] /= n
		}
	}
	return q
}

// The appendix's sharpness family: for k+1 rows forming a regular simplex
// the ratio is exactly sqrt((k+1)/(2k)), and T = k/2 times the edge.
func TestSimplexSharpness(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 2))
	for _, k := range []int{2, 3, 4, 7, 12, 20} {
		for _, d := range []int{k + 1, k + 5} {
			scale := math.Exp(rng.NormFloat64())
			g := simplex(rng, k, d, scale)
			r := solve(t, g, k+1, d)
			if r.Rank != k {
				t.Errorf("k %d: rank %d", k, r.Rank)
			}
			wantT := float64(k) / 2 * scale
			if r.Lower > wantT*(1+1e-12) || r.Upper < wantT*(1-1e-12) || r.Gap > testTol {
				t.Errorf("k %d d %d: T in [%.15g, %.15g], want %.15g", k, d, r.Lower, r.Upper, wantT)
			}
			mid, lo, hi := r.Ratio()
			b := Bound(k)
			if lo > b*(1+1e-12) || hi < b*(1-1e-12) || math.Abs(mid-b) > testTol {
				t.Errorf("k %d d %d: ratio %.10g in [%.10g, %.10g], want sqrt((k+1)/(2k)) = %.10g", k, d, mid, lo, hi, b)
			}
		}
	}
	// The paper's worked example: unit equilateral triangle, T = 1 and
	// Delta_RN = 0.8660254037844387 at eta = 1.
	s3 := math.Sqrt(3)
	g := []float64{1 / s3, 0, -1 / (2 * s3), 0.5, -1 / (2 * s3), -0.5}
	r := solve(t, g, 3, 2)
	if math.Abs(r.RowNormHalf-0.8660254037844387) > 1e-15 || math.Abs(r.T()-1) > testTol {
		t.Errorf("triangle: Delta_RN %.17g, T %.17g", r.RowNormHalf, r.T())
	}
}

func TestRandomRank(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	for _, c := range []struct{ v, d, k int }{
		{5, 3, 1}, {16, 8, 1}, {16, 8, 3}, {24, 16, 8}, {40, 12, 12}, {33, 64, 5}, {12, 40, 11},
	} {
		g := randRank(rng, c.v, c.d, c.k)
		// Centring can lower the rank by one when 1 is in the column
		// space; with random factors it does not.
		r := solve(t, g, c.v, c.d)
		if r.Rank != c.k {
			t.Errorf("%+v: rank %d", c, r.Rank)
		}
		mid, lo, hi := r.Ratio()
		b := Bound(r.Rank)
		if hi < b*(1-1e-12) || lo > 1+1e-12 {
			t.Errorf("%+v: ratio [%.10g, %.10g] outside [bound %.10g, 1]", c, lo, hi, b)
		}
		if c.k == 1 && math.Abs(mid-1) > testTol {
			t.Errorf("%+v: rank-1 ratio %.10g, want 1", c, mid)
		}
		t.Logf("%+v: ratio %.6f (bound %.6f), gap %.2g, %d iterations", c, mid, b, r.Gap, r.Iterations)
	}
}

// Gradients with row norms over orders of magnitude (the realistic case)
// and a reduction to the row space (d > V).
func TestHeavyTailedAndWide(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	for _, c := range []struct{ v, d int }{{30, 8}, {48, 16}, {10, 30}} {
		g := ceGradient(rng, c.v, c.d, 400)
		r := solve(t, g, c.v, c.d)
		wantRank := min(c.v-1, c.d)
		if r.Rank != wantRank {
			t.Errorf("%+v: rank %d, want %d", c, r.Rank, wantRank)
		}
		mid, _, hi := r.Ratio()
		if hi < Bound(r.Rank)*(1-1e-12) || mid > 1+testTol {
			t.Errorf("%+v: ratio %.10g outside [%.10g, 1]", c, mid, Bound(r.Rank))
		}
	}
}

// One-dimensional rows: T = (1/2) sum |g_i| (phi_i = sign(g_i) / 2).
func TestScalar(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	g := make([]float64, 20)
	for i := range g {
		g[i] = rng.NormFloat64()
	}
	r := solve(t, g, 20, 1)
	if mid, _, _ := r.Ratio(); math.Abs(mid-1) > testTol {
		t.Errorf("d = 1: ratio %.10g, want 1", mid)
	}
}

// T depends on G only through its centred rows and their pair geometry:
// adding a common row, permuting tokens, rotating the columns and scaling
// change it as they should.
func TestInvariance(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 6))
	v, d := 24, 6
	g := ceGradient(rng, v, d, 300)
	base := solve(t, g, v, d)

	overlap := func(what string, r *Result, scale float64) {
		t.Helper()
		if r.Lower > base.Upper*scale*(1+1e-12) || r.Upper < base.Lower*scale*(1-1e-12) {
			t.Errorf("%s: T in [%.15g, %.15g], base [%.15g, %.15g] x %g", what, r.Lower, r.Upper, base.Lower, base.Upper, scale)
		}
	}
	// A common row added to G (any gradient plus 1 a^T).
	shifted := append([]float64(nil), g...)
	for i := 0; i < v; i++ {
		for c := 0; c < d; c++ {
			shifted[i*d+c] += float64(c) - 2.5
		}
	}
	overlap("G + 1 a^T", solve(t, shifted, v, d), 1)

	// A common row added to Phi keeps its value (1^T G = 0) and its pair
	// distances, so it remains a certificate of the same bound.
	gc := Centre(g, v, d)
	phi := append([]float64(nil), base.Phi...)
	for i := 0; i < v; i++ {
		for c := 0; c < d; c++ {
			phi[i*d+c] += 10 * float64(c+1)
		}
	}
	if got := dot(gc, phi); math.Abs(got-base.Lower) > 1e-9*base.Lower {
		t.Errorf("<G, Phi + 1 a^T> = %.15g, <G, Phi> = %.15g", got, base.Lower)
	}
	if got := maxPairDistance(phi, v, d, 1); math.Abs(got-base.MaxPairDistance) > 1e-12 {
		t.Errorf("D(Phi + 1 a^T) = %.17g, D(Phi) = %.17g", got, base.MaxPairDistance)
	}

	// Permuted tokens.
	perm := rng.Perm(v)
	pg := make([]float64, v*d)
	for i, p := range perm {
		copy(pg[i*d:(i+1)*d], g[p*d:(p+1)*d])
	}
	rp := solve(t, pg, v, d)
	overlap("permuted", rp, 1)
	// The permuted potential, permuted back, certifies the same bound.
	back := make([]float64, v*d)
	for i, p := range perm {
		copy(back[p*d:(p+1)*d], rp.Phi[i*d:(i+1)*d])
	}
	if got := dot(gc, back); math.Abs(got-rp.Lower) > 1e-12*rp.Lower || got > base.Upper*(1+1e-12) {
		t.Errorf("permuted potential: value %.15g, Lower %.15g, base Upper %.15g", got, rp.Lower, base.Upper)
	}

	// Rotated columns and a scale.
	q := randOrthonormal(rng, d, d)
	rot := mulMat(g, q, v, d, d)
	for i := range rot {
		rot[i] *= 7.5
	}
	overlap("rotated and scaled", solve(t, rot, v, d), 7.5)
}

func TestEdgeCases(t *testing.T) {
	for _, c := range []struct {
		v, d int
		g    []float64
	}{
		{0, 3, nil}, {1, 3, []float64{1, 2, 3}}, {3, 0, nil}, {4, 2, make([]float64, 8)},
		{3, 2, []float64{1, 1, 1, 1, 1, 1}}, // every row equal: centred to zero
	} {
		r, err := Solve(c.g, c.v, c.d, Options{})
		if err != nil {
			t.Fatalf("%d x %d: %v", c.v, c.d, err)
		}
		if r.Lower != 0 || r.Upper != 0 || !r.Converged {
			t.Errorf("%d x %d: [%g, %g] converged %v, want [0, 0]", c.v, c.d, r.Lower, r.Upper, r.Converged)
		}
		if mid, _, _ := r.Ratio(); mid != 1 {
			t.Errorf("%d x %d: ratio %g", c.v, c.d, mid)
		}
	}
	if _, err := Solve([]float64{1, 2, 3}, 2, 2, Options{}); err == nil {
		t.Error("3 values for 2 x 2: no error")
	}
	if _, err := Solve([]float64{1, math.NaN(), 3, 4}, 2, 2, Options{}); err == nil {
		t.Error("NaN: no error")
	}
}

func TestOptions(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	v, d := 40, 10
	g := ceGradient(rng, v, d, 300)
	// An iteration cap stops early with a valid certificate.
	r, err := Solve(g, v, d, Options{Tol: 1e-12, MaxIter: 20, CheckEvery: 8})
	if err != nil {
		t.Fatal(err)
	}
	if r.Converged || r.Iterations != 20 {
		t.Errorf("MaxIter 20: converged %v after %d iterations", r.Converged, r.Iterations)
	}
	checkCertificates(t, g, r)
	// Threads and Progress.
	var calls int
	r1, err := Solve(g, v, d, Options{Threads: 1, Progress: func(p Progress) {
		calls++
		if p.Lower > p.Upper*(1+1e-12) {
			t.Errorf("progress: lower %g > upper %g", p.Lower, p.Upper)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	r3, err := Solve(g, v, d, Options{Threads: 3})
	if err != nil {
		t.Fatal(err)
	}
	if calls == 0 {
		t.Error("Progress never called")
	}
	if !r1.Converged || !r3.Converged || r1.Lower > r3.Upper || r3.Lower > r1.Upper {
		t.Errorf("1 thread: [%.17g, %.17g]; 3 threads: [%.17g, %.17g]", r1.Lower, r1.Upper, r3.Lower, r3.Upper)
	}
}

func TestRowNormHalfReference(t *testing.T) {
	// The recipe's PRN example: <G, -(eta/2) PRN(G)> = -(1/2) sum ||g_i||.
	g := []float64{1, 2, 2, -1, -3, -1}
	if got := RowNormHalf(g, 3, 2); math.Abs(got-3.81720680758398) > 1e-13 {
		t.Errorf("RowNormHalf = %.15g, want 3.81720680758398", got)
	}
	if Bound(1) != 1 || math.Abs(Bound(2)-math.Sqrt(0.75)) > 1e-16 {
		t.Errorf("Bound(1) = %g, Bound(2) = %g", Bound(1), Bound(2))
	}
}

func TestPairIndex(t *testing.T) {
	for _, v := range []int{2, 3, 7, 20} {
		p := 0
		for i := 0; i < v; i++ {
			for j := i + 1; j < v; j++ {
				if got := pairIndex(i, j, v); got != p {
					t.Fatalf("v %d: pairIndex(%d, %d) = %d, want %d", v, i, j, got, p)
				}
				p++
			}
		}
		for _, n := range []int{1, 2, 5, 64} {
			blocks := rowBlocks(v, n)
			next := 0
			for _, b := range blocks {
				if b[0] != next || b[1] <= b[0] {
					t.Fatalf("v %d n %d: blocks %v", v, n, blocks)
				}
				next = b[1]
			}
			if next != v || len(blocks) > n {
				t.Fatalf("v %d n %d: blocks %v", v, n, blocks)
			}
		}
	}
}
