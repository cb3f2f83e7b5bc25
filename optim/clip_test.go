package optim

import (
	"math"
	"strings"
	"testing"

	"github.com/hilbert-ml/hilbert/tensor"
)

func TestClipGradNorm(t *testing.T) {
	a := param(t, "a", []float64{0, 0, 0}, 3)
	b := param(t, "b", []float64{0, 0, 0, 0}, 2, 2)
	c := param(t, "c", []float64{0}, 1) // no gradient: counts as zero
	setGrad(t, a, []float64{3, 0, 0})
	setGrad(t, b, []float64{0, 4, 0, 12})
	norm, err := ClipGradNorm([]*tensor.Tensor{a, b, c}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if norm != 13 {
		t.Fatalf("norm = %v, want 13", norm)
	}
	k := 1 / (13 + 1e-6)
	near(t, "a.grad", f64(a.Grad().Float32s()), []float64{3 * k, 0, 0}, 1e-7, 0)
	near(t, "b.grad", f64(b.Grad().Float32s()), []float64{0, 4 * k, 0, 12 * k}, 1e-7, 0)

	// Below the threshold nothing changes.
	setGrad(t, a, []float64{0.3, 0, 0})
	setGrad(t, b, []float64{0, 0.4, 0, 0})
	if norm, _ := ClipGradNorm([]*tensor.Tensor{a, b}, 1); math.Abs(norm-0.5) > 1e-7 {
		t.Fatalf("norm = %v, want 0.5", norm)
	}
	near(t, "b.grad", f64(b.Grad().Float32s()), round32([]float64{0, 0.4, 0, 0}), 0, 0)

	// A non-finite norm names the first offending parameter.
	setGrad(t, a, []float64{1, math.Inf(1), 0})
	setGrad(t, b, []float64{math.NaN(), 0, 0, 0})
	_, err = ClipGradNorm([]*tensor.Tensor{b, a}, 1)
	if err == nil || !strings.Contains(err.Error(), " b ") {
		t.Fatalf("err = %v, want one naming b", err)
	}
	_, err = ClipGradNorm([]*tensor.Tensor{a, b}, 1)
	if err == nil || !strings.Contains(err.Error(), " a ") {
		t.Fatalf("err = %v, want one naming a", err)
	}
}
