package oracle

import "math"

// The certified bounds of a PDHG iterate (pdhg.go): a potential repaired
// from the iterate to be feasible gives the lower bound, the flow
// projected onto the balance constraints the upper one.

// certificate returns the certified bounds of the current iterate: the
// lower bound <g, phi> of the repaired potential phi (see repair), and the
// cost of the flow projected onto the balance constraints, sum ||y_ij +
// (r_i - r_j) / V|| with r = g - K^T Y.
func (s *solver) certificate() (lo, up float64, phi []float64) {
	v, m := s.v, s.m
	r := make([]float64, v*m)
	for i := range r {
		r[i] = s.g[i] - s.kt[i]
	}
	inv := 1 / float64(v)
	near2 := (1 - s.margin) * (1 - s.margin)
	sums := make([]float64, s.threads)
	maxd := make([]float64, s.threads)
	nears := make([][]pair, s.threads)
	forBlocks(s.blocks, s.threads, func(w, lo, hi int) {
		var sum, md float64
		near := nears[w]
		for i := lo; i < hi; i++ {
			xi, ri := s.x[i*m:(i+1)*m], r[i*m:(i+1)*m]
			p := pairIndex(i, i+1, v)
			for j := i + 1; j < v; j++ {
				d2 := sqDiff(xi, s.x[j*m:(j+1)*m])
				md = max(md, d2)
				if d2 > near2 {
					near = append(near, pair{int32(i), int32(j)})
				}
				rj := r[j*m : (j+1)*m]
				if s.act[p] {
					sum += math.Sqrt(projectedNorm2(s.y[p*m:(p+1)*m], ri, rj, inv))
				} else {
					sum += math.Sqrt(sqDiff(ri, rj)) * inv
				}
				p++
			}
		}
		sums[w] += sum
		maxd[w] = max(maxd[w], md)
		nears[w] = near
	})
	var md float64
	var near []pair
	for w := range sums {
		up += sums[w]
		md = max(md, maxd[w])
		near = append(near, nears[w]...)
	}
	phi, dmax := s.repair(near, math.Sqrt(md))
	// The next check's margin: a few times this one's largest violation.
	s.margin = min(0.1, max(1e-3, 4*(math.Sqrt(md)-1)))
	if dmax > 0 {
		lo = dot(s.g, phi) / dmax
		for i := range phi {
			phi[i] /= dmax
		}
	}
	return lo, up, phi
}

// pair is a pair of rows i < j.
type pair struct{ i, j int32 }

// repair returns a copy of the current potentials with the violated pair
// constraints among near (every pair closer than 1 - margin is left out)
// projected away, a few Gauss-Seidel sweeps of pairwise projections that
// move the row with the smaller gradient more, and its exact largest pair
// distance. dmax is the largest pair distance of s.x. Only the pairs of
// near are checked when no row moved by margin/2 or more (the others stay
// below 1); otherwise every pair is.
func (s *solver) repair(near []pair, dmax float64) ([]float64, float64) {
	v, m := s.v, s.m
	x := append([]float64(nil), s.x...)
	if dmax <= 1 || len(near) == 0 {
		return x, dmax
	}
	if s.weight == nil {
		s.weight = make([]float64, v)
		for i := 0; i < v; i++ {
			s.weight[i] = norm(s.g[i*m:(i+1)*m]) + 1e-12
		}
	}
	diff := make([]float64, m)
	for sweep := 0; sweep < 4; sweep++ {
		worst := 0.0
		for _, pr := range near {
			i, j := int(pr.i), int(pr.j)
			xi, xj := x[i*m:(i+1)*m], x[j*m:(j+1)*m]
			d := math.Sqrt(sqDiff(xi, xj))
			if d <= 1 {
				continue
			}
			worst = max(worst, d-1)
			// Move i and j towards each other by d - 1 in all, the
			// lighter row more.
			wi, wj := s.weight[i], s.weight[j]
			ci, cj := (d-1)/d*wj/(wi+wj), (d-1)/d*wi/(wi+wj)
			for c := range diff {
				e := xi[c] - xj[c]
				xi[c] -= ci * e
				xj[c] += cj * e
			}
		}
		if worst < 1e-13 {
			break
		}
	}
	var moved float64
	for i := 0; i < v; i++ {
		moved = max(moved, sqDiff(x[i*m:(i+1)*m], s.x[i*m:(i+1)*m]))
	}
	if 2*math.Sqrt(moved) >= s.margin {
		return x, maxPairDistance(x, v, m, s.threads)
	}
	var md float64
	for _, pr := range near {
		i, j := int(pr.i), int(pr.j)
		md = max(md, sqDiff(x[i*m:(i+1)*m], x[j*m:(j+1)*m]))
	}
	return x, math.Sqrt(md)
}

// maxPairDistance returns max_{i<j} ||x_i - x_j|| of x (v x d) by direct
// subtraction in float64 over every pair.
func maxPairDistance(x []float64, v, d, threads int) float64 {
	if v < 2 || d == 0 {
		return 0
	}
	threads = max(1, min(threads, v))
	maxd := make([]float64, threads)
	forBlocks(rowBlocks(v, 8*threads), threads, func(w, lo, hi int) {
		md := maxd[w]
		for i := lo; i < hi; i++ {
			xi := x[i*d : (i+1)*d]
			for j := i + 1; j < v; j++ {
				md = max(md, sqDiff(xi, x[j*d:(j+1)*d]))
			}
		}
		maxd[w] = md
	})
	var md float64
	for _, e := range maxd {
		md = max(md, e)
	}
	return math.Sqrt(md)
}
