package device

import "strconv"

// Coefficients returns the coefficients an AdamW kernel multiplies by,
// each computed in float64 and rounded to float32 once: 1-Beta1, 1-Beta2
// and the weight-decay factor 1-LR*WeightDecay.
//
// The betas are held as float32, and 1 - float32(0.999) is 1.3e-5 (relative)
// away from 1 - 0.999: the cancellation amplifies beta's rounding. So each
// beta (and the weight decay) is first read back as the shortest decimal
// that rounds to it, the number its caller wrote (0.999), and 1 - beta is
// taken of that. For a beta of more than seven significant digits this is
// as exact as float32 allows, no worse than 1 - Beta.
func (h AdamW) Coefficients() (oneMinusBeta1, oneMinusBeta2, decay float32) {
	return float32(1 - decimal(h.Beta1)), float32(1 - decimal(h.Beta2)), float32(1 - float64(h.LR)*decimal(h.WeightDecay))
}

// decimal returns the float64 of the shortest decimal that rounds to x.
func decimal(x float32) float64 {
	v, err := strconv.ParseFloat(strconv.FormatFloat(float64(x), 'g', -1, 32), 64)
	if err != nil {
		return float64(x) // NaN and Inf format and parse back; unreachable
	}
	return v
}
