package cpu

// tanhf returns tanh(x) in float32 arithmetic, several times faster than
// math.Tanh in float64 (GPT-2's GELU takes it on every MLP activation):
// for |x| < 0.625 the odd polynomial x + x^3 P(x^2) (Cephes tanhf
// coefficients), above it 1 - 2/(e^(2|x|) + 1) with expf, and +-1 beyond
// |x| = 9, where tanh rounds to 1 in float32. It is within 3 ulp of the
// correctly rounded value (TestTanhfAccuracy); signed zeros, infinities
// and NaN come out as math.Tanh's.
func tanhf(x float32) float32 {
	a := x
	if a < 0 {
		a = -a
	}
	switch {
	case x == 0:
		return x // keeps the sign of zero
	case a > 9:
		if x < 0 {
			return -1
		}
		return 1
	case a >= 0.625:
		t := 1 - 2/(expf(2*a)+1)
		if x < 0 {
			return -t
		}
		return t
	}
	// |x| < 0.625, or NaN (which the polynomial propagates).
	z := x * x
	p := float32(-5.70498872745e-3)
	p = p*z + 2.06390887954e-2
	p = p*z - 5.37397155531e-2
	p = p*z + 1.33314422036e-1
	p = p*z - 3.33332819422e-1
	return p*z*x + x
}
