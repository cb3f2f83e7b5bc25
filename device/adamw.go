package device

import "strconv"

// Coefficients returns the coefficients an AdamW kernel multiplies by,
// each computed in float64 and rounded to float32 once: 1-Beta1, 1-Beta2
// and the weight-decay factor 1-LR*WeightDecay.
//
// The betas are held as float32, and 1 - float32(0.999) is 1.3e-5 (relative)
// away from 1 - 0.999: the cancellation amplifies beta's rounding. So
// 1 - beta is taken of the caller's float64 beta (ExactBeta1, ExactBeta2;
// the weight decay likewise), when it gives one that rounds to the
// float32 field; otherwise of the shortest decimal that rounds to the
// field, the number its caller most likely wrote (0.999). The two agree
// for a beta of up to seven significant digits, such as the paper's 0.9
// and 0.999; for a longer one only the float64 value is exact.
func (h AdamW) Coefficients() (oneMinusBeta1, oneMinusBeta2, decay float32) {
	return float32(1 - exact(h.Beta1, h.ExactBeta1)), float32(1 - exact(h.Beta2, h.ExactBeta2)),
		float32(1 - float64(h.LR)*exact(h.WeightDecay, h.ExactWeightDecay))
}

// exact returns e, the caller's float64 value of x, when it rounds to x,
// and otherwise the shortest decimal that rounds to x.
func exact(x float32, e float64) float64 {
	if float32(e) == x {
		return e
	}
	return decimal(x)
}

// decimal returns the float64 of the shortest decimal that rounds to x.
func decimal(x float32) float64 {
	v, err := strconv.ParseFloat(strconv.FormatFloat(float64(x), 'g', -1, 32), 64)
	if err != nil {
		return float64(x) // NaN and Inf format and parse back; unreachable
	}
	return v
}
