package optim

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/tensor"
)

// param returns a named float32 tensor on the CPU holding data.
func param(t testing.TB, name string, data []float64, shape ...int) *tensor.Tensor {
	t.Helper()
	f := make([]float32, len(data))
	for i, v := range data {
		f[i] = float32(v)
	}
	p, err := tensor.FromFloat32(cpu.New(), f, shape...)
	if err != nil {
		t.Fatal(err)
	}
	p.Name = name
	p.SetRequiresGrad(true)
	return p
}

// setGrad gives p a gradient holding data.
func setGrad(t testing.TB, p *tensor.Tensor, data []float64) {
	t.Helper()
	f := make([]float32, len(data))
	for i, v := range data {
		f[i] = float32(v)
	}
	if g := p.Grad(); g != nil {
		g.SetFloat32(f)
		return
	}
	g, err := tensor.FromFloat32(p.Device(), f, p.Shape()...)
	if err != nil {
		t.Fatal(err)
	}
	p.SetGrad(g)
}

func randn(rng *rand.Rand, n int, std float64) []float64 {
	x := make([]float64, n)
	for i := range x {
		x[i] = rng.NormFloat64() * std
	}
	return x
}

func f64(x []float32) []float64 {
	y := make([]float64, len(x))
	for i, v := range x {
		y[i] = float64(v)
	}
	return y
}

// round32 rounds every value to float32, as the optimizers' inputs are.
func round32(x []float64) []float64 {
	y := make([]float64, len(x))
	for i, v := range x {
		y[i] = float64(float32(v))
	}
	return y
}

// near checks |got - want| <= atol + rtol |want| elementwise.
func near(t testing.TB, what string, got, want []float64, atol, rtol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range got {
		if d := math.Abs(got[i] - want[i]); !(d <= atol+rtol*math.Abs(want[i])) {
			t.Fatalf("%s[%d] = %.17g, want %.17g (diff %.3g)", what, i, got[i], want[i], d)
		}
	}
}

// matmul64 is a float64 reference product of a (m x k) and b (k x n).
func matmul64(a, b []float64, m, k, n int) []float64 {
	c := make([]float64, m*n)
	for i := range m {
		for p := range k {
			for j := range n {
				c[i*n+j] += a[i*k+p] * b[p*n+j]
			}
		}
	}
	return c
}

func transpose64(a []float64, m, n int) []float64 {
	t := make([]float64, m*n)
	for i := range m {
		for j := range n {
			t[j*m+i] = a[i*n+j]
		}
	}
	return t
}

// ns64 is the float64 reference Newton-Schulz of the recipe.
func ns64(x []float64, rows, cols, steps int, eps float64) []float64 {
	tall := rows > cols
	if tall {
		x = transpose64(x, rows, cols)
		rows, cols = cols, rows
	}
	var ss float64
	for _, v := range x {
		ss += v * v
	}
	y := make([]float64, len(x))
	for i, v := range x {
		y[i] = v / (math.Sqrt(ss) + eps)
	}
	a, b, c := NewtonSchulzCoefficients[0], NewtonSchulzCoefficients[1], NewtonSchulzCoefficients[2]
	for range steps {
		A := matmul64(y, transpose64(y, rows, cols), rows, cols, rows)
		AA := matmul64(A, A, rows, rows, rows)
		B := make([]float64, len(A))
		for i := range B {
			B[i] = b*A[i] + c*AA[i]
		}
		BY := matmul64(B, y, rows, rows, cols)
		for i := range y {
			y[i] = a*y[i] + BY[i]
		}
	}
	if tall {
		y = transpose64(y, rows, cols)
	}
	return y
}
