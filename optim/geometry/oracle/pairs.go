package oracle

import (
	"fmt"
	"runtime"
	"slices"
)

// Which pairs does the exact step use? Three counts answer it, and they
// differ for a first-order solver's answer:
//
//   - Result.Active: pairs carrying flow in the solver's last iterate
//     (before the balance projection, which puts a small flow on every
//     pair); the iterate leaves small flows on many pairs;
//   - PairsAtDistance(0.999): pairs whose potentials sit at (nearly) the
//     full budget, the constraints that bind in the certified step;
//   - PairsCarrying(0.999): the fewest pairs whose flow norms make up
//     99.9% of the certified flow's cost.
//
// At an exact optimum complementary slackness ties them (flow only on
// pairs at distance 1); at a finite gap they differ, the first most.

// PairCounts are the three counts for one solve.
type PairCounts struct {
	Flow     int // pairs carrying flow in the last iterate (Result.Active)
	Distance int // pairs at distance >= the given fraction of the budget
	Cost     int // fewest pairs carrying the given share of the cost
}

// PairCounts returns the three counts, with frac the distance (of the budget
// 1) and the cost share (0.999 for both in the published studies).
func (r *Result) PairCounts(frac float64) (PairCounts, error) {
	dist, err := r.PairsAtDistance(frac)
	if err != nil {
		return PairCounts{}, err
	}
	cost, err := r.PairsCarrying(frac)
	if err != nil {
		return PairCounts{}, err
	}
	return PairCounts{Flow: r.Active, Distance: dist, Cost: cost}, nil
}

// PairsAtDistance returns the number of pairs i < j with ||phi_i - phi_j||
// >= dist in the certified potential Phi (whose largest pair distance is at
// most 1), by direct subtraction in float64 over every pair. dist must lie
// in (0, 1].
func (r *Result) PairsAtDistance(dist float64) (int, error) {
	if !(dist > 0 && dist <= 1) {
		return 0, fmt.Errorf("oracle: PairsAtDistance(%v): want a distance in (0, 1]", dist)
	}
	v, d := r.V, r.D
	if v < 2 || d == 0 || len(r.Phi) != v*d {
		return 0, nil
	}
	threads := max(1, min(runtime.GOMAXPROCS(0), v))
	counts := make([]int, threads)
	min2 := dist * dist
	forBlocks(rowBlocks(v, 8*threads), threads, func(w, lo, hi int) {
		n := 0
		for i := lo; i < hi; i++ {
			xi := r.Phi[i*d : (i+1)*d]
			for j := i + 1; j < v; j++ {
				if sqDiff(xi, r.Phi[j*d:(j+1)*d]) >= min2 {
					n++
				}
			}
		}
		counts[w] += n
	})
	n := 0
	for _, c := range counts {
		n += c
	}
	return n, nil
}

// PairsCarrying returns the fewest pairs whose flow norms ||y_ij|| in the
// certified flow sum to at least share of its cost: the pairs sorted by
// cost, largest first, counted until their running sum reaches share x
// the total. share must lie in (0, 1]; a flow of cost 0 gives 0.
func (r *Result) PairsCarrying(share float64) (int, error) {
	if !(share > 0 && share <= 1) {
		return 0, fmt.Errorf("oracle: PairsCarrying(%v): want a share in (0, 1]", share)
	}
	if r.Flow == nil {
		return 0, nil
	}
	costs := r.Flow.PairCosts()
	var total float64
	for _, c := range costs {
		total += c
	}
	if total == 0 {
		return 0, nil
	}
	slices.Sort(costs)
	var sum float64
	for k := len(costs) - 1; k >= 0; k-- {
		sum += costs[k]
		if sum >= share*total {
			return len(costs) - k, nil
		}
	}
	return len(costs), nil // rounding: the descending sum fell short of the ascending one
}
