package optim

import (
	"math"
	"testing"
)

func TestCosineReference(t *testing.T) {
	s, err := NewCosine(7083, 708)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		step int
		want float64
	}{
		{0, 0}, {1, 0.0014124293785310734}, {354, 0.5}, {707, 0.998587570621469},
		{708, 1}, {709, 0.9999999453414462}, {3895, 0.55}, {7082, 0.1}, {9000, 0.1},
	} {
		// The formula is the recipe's; only libm's cos may differ by an ulp.
		if got := s.Scale(c.step); math.Abs(got-c.want) > 2e-16 {
			t.Errorf("scale(%d) = %.17g, want %.17g", c.step, got, c.want)
		}
	}
	one, _ := NewCosine(11, 10) // T - W == 1
	if got := one.Scale(10); got != 0.1 {
		t.Errorf("T - W == 1: scale = %v, want 0.1", got)
	}
	if _, err := NewCosine(10, 10); err == nil {
		t.Error("warmup == total accepted")
	}
}

func TestPaperHorizon(t *testing.T) {
	for _, c := range []struct {
		params       int64
		total, warmp int
	}{{185680896, 7083, 708}, {379184640, 14464, 1446}, {639797248, 24406, 2440}} {
		T, W := PaperHorizon(c.params, 524288)
		if T != c.total || W != c.warmp {
			t.Errorf("PaperHorizon(%d) = %d, %d; want %d, %d", c.params, T, W, c.total, c.warmp)
		}
	}
}
