package oracle

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"
)

// bruteCounts counts, from Flow.At and Phi pair by pair, the pairs at
// distance >= frac and the fewest pairs carrying frac of the cost.
func bruteCounts(r *Result, frac float64) (dist, cost int) {
	v, d := r.V, r.D
	var costs []float64
	var total float64
	y := make([]float64, d)
	for i := 0; i < v; i++ {
		for j := i + 1; j < v; j++ {
			var s2 float64
			for c := 0; c < d; c++ {
				e := r.Phi[i*d+c] - r.Phi[j*d+c]
				s2 += e * e
			}
			if math.Sqrt(s2) >= frac {
				dist++
			}
			c := norm(r.Flow.At(i, j, y))
			costs, total = append(costs, c), total+c
		}
	}
	sort.Sort(sort.Reverse(sort.Float64Slice(costs)))
	var sum float64
	for k, c := range costs {
		if sum += c; sum >= frac*total {
			return dist, k + 1
		}
	}
	return dist, len(costs)
}

// The three pair counts: on the regular simplex every pair is at the
// diameter and carries an equal share of the cost; on two tokens the one
// pair; on heavy-tailed and random gradients the counts equal a brute
// force from Flow.At and Phi, and PairCosts equals ||y_ij|| pair by pair.
func TestPairs(t *testing.T) {
	rng := rand.New(rand.NewPCG(16, 3))
	for _, k := range []int{3, 7, 12} {
		r := solve(t, simplex(rng, k, k+2, 1.5), k+1, k+2)
		p := (k + 1) * k / 2
		got, err := r.PairCounts(0.999)
		if err != nil {
			t.Fatal(err)
		}
		if got.Distance != p || got.Cost != p || got.Flow != r.Active {
			t.Errorf("simplex k %d: counts %+v, want %d pairs at the diameter carrying the cost (active %d)", k, got, p, r.Active)
		}
	}
	r := solve(t, []float64{1, 2, -3, 0.5}, 2, 2)
	if got, err := r.PairCounts(0.999); err != nil || got.Distance != 1 || got.Cost != 1 {
		t.Errorf("two tokens: %+v, %v; want one pair", got, err)
	}
	for _, c := range []struct{ v, d int }{{30, 8}, {48, 16}, {10, 30}} {
		r := solve(t, ceGradient(rng, c.v, c.d, 400), c.v, c.d)
		for _, frac := range []float64{0.5, 0.9, 0.999} {
			dist, cost := bruteCounts(r, frac)
			got, err := r.PairCounts(frac)
			if err != nil {
				t.Fatal(err)
			}
			if got.Distance != dist || got.Cost != cost {
				t.Errorf("%+v at %g: counts %+v, brute force %d at the distance, %d carrying the cost", c, frac, got, dist, cost)
			}
		}
		costs, y := r.Flow.PairCosts(), make([]float64, c.d)
		for i := 0; i < c.v; i++ {
			for j := i + 1; j < c.v; j++ {
				want := norm(r.Flow.At(i, j, y))
				if got := costs[r.Flow.Index(i, j)]; math.Abs(got-want) > 1e-12*max(want, 1e-300) {
					t.Fatalf("%+v: PairCosts (%d, %d) = %.17g, ||y_ij|| = %.17g", c, i, j, got, want)
				}
			}
		}
		got, _ := r.PairCounts(0.999)
		t.Logf("%+v: %d pairs: %d carrying flow, %d at distance >= 0.999, %d carrying 99.9%% of the cost", c, r.Flow.Pairs(), got.Flow, got.Distance, got.Cost)
	}
	for _, bad := range []float64{0, -1, 1.5, math.NaN()} {
		if _, err := r.PairsAtDistance(bad); err == nil {
			t.Errorf("PairsAtDistance(%v) accepted", bad)
		}
		if _, err := r.PairsCarrying(bad); err == nil {
			t.Errorf("PairsCarrying(%v) accepted", bad)
		}
	}
}
