package oracle_test

import (
	"fmt"
	"math"

	"github.com/hilbert-ml/hilbert/optim/geometry/oracle"
)

// The appendix's sharp example: the rows of G are the vertices of a
// centred equilateral triangle with unit edges. The best step under a
// row-diameter budget eta decreases the loss by eta T(G) = eta; RowNorm's
// by (eta/2) sum ||g_i|| = 0.866 eta, the bound sqrt((k+1)/(2k)) for k = 2.
func ExampleSolve() {
	s := 1 / math.Sqrt(3)
	g := []float64{
		s, 0,
		-s / 2, 0.5,
		-s / 2, -0.5,
	}
	r, err := oracle.Solve(g, 3, 2, oracle.Options{Tol: 1e-9})
	if err != nil {
		fmt.Println(err)
		return
	}
	ratio, _, _ := r.Ratio()
	fmt.Printf("T(G) in [%.6f, %.6f], rank %d\n", r.Lower, r.Upper, r.Rank)
	fmt.Printf("Delta_RN/Delta_* = %.6f, bound %.6f\n", ratio, oracle.Bound(r.Rank))
	fmt.Printf("certificates: max pair distance of Phi %.6f, flow balance residual < 1e-12: %v\n", r.MaxPairDistance, r.Balance < 1e-12)
	// Output:
	// T(G) in [1.000000, 1.000000], rank 2
	// Delta_RN/Delta_* = 0.866025, bound 0.866025
	// certificates: max pair distance of Phi 1.000000, flow balance residual < 1e-12: true
}
