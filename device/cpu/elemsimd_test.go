package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/hilbert-ml/hilbert/device"
)

// elemsimdInputs returns n float32s of mixed magnitudes, with a NaN, both
// infinities, signed zeros and a subnormal among them when n allows.
func elemsimdInputs(r *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64() * math.Pow(10, float64(r.IntN(9)-4)))
	}
	special := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 0, float32(math.Copysign(0, -1)), 1e-40}
	for i, v := range special {
		if at := 3 + 5*i; at < n {
			x[at] = v
		}
	}
	return x
}

// sameBits reports whether a and b hold the same float32s bit for bit (any
// NaN matching any NaN).
func sameBits(a, b []float32) (int, bool) {
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) && !(a[i] != a[i] && b[i] != b[i]) {
			return i, false
		}
	}
	return 0, true
}

// withScalarLoops runs f with the vector kernels of this file turned off.
func withScalarLoops(f func()) {
	saved := hasAVX2FMA
	hasAVX2FMA = false
	defer func() { hasAVX2FMA = saved }()
	f()
}

// TestAxpbyVectorMatchesScalar: Axpby's vector kernel gives the scalar
// loop's results bit for bit for beta 0, 1 and other values (beta -0
// included: the scalar loop takes it as 0), at lengths around the vector
// width and across workers.
func TestAxpbyVectorMatchesScalar(t *testing.T) {
	if !hasAVX2FMA {
		t.Skip("no AVX2 on this machine: only the scalar loop runs")
	}
	d := New()
	r := rand.New(rand.NewPCG(7, 8))
	for _, n := range []int{1, 7, 8, 9, 15, 16, 17, 33, 1 << 15} {
		x, z := elemsimdInputs(r, n), elemsimdInputs(r, n)
		for _, ab := range [][2]float32{{0.37, 0}, {-1.5, 1}, {0.9, 0.95}, {2, float32(math.Copysign(0, -1))}, {-0.25, -3}} {
			vec, ref := append([]float32(nil), z...), append([]float32(nil), z...)
			d.Axpby(NewFloat32(vec), NewFloat32(x), ab[0], ab[1])
			withScalarLoops(func() { d.Axpby(NewFloat32(ref), NewFloat32(x), ab[0], ab[1]) })
			if i, ok := sameBits(vec, ref); !ok {
				t.Fatalf("n %d alpha %v beta %v: [%d] = %v, scalar loop %v", n, ab[0], ab[1], i, vec[i], ref[i])
			}
		}
	}
}

// TestAdamWStepVectorMatchesScalar: AdamWStep's vector kernel gives the
// scalar loop's parameters, moments and steps bit for bit, with and
// without a step buffer.
func TestAdamWStepVectorMatchesScalar(t *testing.T) {
	if !hasAVX2FMA {
		t.Skip("no AVX2 on this machine: only the scalar loop runs")
	}
	d := New()
	r := rand.New(rand.NewPCG(9, 10))
	for _, n := range []int{5, 8, 13, 24, 1 << 15} {
		p, g, m := elemsimdInputs(r, n), elemsimdInputs(r, n), elemsimdInputs(r, n)
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(math.Abs(r.NormFloat64())) * 1e-3
		}
		for _, keep := range []bool{false, true} {
			run := func() (out [4][]float32) {
				for i, s := range [][]float32{p, m, v} {
					out[i] = append([]float32(nil), s...)
				}
				out[3] = make([]float32, n)
				step := NewFloat32(out[3])
				if !keep {
					step = nil
				}
				// The paper's AdamW at step 3: lr 4e-3, betas 0.9/0.999, eps
				// 1e-10, weight decay 0.1.
				d.AdamWStep(NewFloat32(out[0]), NewFloat32(g), NewFloat32(out[1]), NewFloat32(out[2]), step,
					4e-3, 0.9, 0.999, 1-float32(0.9), float32(1-0.999), 1e-10, 1-4e-4, float32(1-math.Pow(0.9, 3)), float32(1-math.Pow(0.999, 3)))
				return out
			}
			vec := run()
			var ref [4][]float32
			withScalarLoops(func() { ref = run() })
			for k, name := range []string{"p", "m", "v", "step"} {
				if i, ok := sameBits(vec[k], ref[k]); !ok {
					t.Fatalf("n %d keep step %v: %s[%d] = %v, scalar loop %v", n, keep, name, i, vec[k][i], ref[k][i])
				}
			}
		}
	}
}

// TestSwiGLUVectorMatchesScalar: SwiGLU's and SwiGLUBackward's AVX-512
// kernels give the loops' results on sigmoidInto bit for bit, for lengths
// around the 16-wide step and the 8-element tail the loops keep, over the
// exponential's range (|a| to 100: underflow and the clamp) with NaNs,
// infinities and signed zeros.
func TestSwiGLUVectorMatchesScalar(t *testing.T) {
	if !hasAVX512Softmax {
		t.Skip("no AVX-512 on this machine: only the loops run")
	}
	d := New()
	r := rand.New(rand.NewPCG(11, 12))
	for _, n := range []int{3, 8, 15, 16, 17, 24, 40, 1000, 1 << 15} {
		a, b, g := elemsimdInputs(r, n), elemsimdInputs(r, n), elemsimdInputs(r, n)
		for i := range a {
			if i%7 == 0 {
				a[i] = float32(r.NormFloat64() * 40)
			}
		}
		run := func() (out [3][]float32) {
			for k := range out {
				out[k] = make([]float32, n)
			}
			d.SwiGLU(NewFloat32(out[0]), NewFloat32(a), NewFloat32(b))
			d.SwiGLUBackward(NewFloat32(out[1]), NewFloat32(out[2]), NewFloat32(g), NewFloat32(a), NewFloat32(b))
			return out
		}
		vec := run()
		saved := hasAVX512Softmax
		hasAVX512Softmax = false
		ref := run()
		hasAVX512Softmax = saved
		for k, name := range []string{"out", "da", "db"} {
			if i, ok := sameBits(vec[k], ref[k]); !ok {
				t.Fatalf("n %d: %s[%d] = %v (a %v), the loop gives %v", n, name, i, vec[k][i], a[i], ref[k][i])
			}
		}
	}
}

// TestBinaryVectorMatchesScalar: BinaryStrided's vector add, subtract and
// multiply give the scalar loop's results bit for bit, contiguous and with
// a broadcast row (a bias), in place and not, at lengths around the
// vector width.
func TestBinaryVectorMatchesScalar(t *testing.T) {
	if !hasAVX2FMA {
		t.Skip("no AVX2 on this machine: only the scalar loop runs")
	}
	d := New()
	r := rand.New(rand.NewPCG(11, 12))
	for _, op := range []device.BinaryOp{device.Add, device.Sub, device.Mul} {
		for _, n := range []int{1, 7, 8, 9, 17, 768, 1 << 15} {
			x, y := elemsimdInputs(r, 3*n), elemsimdInputs(r, 3*n)
			flat := device.DimsOf(3 * n)
			rows := device.DimsOf(3, n)
			for _, tc := range []struct {
				name string
				dims device.Dims
				b    device.View
			}{
				{"contiguous", flat, device.Contiguous(NewFloat32(y), flat)},
				{"row broadcast", rows, device.View{Buf: NewFloat32(y[:n]), Layout: device.Layout{Strides: [device.MaxDims]int{0, 1}}}},
			} {
				for _, inPlace := range []bool{false, true} {
					run := func() []float32 {
						z := make([]float32, 3*n)
						a := NewFloat32(append([]float32(nil), x...))
						dst := NewFloat32(z)
						if inPlace {
							dst = a
						}
						d.BinaryStrided(op, tc.dims, dst, device.Contiguous(a, tc.dims), tc.b)
						return Float32s(dst)
					}
					vec := run()
					var ref []float32
					withScalarLoops(func() { ref = run() })
					if i, ok := sameBits(vec, ref); !ok {
						t.Fatalf("%v %s n %d in place %v: [%d] = %v, scalar loop %v", op, tc.name, n, inPlace, i, vec[i], ref[i])
					}
				}
			}
		}
	}
}

// TestColumnSumsVectorMatchesScalar: the vector column sums of ReduceAxis
// and of Reduce over axis 0 (Sum and SumSquares) give the scalar loops'
// float64 sums, rounded to float32, bit for bit, at widths around the
// vector's 16 columns and the workers' blocks.
func TestColumnSumsVectorMatchesScalar(t *testing.T) {
	if !hasAVX2FMA {
		t.Skip("no AVX2 on this machine: only the scalar loop runs")
	}
	d := New()
	r := rand.New(rand.NewPCG(13, 14))
	for _, op := range []device.ReduceOp{device.Sum, device.SumSquares} {
		for _, sh := range [][3]int{{1, 1, 16}, {1, 3, 17}, {2, 5, 33}, {1, 1024, 768}, {3, 7, 300}, {1, 2, 1}, {4, 9, 15}} {
			outer, n, inner := sh[0], sh[1], sh[2]
			x := NewFloat32(elemsimdInputs(r, outer*n*inner))
			axis := func() []float32 {
				z := NewFloat32(make([]float32, outer*inner))
				d.ReduceAxis(op, z, x, outer, n, inner)
				return Float32s(z)
			}
			rows := func() []float32 {
				z := NewFloat32(make([]float32, inner))
				d.Reduce(op, 0, z, x, outer*n, inner)
				return Float32s(z)
			}
			for name, f := range map[string]func() []float32{"ReduceAxis": axis, "Reduce axis 0": rows} {
				vec := f()
				var ref []float32
				withScalarLoops(func() { ref = f() })
				if i, ok := sameBits(vec, ref); !ok {
					t.Fatalf("%s %v %v: [%d] = %v, scalar loop %v", name, op, sh, i, vec[i], ref[i])
				}
			}
		}
	}
}

// TestRowSumSquaresVectorMatchesScalar: the eight-row vector sums of
// squares behind Reduce over axis 1 (SumSquares: clipping's and Muon's
// norms) give the scalar loop's results bit for bit, for row counts around
// multiples of eight (the rest run in Go) and odd and even widths.
func TestRowSumSquaresVectorMatchesScalar(t *testing.T) {
	if !hasAVX2FMA {
		t.Skip("no AVX2 on this machine: only the scalar loop runs")
	}
	d := New()
	r := rand.New(rand.NewPCG(15, 16))
	for _, sh := range [][2]int{{8, 1}, {8, 2}, {9, 7}, {16, 768}, {70, 33}, {3, 5}, {130, 128}} {
		rows, cols := sh[0], sh[1]
		host := elemsimdInputs(r, rows*cols)
		host[len(host)/2] = 3e38 // a square that overflows float32, not float64
		x := NewFloat32(host)
		// The float64 sums themselves, before any rounding to float32 can
		// hide a change of order.
		ss := make([]float64, rows)
		done := rowSumSquaresFast(ss, host, cols)
		for i := range done {
			if want := sumSquares(host[i*cols : (i+1)*cols]); math.Float64bits(ss[i]) != math.Float64bits(want) && !(ss[i] != ss[i] && want != want) {
				t.Fatalf("%dx%d row %d: sum of squares %v, scalar loop %v", rows, cols, i, ss[i], want)
			}
		}
		for name, f := range map[string]func() []float32{
			"Reduce": func() []float32 {
				z := NewFloat32(make([]float32, rows))
				d.Reduce(device.SumSquares, 1, z, x, rows, cols)
				return Float32s(z)
			},
		} {
			vec := f()
			var ref []float32
			withScalarLoops(func() { ref = f() })
			if i, ok := sameBits(vec, ref); !ok {
				t.Fatalf("%s %dx%d: [%d] = %v, scalar loop %v", name, rows, cols, i, vec[i], ref[i])
			}
		}
	}
}

// TestSoftmaxGradVectorMatchesScalar: the vector form of the attention
// backward's dS = P (dP - d) gives the scalar loop's results bit for bit
// at lengths around the vector width (the rest runs in Go).
func TestSoftmaxGradVectorMatchesScalar(t *testing.T) {
	if !hasAVX2FMA {
		t.Skip("no AVX2 on this machine: only the scalar loop runs")
	}
	r := rand.New(rand.NewPCG(17, 18))
	for _, n := range []int{1, 7, 8, 9, 64, 77, 256} {
		p, dp := elemsimdInputs(r, n), elemsimdInputs(r, n)
		for _, d := range []float32{0, -0.37, 2.5} {
			want := append([]float32(nil), dp...)
			for u := range want {
				want[u] = p[u] * (want[u] - d)
			}
			got := append([]float32(nil), dp...)
			for u := softmaxGradFast(got, p, d); u < n; u++ {
				got[u] = p[u] * (got[u] - d)
			}
			if i, ok := sameBits(got, want); !ok {
				t.Fatalf("n %d d %v: [%d] = %v, scalar loop %v", n, d, i, got[i], want[i])
			}
		}
	}
}

// TestLayerNormGradsVectorMatchesScalar: LayerNormBackward's vector column
// sums (the gain's and the bias's gradients) give the scalar loop's bit
// for bit, dx untouched, at widths around 16 and the workers' blocks.
func TestLayerNormGradsVectorMatchesScalar(t *testing.T) {
	if !hasAVX2FMA {
		t.Skip("no AVX2 on this machine: only the scalar loop runs")
	}
	d := New()
	r := rand.New(rand.NewPCG(19, 20))
	normal := func(n int, scale float64) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(r.NormFloat64() * scale)
		}
		return v
	}
	for _, sh := range [][2]int{{1, 16}, {5, 17}, {33, 64}, {7, 100}, {64, 768}} {
		rows, cols := sh[0], sh[1]
		x, dy, w := NewFloat32(normal(rows*cols, 3)), NewFloat32(normal(rows*cols, 1)), NewFloat32(normal(cols, 1))
		mean, rstd := NewFloat32(normal(rows, 1)), NewFloat32(normal(rows, 1))
		run := func() []float32 {
			dx, dw, db := NewFloat32(make([]float32, rows*cols)), NewFloat32(make([]float32, cols)), NewFloat32(make([]float32, cols))
			d.LayerNormBackward(dx, dw, db, dy, x, w, mean, rstd, rows, cols)
			return append(append(Float32s(dx), Float32s(dw)...), Float32s(db)...)
		}
		vec := run()
		var ref []float32
		withScalarLoops(func() { ref = run() })
		if i, ok := sameBits(vec, ref); !ok {
			t.Fatalf("%dx%d: [%d] = %v, scalar loop %v", rows, cols, i, vec[i], ref[i])
		}
	}
}
