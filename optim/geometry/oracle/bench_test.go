package oracle

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkSolve solves Zipf-frequency gradients to a relative gap of
// 1e-4 (the timing table of docs/results/oracle comes from `hilbert oracle
// -timing`, which runs the same kind of gradient at larger sizes).
func BenchmarkSolve(b *testing.B) {
	for _, c := range []struct{ v, d int }{{64, 32}, {128, 64}, {256, 64}} {
		g := ceGradient(rand.New(rand.NewPCG(uint64(c.v), uint64(c.d))), c.v, c.d, 1000)
		b.Run(fmt.Sprintf("V%d_d%d", c.v, c.d), func(b *testing.B) {
			var iters int
			for b.Loop() {
				r, err := Solve(g, c.v, c.d, Options{})
				if err != nil {
					b.Fatal(err)
				}
				iters = r.Iterations
			}
			b.ReportMetric(float64(iters), "iterations")
		})
	}
}
