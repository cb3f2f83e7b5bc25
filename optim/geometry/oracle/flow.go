package oracle

import "math"

// Flow is a flow on the pairs of tokens, stored compactly:
//
//	y_ij = Basis Y_ij + (Corr_i - Corr_j) / V     (i < j; y_ji = -y_ij)
//
// with Y_ij the M coordinates of pair (i, j) (row Index(i, j) of Y, P x M,
// P = V(V-1)/2), Basis an orthonormal D x M matrix (nil: the identity,
// M = D) and Corr a V x D correction. Solve sets Corr to the closed-form
// projection onto the balance constraints, Corr = G - K^T (Basis Y), so
// that sum_{j != i} y_ij = g_i exactly: on the complete graph
// K^T K = V I - 11^T, and Corr is centred, so K (Corr / V) adds exactly
// the missing divergence.
type Flow struct {
	V, D, M int
	Y       []float64 // P x M
	Basis   []float64 // D x M, or nil
	Corr    []float64 // V x D
	threads int
}

// Pairs returns V(V-1)/2.
func (f *Flow) Pairs() int { return pairs(f.V) }

// Index returns the row of Y holding pair (i, j), i < j.
func (f *Flow) Index(i, j int) int { return pairIndex(i, j, f.V) }

// At writes y_ij (a D-vector) into dst (allocated when nil) and returns
// it; for i > j it is -y_ji, for i == j zero.
func (f *Flow) At(i, j int, dst []float64) []float64 {
	if dst == nil {
		dst = make([]float64, f.D)
	}
	dst = dst[:f.D]
	if i == j {
		clear(dst)
		return dst
	}
	sign := 1.0
	if i > j {
		i, j, sign = j, i, -1
	}
	y := f.Y[f.Index(i, j)*f.M : (f.Index(i, j)+1)*f.M]
	if f.Basis == nil {
		copy(dst, y)
	} else {
		for r := 0; r < f.D; r++ {
			dst[r] = dot(f.Basis[r*f.M:(r+1)*f.M], y)
		}
	}
	inv := 1 / float64(f.V)
	ci, cj := f.Corr[i*f.D:(i+1)*f.D], f.Corr[j*f.D:(j+1)*f.D]
	for r := range dst {
		dst[r] = sign * (dst[r] + (ci[r]-cj[r])*inv)
	}
	return dst
}

// Divergence returns K^T Y: row i is sum_{j != i} y_ij (V x D), summed
// pair by pair from At (O(P D M); meant for checks at small sizes).
func (f *Flow) Divergence() []float64 {
	out := make([]float64, f.V*f.D)
	y := make([]float64, f.D)
	for i := 0; i < f.V; i++ {
		for j := i + 1; j < f.V; j++ {
			f.At(i, j, y)
			for r, e := range y {
				out[i*f.D+r] += e
				out[j*f.D+r] -= e
			}
		}
	}
	return out
}

// Cost returns sum_{i<j} ||y_ij||_2, in float64, over every pair: the sum
// of PairCosts in pair order.
func (f *Flow) Cost() float64 {
	var total float64
	for _, c := range f.PairCosts() {
		total += c
	}
	return total
}

// PairCosts returns ||y_ij||_2 of every pair, at Index(i, j).
//
// With a basis, ||Basis a + b||^2 = ||a + Basis^T b||^2 + ||b_perp||^2 for
// b = (Corr_i - Corr_j) / V and b_perp its part orthogonal to the basis,
// so a pair costs O(M + D) without forming y_ij.
func (f *Flow) PairCosts() []float64 {
	v, m := f.V, f.M
	if v < 2 {
		return nil
	}
	cw, cperp, dp := f.Corr, []float64(nil), f.D // coordinates of Corr in the basis, and the rest
	if f.Basis != nil {
		cw = mulMat(f.Corr, f.Basis, v, f.D, m)
		back := mulMatT(cw, f.Basis, v, m, f.D)
		cperp = make([]float64, v*f.D)
		for i := range cperp {
			cperp[i] = f.Corr[i] - back[i]
		}
	} else {
		dp = 0
	}
	inv := 1 / float64(v)
	out := make([]float64, f.Pairs())
	threads := max(1, f.threads)
	forBlocks(rowBlocks(v, 4*threads), threads, func(_, lo, hi int) {
		for i := lo; i < hi; i++ {
			ci := cw[i*m : (i+1)*m]
			p := pairIndex(i, i+1, v)
			for j := i + 1; j < v; j++ {
				y := f.Y[p*m : (p+1)*m]
				cj := cw[j*m : (j+1)*m]
				var s2 float64
				for c := range y {
					e := y[c] + (ci[c]-cj[c])*inv
					s2 += e * e
				}
				if dp > 0 {
					pi, pj := cperp[i*dp:(i+1)*dp], cperp[j*dp:(j+1)*dp]
					var q float64
					for c := range pi {
						e := pi[c] - pj[c]
						q += e * e
					}
					s2 += q * inv * inv
				}
				out[p] = math.Sqrt(s2)
				p++
			}
		}
	})
	return out
}

// balance returns max_i ||(K^T y)_i - g_i|| / gmax, with K^T y computed
// from the coordinates: Basis (K^T Y)_i + Corr_i (K^T K Corr / V = Corr for
// centred Corr). div is K^T Y (V x M).
func (f *Flow) balance(g, div []float64, gmax float64) float64 {
	full := div
	if f.Basis != nil {
		full = mulMatT(div, f.Basis, f.V, f.M, f.D)
	}
	var mean = make([]float64, f.D)
	for i := 0; i < f.V; i++ {
		for r := 0; r < f.D; r++ {
			mean[r] += f.Corr[i*f.D+r] / float64(f.V)
		}
	}
	var worst float64
	for i := 0; i < f.V; i++ {
		var s2 float64
		for r := 0; r < f.D; r++ {
			// (K^T K Corr / V)_i = Corr_i - mean(Corr).
			e := full[i*f.D+r] + f.Corr[i*f.D+r] - mean[r] - g[i*f.D+r]
			s2 += e * e
		}
		worst = max(worst, math.Sqrt(s2))
	}
	return worst / gmax
}
