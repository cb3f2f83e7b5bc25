package geometry

import (
	"fmt"
	"math"
)

// VarNorm returns ||x||_var = max_i x_i - min_i x_i, the Hilbert
// (variation) semi-norm: invariant to adding a constant to every entry.
// It is 0 for an empty or one-element x and NaN when x holds a NaN.
func VarNorm(x []float32) float64 {
	if len(x) == 0 {
		return 0
	}
	lo, hi := x[0], x[0]
	for _, v := range x {
		if v != v {
			return math.NaN()
		}
		lo, hi = min(lo, v), max(hi, v)
	}
	return float64(hi) - float64(lo)
}

// HilbertDistance returns ||z1 - z2||_var, the Hilbert projective distance
// between the softmax distributions of logit vectors z1 and z2 (a
// constant shift of either changes nothing). The difference is taken in
// float64. It panics when the lengths differ.
func HilbertDistance(z1, z2 []float32) float64 {
	if len(z1) != len(z2) {
		panic(fmt.Sprintf("geometry: HilbertDistance of vectors of length %d and %d", len(z1), len(z2)))
	}
	if len(z1) == 0 {
		return 0
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for i := range z1 {
		d := float64(z1[i]) - float64(z2[i])
		if d != d {
			return math.NaN()
		}
		lo, hi = min(lo, d), max(hi, d)
	}
	return hi - lo
}
