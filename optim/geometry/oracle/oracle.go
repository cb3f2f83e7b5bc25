package oracle

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"time"

	"gonum.org/v1/gonum/mat"
)

// Options tune Solve. The zero value asks for a relative gap of 1e-4 with
// every core.
type Options struct {
	// Tol is the relative duality gap (U - L) / U to reach. Default 1e-4.
	Tol float64
	// MaxIter bounds the number of updates. Default 100,000.
	MaxIter int
	// TimeLimit stops the solve after this long (0: none); the result is
	// then certified but may miss Tol (Converged false).
	TimeLimit time.Duration
	// Threads is the number of goroutines of a pass over the pairs.
	// Default GOMAXPROCS.
	Threads int
	// CheckEvery computes the certificates (and decides restarts) every so
	// many updates. Default 32.
	CheckEvery int
	// Omega is the initial primal weight sigma/tau for G scaled to a
	// largest row norm of 1; 0 means 6 ||G||_F / V, which the adaptive
	// updates then tune.
	Omega float64
	// RankTol: singular values of G at most RankTol times the largest
	// count as zero, for Rank and for the reduction to the row space.
	// Default 1e-9.
	RankTol float64
	// Progress, when set, is called at every check.
	Progress func(Progress)
}

// Progress is the state of a solve at one check.
type Progress struct {
	Iter         int
	Lower, Upper float64 // certified bounds of this check (Lower is the best so far)
	Gap          float64 // (Upper - Lower) / Upper
	Omega        float64 // current primal weight
	Active       int     // pairs carrying flow
	Restart      bool    // a restart happened at this check
	Elapsed      time.Duration
}

// Result is a certified solve of T(G).
type Result struct {
	// V and D are G's shape.
	V, D int
	// Lower <= T(G) <= Upper: Lower = <G, Phi> with Phi feasible, Upper
	// the cost of Flow, which balances G.
	Lower, Upper float64
	// Gap is the relative duality gap (Upper - Lower) / Upper (0 when
	// Upper is 0).
	Gap float64
	// Converged reports Gap <= Options.Tol.
	Converged bool
	// Phi is the potential (V x D, row-major): 1^T Phi = 0 and every pair
	// distance ||phi_i - phi_j|| is at most MaxPairDistance <= 1.
	Phi []float64
	// MaxPairDistance is Phi's largest pair distance, computed exactly
	// over all pairs in float64.
	MaxPairDistance float64
	// Flow is the balancing flow (sum_j y_ij = g_i), of cost Upper.
	Flow *Flow
	// Balance is max_i ||sum_{j != i} y_ij - g_i|| / max_i ||g_i|| for Flow,
	// computed from the flow's coordinates (rounding level).
	Balance float64
	// Rank is the numerical rank k of G (see Options.RankTol); the
	// problem was solved in a Rank-dimensional row space when Rank < D.
	Rank int
	// RowNormHalf is (1/2) sum_i ||g_i||: RowNorm's decrease per unit of
	// diameter budget, Delta_RN / eta.
	RowNormHalf float64
	// Iterations, Restarts and Elapsed describe the solve; Active is the
	// number of pairs carrying flow in the last iterate (before the
	// balance projection).
	Iterations, Restarts, Active int
	Elapsed                      time.Duration
	// Omega is the final primal weight.
	Omega float64
}

// T returns the midpoint of the certified interval [Lower, Upper].
func (r *Result) T() float64 { return (r.Lower + r.Upper) / 2 }

// Ratio returns Delta_RN / Delta_* = RowNormHalf / T(G): its value at the
// midpoint and the certified interval [RowNormHalf/Upper,
// RowNormHalf/Lower] that contains it. A zero gradient gives 1, 1, 1.
func (r *Result) Ratio() (mid, lo, hi float64) {
	if r.Upper == 0 {
		return 1, 1, 1
	}
	return r.RowNormHalf / r.T(), r.RowNormHalf / r.Upper, r.RowNormHalf / r.Lower
}

// Step returns the diameter-constrained step of budget eta that the
// potential certifies, S = -eta Phi: D(S) <= eta, 1^T S = 0 and <G, S> =
// -eta Lower, within the relative gap of the exact minimum -eta T(G). (The
// minimiser of <G, S> over {D(S) <= eta, 1^T S = 0} is -eta times a
// maximising potential; the flow certifies it through the active-edge
// conditions: y_ij != 0 only where ||phi_i - phi_j|| = 1, with y_ij parallel
// to phi_i - phi_j, and Upper - Lower is exactly the sum of both
// violations, sum ||y_ij|| (1 - ||phi_i - phi_j||) + (||y_ij|| ||phi_i - phi_j|| -
// <y_ij, phi_i - phi_j>).)
func (r *Result) Step(eta float64) []float64 {
	s := make([]float64, len(r.Phi))
	for i, x := range r.Phi {
		s[i] = -eta * x
	}
	return s
}

// Bound returns the paper's lower bound sqrt((k+1)/(2k)) on Delta_RN /
// Delta_* for a gradient of rank k (1 for k <= 1).
func Bound(k int) float64 {
	if k <= 1 {
		return 1
	}
	return math.Sqrt(float64(k+1) / float64(2*k))
}

// RowNormHalf returns (1/2) sum_i ||g_i||_2 of g (v x d, row-major).
func RowNormHalf(g []float64, v, d int) float64 {
	var s float64
	for i := 0; i < v; i++ {
		s += norm(g[i*d : (i+1)*d])
	}
	return s / 2
}

// Centre returns g (v x d) minus its mean row, in float64.
func Centre(g []float64, v, d int) []float64 {
	c := append([]float64(nil), g...)
	centreInPlace(c, v, d)
	return c
}

func centreInPlace(x []float64, v, d int) {
	if v == 0 {
		return
	}
	mean := make([]float64, d)
	for i := 0; i < v; i++ {
		for c, e := range x[i*d : (i+1)*d] {
			mean[c] += e
		}
	}
	for c := range mean {
		mean[c] /= float64(v)
	}
	for i := 0; i < v; i++ {
		row := x[i*d : (i+1)*d]
		for c := range row {
			row[c] -= mean[c]
		}
	}
}

// Solve computes T(G) for g (v x d, row-major) with certificates. g is
// centred first (its mean row subtracted, in float64), so any gradient of
// a cross-entropy loss can be passed as it is.
//
// Memory: the flow holds v(v-1)/2 x min(d, rank) float64 (2.1 GB at v =
// 1,024, d = 512 and full rank).
func Solve(g []float64, v, d int, opt Options) (*Result, error) {
	start := time.Now()
	if err := checkGradient(g, v, d); err != nil {
		return nil, err
	}
	opt = opt.withDefaults()
	gc := Centre(g, v, d)
	res := &Result{V: v, D: d, RowNormHalf: RowNormHalf(gc, v, d), Phi: make([]float64, v*d)}
	var gmax float64
	for i := 0; i < v; i++ {
		gmax = max(gmax, norm(gc[i*d:(i+1)*d]))
	}
	if v < 2 || d == 0 || gmax == 0 {
		return res.trivial(gc, start), nil
	}

	// Rank, and the orthonormal basis W (d x m) of the row space when it
	// is smaller than d.
	m, w, err := rowSpace(gc, v, d, opt.RankTol)
	if err != nil {
		return nil, err
	}
	res.Rank = m
	gr := gc // v x m coordinates of G in the basis
	if w != nil {
		gr = mulMat(gc, w, v, d, m)
	} else {
		m = d
	}
	// Scale to a largest row norm of 1.
	var smax float64
	for i := 0; i < v; i++ {
		smax = max(smax, norm(gr[i*m:(i+1)*m]))
	}
	if smax == 0 {
		return res.trivial(gc, start), nil
	}
	gs := make([]float64, len(gr))
	for i, x := range gr {
		gs[i] = x / smax
	}

	s := newSolver(gs, v, m, opt)
	phi := s.run(start)
	res.Phi, res.MaxPairDistance = feasiblePotential(phi, w, v, m, d, opt.Threads)
	res.Lower = dot(gc, res.Phi)
	div := res.certifyFlow(s, gc, w, smax, opt.Threads)
	res.Upper = res.Flow.Cost()
	res.Balance = res.Flow.balance(gc, div, gmax)
	res.Lower = min(res.Lower, res.Upper) // rounding only
	if res.Upper > 0 {
		res.Gap = (res.Upper - res.Lower) / res.Upper
	}
	res.Converged = res.Gap <= opt.Tol
	res.Iterations, res.Restarts, res.Active, res.Omega = s.iter, s.restarts, s.active, s.omega
	res.Elapsed = time.Since(start)
	return res, nil
}

// checkGradient checks g's length and that every value is finite.
func checkGradient(g []float64, v, d int) error {
	if v < 0 || d < 0 || len(g) != v*d {
		return fmt.Errorf("oracle: %d values for %d x %d", len(g), v, d)
	}
	for i, x := range g {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return fmt.Errorf("oracle: non-finite value %v at row %d, column %d", x, i/d, i%d)
		}
	}
	return nil
}

// trivial completes res for a gradient with nothing to solve (fewer than
// two rows, no columns, or all rows equal): Phi = 0 and the flow that only
// carries the correction.
func (res *Result) trivial(gc []float64, start time.Time) *Result {
	res.Converged = true
	res.Flow = &Flow{V: res.V, D: res.D, M: res.D, Y: make([]float64, pairs(res.V)*res.D), Corr: gc}
	res.Upper = res.Flow.Cost()
	res.Gap = 0
	res.Elapsed = time.Since(start)
	return res
}

// feasiblePotential returns the solver's potential phi (v x m) in full
// coordinates (v x d, through the basis w when there is one), centred and
// scaled to be exactly feasible, with its largest pair distance.
func feasiblePotential(phi, w []float64, v, m, d, threads int) ([]float64, float64) {
	var full []float64
	if w != nil {
		full = mulMatT(phi, w, v, m, d)
	} else {
		full = append([]float64(nil), phi...)
	}
	centreInPlace(full, v, d)
	dmax := maxPairDistance(full, v, d, threads)
	if dmax > 1 {
		for i := range full {
			full[i] /= dmax
		}
		dmax = maxPairDistance(full, v, d, threads)
	}
	return full, dmax
}

// certifyFlow sets res.Flow to the solver's flow in full coordinates,
// y_ij = smax W Y'_ij + (r_i - r_j) / V with r = G - K^T (smax Y' W^T),
// which balances G exactly, and returns its divergence K^T (smax Y').
func (res *Result) certifyFlow(s *solver, gc, w []float64, smax float64, threads int) []float64 {
	v, d, m := res.V, res.D, s.m
	s.zeroInactive()
	div := s.divergence() // K^T Y', v x m
	yc := s.y
	for i := range yc {
		yc[i] *= smax
	}
	for i := range div {
		div[i] *= smax
	}
	corr := append([]float64(nil), gc...)
	if w != nil {
		full := mulMatT(div, w, v, m, d)
		for i := range corr {
			corr[i] -= full[i]
		}
	} else {
		for i := range corr {
			corr[i] -= div[i]
		}
	}
	res.Flow = &Flow{V: v, D: d, M: m, Y: yc, Basis: w, Corr: corr, threads: threads}
	return div
}

func (o Options) withDefaults() Options {
	if o.Tol <= 0 {
		o.Tol = 1e-4
	}
	if o.MaxIter <= 0 {
		o.MaxIter = 100_000
	}
	if o.Threads <= 0 {
		o.Threads = runtime.GOMAXPROCS(0)
	}
	if o.CheckEvery <= 0 {
		o.CheckEvery = 32
	}
	if o.RankTol <= 0 {
		o.RankTol = 1e-9
	}
	return o
}

// rowSpace returns the numerical rank m of g (v x d) and, when m < d, an
// orthonormal basis (d x m, row-major) of its row space: the leading right
// singular vectors.
func rowSpace(g []float64, v, d int, tol float64) (int, []float64, error) {
	var svd mat.SVD
	if !svd.Factorize(mat.NewDense(v, d, g), mat.SVDThinV) {
		return 0, nil, errors.New("oracle: SVD of G did not converge")
	}
	vals := svd.Values(nil)
	m := 0
	for _, s := range vals {
		if s > tol*vals[0] {
			m++
		}
	}
	if m == d {
		return m, nil, nil
	}
	var vm mat.Dense
	svd.VTo(&vm)
	w := make([]float64, d*m)
	for r := 0; r < d; r++ {
		for c := 0; c < m; c++ {
			w[r*m+c] = vm.At(r, c)
		}
	}
	return m, w, nil
}

// mulMat returns a (r x n) times b (n x c).
func mulMat(a, b []float64, r, n, c int) []float64 {
	out := mat.NewDense(r, c, nil)
	out.Mul(mat.NewDense(r, n, a), mat.NewDense(n, c, b))
	return out.RawMatrix().Data
}

// mulMatT returns a (r x c) times b^T, b (n x c): r x n.
func mulMatT(a, b []float64, r, c, n int) []float64 {
	out := mat.NewDense(r, n, nil)
	out.Mul(mat.NewDense(r, c, a), mat.NewDense(n, c, b).T())
	return out.RawMatrix().Data
}

func dot(a, b []float64) float64 {
	var s float64
	b = b[:len(a)]
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

func norm(a []float64) float64 { return math.Sqrt(dot(a, a)) }
