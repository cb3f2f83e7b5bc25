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
	// The float32 subtraction is what the kernels did before: 1.3e-5 low.
	naive := 1 - float32(0.999)
	if rel := math.Abs(float64(naive)-0.001) / 0.001; rel < 1e-5 {
		t.Errorf("1 - float32(0.999) is only %.2g off; the test no longer shows the cancellation", rel)
	}
}
