package geometry_test

import (
	"fmt"

	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/optim/geometry"
)

// The exact row diameter of a step S (V x d, row-major) and the pair that
// attains it.
func ExampleRowDiameter() {
	s := []float32{
		0, 0,
		3, 4,
		-3, 4,
	}
	r, err := geometry.RowDiameter(cpu.New(), s, 3, 2)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("D = %v between rows %d and %d (exact %v)\n", r.D, r.I, r.J, r.Exact)
	// Output: D = 6 between rows 1 and 2 (exact true)
}

// The Hilbert distance between two logit vectors, and the Hilbert RMS of
// a step over a panel of hidden states.
func ExampleHilbertRMS() {
	fmt.Printf("%.1f\n", geometry.HilbertDistance([]float32{0.3, -1.2, 2, 0.5}, []float32{1, 0.1, -0.4, 0.5}))
	s := []float32{1, 3, -2, 3, 4, -1} // V = 3, d = 2
	h := []float32{1, 0, 0, 1}         // two hidden states
	rms, _ := geometry.HilbertRMS(cpu.New(), s, 3, 2, h, 2)
	fmt.Printf("%.6f\n", rms)
	// Output:
	// 3.7
	// 5.099020
}
