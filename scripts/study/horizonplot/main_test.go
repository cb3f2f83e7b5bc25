package main

import (
	"math"
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
