package device

import (
	"math"
	"testing"
)

func TestAdamWCoefficients(t *testing.T) {
	tests := []struct {
		beta1, beta2, lr, wd float64
	}{
		{0.9, 0.999, 4e-3, 0.1},
		{0.95, 0.9999, 2.6666666666666666e-3, 0},
		{0.5, 0.98, 1, 0.01},
		{0, 0, 0, 0},
	}
	for _, tc := range tests {
		h := AdamW{Beta1: float32(tc.beta1), Beta2: float32(tc.beta2), LR: float32(tc.lr), WeightDecay: float32(tc.wd)}
		c1, c2, decay := h.Coefficients()
		// The float64 coefficients, rounded once.
		if want := float32(1 - tc.beta1); c1 != want {
			t.Errorf("%+v: 1-beta1 = %v, expected %v", tc, c1, want)
		}
		if want := float32(1 - tc.beta2); c2 != want {
			t.Errorf("%+v: 1-beta2 = %v, expected %v", tc, c2, want)
		}
		// LR is a scheduled value, exact only to float32.
		if want := 1 - float64(float32(tc.lr))*tc.wd; decay != float32(want) {
			t.Errorf("%+v: decay = %v, expected %v", tc, decay, float32(want))
		}
	}
	// A beta of more than seven significant digits: only the caller's
	// float64 value gives 1 - beta to float32 precision; the shortest
	// decimal of the float32 is another number.
	for _, tc := range []struct{ beta1, beta2, wd float64 }{
		{0.87654321012, 0.99912345678, 0.012345678901},
		{0.9, 0.999, 0.1}, // the paper's: both ways agree
	} {
		h := AdamW{Beta1: float32(tc.beta1), Beta2: float32(tc.beta2), LR: 0.5, WeightDecay: float32(tc.wd),
			ExactBeta1: tc.beta1, ExactBeta2: tc.beta2, ExactWeightDecay: tc.wd}
		c1, c2, decay := h.Coefficients()
		if want := float32(1 - tc.beta1); c1 != want {
			t.Errorf("%+v: 1-beta1 = %v, expected %v", tc, c1, want)
		}
		if want := float32(1 - tc.beta2); c2 != want {
			t.Errorf("%+v: 1-beta2 = %v, expected %v", tc, c2, want)
		}
		if want := float32(1 - 0.5*tc.wd); decay != want {
			t.Errorf("%+v: decay = %v, expected %v", tc, decay, want)
		}
		h.ExactBeta1, h.ExactBeta2, h.ExactWeightDecay = 0, 0, 0
		_, d2, _ := h.Coefficients()
		if long := tc.beta2 != 0.999; (d2 != c2) != long {
			t.Errorf("%+v: without the float64 beta2, 1-beta2 = %v (with it %v)", tc, d2, c2)
		}
		// A float64 value that does not round to the field is ignored.
		h.ExactBeta2 = tc.beta2 + 1e-3
		if _, e2, _ := h.Coefficients(); e2 != d2 {
			t.Errorf("%+v: a mismatched ExactBeta2 was used: %v", tc, e2)
		}
	}
	// The float32 subtraction is what the kernels did before: 1.3e-5 low.
	naive := 1 - float32(0.999)
	if rel := math.Abs(float64(naive)-0.001) / 0.001; rel < 1e-5 {
		t.Errorf("1 - float32(0.999) is only %.2g off; the test no longer shows the cancellation", rel)
	}
}
