package main

import (
	"math"
	"strings"
	"testing"
)

// TestSteps: the schedule lengths of PLAN.md's table (run.sh computes the
// same with awk).
func TestSteps(t *testing.T) {
	for _, tc := range []struct {
		d      int
		tpp    float64
		params int
		steps  int
	}{{64, 0.5, 262_144, 64}, {64, 20, 262_144, 2560}, {128, 2, 786_432, 768}, {128, 20, 786_432, 7680}, {256, 5, 2_621_440, 6400}} {
		if p, s := params(tc.d), steps(tc.d, tc.tpp); p != tc.params || s != tc.steps {
			t.Errorf("d %d, %g tokens/param: %d params, %d steps; want %d, %d", tc.d, tc.tpp, p, s, tc.params, tc.steps)
		}
	}
}

func TestStratifiedSE(t *testing.T) {
	// Two books of 2 and 4 pieces, weights 1/3 and 2/3:
	// se^2 = (1/3)^2 s_a^2 / 2 + (2/3)^2 s_b^2 / 4.
	src := []string{"a", "a", "b", "b", "b", "b"}
	v := []float64{1, 1 + math.Sqrt2, 0, 0, 1, 1}
	// Book a: sd = sqrt2/sqrt2 = 1 (two values sqrt2 apart); book b: the
	// sample variance of 0,0,1,1 is 1/3.
	want := math.Sqrt((1.0/9)*1/2 + (4.0/9)*(1.0/3)/4)
	if got := stratifiedSE(v, src); math.Abs(got-want) > 1e-15 {
		t.Errorf("stratifiedSE = %.17g, want %.17g", got, want)
	}
	// A constant shift of every piece changes no difference: paired se 0.
	shifted := make([]float64, len(v))
	for i, x := range v {
		shifted[i] = x + 0.25
	}
	if got := pairedSE(v, shifted, src); got > 1e-15 {
		t.Errorf("pairedSE of a shift = %g, want 0", got)
	}
	if !math.IsNaN(stratifiedSE(nil, src)) || !math.IsNaN(pairedSE(v, nil, src)) {
		t.Error("no pieces: want NaN")
	}
}

// groupPieces averages groups of consecutive pieces within each book and
// leaves out a book's last pieces that do not fill a group.
func TestGroupPieces(t *testing.T) {
	src := []string{"a", "a", "a", "b", "b", "b", "b"}
	v := []float64{1, 3, 5, 7, 9, 11, 13}
	got, books := groupPieces(v, src, 2)
	want, wantBooks := []float64{2, 8, 12}, []string{"a", "b", "b"} // a's 5 fills no group
	if len(got) != len(want) {
		t.Fatalf("groups %v (%v), want %v (%v)", got, books, want, wantBooks)
	}
	for i := range want {
		if got[i] != want[i] || books[i] != wantBooks[i] {
			t.Errorf("group %d: %g of %s, want %g of %s", i, got[i], books[i], want[i], wantBooks[i])
		}
	}
	if got, _ := groupPieces(v, src, 1); len(got) != len(v) {
		t.Errorf("groups of one: %v", got)
	}
}

// TestSlopeTable: the exponent from the ratios of the seed means (not the
// mean of the per-seed ratios) at each horizon with two widths; none for a
// horizon with one.
func TestSlopeTable(t *testing.T) {
	pair := func(aD, rD, aH, rH float64) (run, run) {
		var a, r run
		a.Diam, a.HRMS, r.Diam, r.HRMS = aD, aH, rD, rH
		return a, r
	}
	newCell := func(d int, tpp float64, v ...[4]float64) *cell {
		c := &cell{d: d, tpp: tpp}
		for i, x := range v {
			a, r := pair(x[0], x[1], x[2], x[3])
			c.seeds, c.a, c.r = append(c.seeds, i), append(c.a, a), append(c.r, r)
		}
		return c
	}
	// d 64: D ratio of the means (1+3)/2 / ((0.75+0.25)/2) = 4 (the mean of
	// the per-seed ratios would be 6.67); Hilbert RMS ratio 2. d 128: 8 and 2.
	cells := map[[2]float64]*cell{
		{64, 2}:    newCell(64, 2, [4]float64{1, 0.75, 2, 1}, [4]float64{3, 0.25, 2, 1}),
		{128, 2}:   newCell(128, 2, [4]float64{8, 1, 4, 2}),
		{64, 20}:   newCell(64, 20, [4]float64{5, 1, 3, 1}),
		{128, 0.5}: newCell(128, 0.5, [4]float64{5, 1, 3, 1}),
	}
	order := [][2]float64{{64, 2}, {64, 20}, {128, 0.5}, {128, 2}}
	got := slopeTable(order, cells)
	want := "| 2 | 64,128 | 4.00 / 8.00 | 1.00 | 2.00 / 2.00 | 0.00 |\n"
	if !strings.HasSuffix(got, want) || strings.Count(got, "\n| ") != 2 {
		t.Errorf("slopeTable:\n%s\nwant the header and one row:\n%s", got, want)
	}
	if got := slopeTable(order[1:3], cells); got != "" {
		t.Errorf("no horizon with two widths: got %q, want \"\"", got)
	}
}
