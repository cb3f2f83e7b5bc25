package cpu_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/cpu"
)

// fdGrad returns the gradient of f at x by central differences in float64.
// With step h the truncation error is O(h^2) and the cancellation error
// O(eps64/h); h = 1e-5 keeps both near 1e-10 for the smooth, O(1)
// functions tested here.
func fdGrad(x []float64, f func(x []float64) float64) []float64 {
	const h = 1e-5
	g := make([]float64, len(x))
	for i := range x {
		old := x[i]
		x[i] = old + h
		fp := f(x)
		x[i] = old - h
		fm := f(x)
		x[i] = old
		g[i] = (fp - fm) / (2 * h)
	}
	return g
}

// dot returns sum a[i]*b[i].
func dot(a []float32, b []float64) float64 {
	var s float64
	for i := range b {
		s += float64(a[i]) * b[i]
	}
	return s
}

// refRMSNorm normalises each row of x in float64.
func refRMSNorm(x []float64, rows, cols int, eps float64) (y, rstd []float64) {
	y, rstd = make([]float64, len(x)), make([]float64, rows)
	for r := 0; r < rows; r++ {
		var ss float64
		for _, v := range x[r*cols : (r+1)*cols] {
			ss += v * v
		}
		rstd[r] = 1 / math.Sqrt(ss/float64(cols)+eps)
		for c := 0; c < cols; c++ {
			y[r*cols+c] = x[r*cols+c] * rstd[r]
		}
	}
	return y, rstd
}

func TestRMSNorm(t *testing.T) {
	for _, sh := range [][2]int{{1, 1}, {3, 5}, {4, 64}, {2, 768}, {40, 500}} {
		rows, cols := sh[0], sh[1]
		name := fmt.Sprintf("%dx%d", rows, cols)
		const eps = 1e-6
		r := newRand(uint64(rows*cols) + 3)
		x := randSlice(r, rows*cols, 2)
		if rows > 2 {
			clear(x[cols : 2*cols]) // a zero row: rstd = 1/sqrt(eps), y = 0
		}
		dy := randSlice(r, rows*cols, 1)
		out, rstd := buf(randSlice(r, rows*cols, 5)), zeros(t, rows)
		dev.RMSNorm(out, rstd, buf(x), rows, cols, eps)
		wantY, wantR := refRMSNorm(f64(x), rows, cols, eps)
		// Sum of squares in float64, one rounding of rstd, one product:
		// within 3u.
		checkClose(t, name+" out", host(out), wantY, 3*u32, 1e-30)
		checkClose(t, name+" rstd", host(rstd), wantR, 2*u32, 0)

		dx := buf(randSlice(r, rows*cols, 5))
		dev.RMSNormBackward(dx, buf(dy), buf(x), rstd, rows, cols)
		// Gradient of L = sum dy*y(x) from the float64 reference, row by
		// row (rows are independent).
		var want []float64
		for r := 0; r < rows; r++ {
			want = append(want, fdGrad(f64(x[r*cols:(r+1)*cols]), func(xx []float64) float64 {
				y, _ := refRMSNorm(xx, 1, cols, eps)
				return dot(dy[r*cols:], y)
			})...)
		}
		// The kernel's dx is rstd*(dy - x*c) with a float32 dot product
		// feeding c: relative 1e-5 of the row's gradient scale (rstd*|dy|
		// ~ 1) covers float32 rounding plus the 1e-10 difference error.
		// The zero row has rstd = 1000 and gradient dy*1000.
		rs := host(rstd)
		checkCloseTol(t, name+" dx", host(dx), want, func(i int) float64 {
			return 1e-5*math.Abs(want[i]) + 1e-5*float64(rs[i/cols])
		})
	}
}

// refRoPE rotates x ([B,T,H,D]) in float64 by the tabled angles; sign -1
// rotates backwards.
func refRoPE(x []float32, cos, sin []float32, s device.AttentionShape, sign float64) []float64 {
	half := s.HeadDim / 2
	out := make([]float64, len(x))
	for b := 0; b < s.Batch; b++ {
		for t := 0; t < s.Seq; t++ {
			for h := 0; h < s.Heads; h++ {
				base := ((b*s.Seq+t)*s.Heads + h) * s.HeadDim
				for j := 0; j < half; j++ {
					l, r := float64(x[base+j]), float64(x[base+half+j])
					c, sn := float64(cos[t*half+j]), sign*float64(sin[t*half+j])
					out[base+j] = l*c - r*sn
					out[base+half+j] = r*c + l*sn
				}
			}
		}
	}
	return out
}

// ropeTables returns the paper's tables: angle = t * 10000^(-2j/D).
func ropeTables(seq, headDim int) (cos, sin []float32) {
	half := headDim / 2
	cos, sin = make([]float32, seq*half), make([]float32, seq*half)
	for t := 0; t < seq; t++ {
		for j := 0; j < half; j++ {
			a := float64(t) * math.Pow(10000, -2*float64(j)/float64(headDim))
			cos[t*half+j], sin[t*half+j] = float32(math.Cos(a)), float32(math.Sin(a))
		}
	}
	return cos, sin
}

func TestRoPEPaperValue(t *testing.T) {
	// paper-recipe.md: x=[1,2,3,4], cos=0, sin=1 -> [-3,-4,1,2].
	s := device.AttentionShape{Batch: 1, Seq: 1, Heads: 1, HeadDim: 4}
	out := zeros(t, 4)
	dev.RoPE(out, buf([]float32{1, 2, 3, 4}), buf([]float32{0, 0}), buf([]float32{1, 1}), s, false)
	checkEqual(t, "RoPE", host(out), []float32{-3, -4, 1, 2})
	dev.RoPE(out, out, buf([]float32{0, 0}), buf([]float32{1, 1}), s, true)
	checkEqual(t, "inverse RoPE", host(out), []float32{1, 2, 3, 4})
}

func TestRoPE(t *testing.T) {
	for _, s := range []device.AttentionShape{
		{Batch: 1, Seq: 1, Heads: 1, HeadDim: 2},
		{Batch: 2, Seq: 5, Heads: 3, HeadDim: 8},
		{Batch: 2, Seq: 17, Heads: 2, HeadDim: 64},
		{Batch: 3, Seq: 64, Heads: 4, HeadDim: 64}, // above the parallel grain
	} {
		name := fmt.Sprintf("%+v", s)
		n := s.Batch * s.Seq * s.Heads * s.HeadDim
		r := newRand(uint64(n))
		x := randSlice(r, n, 1)
		cos, sin := ropeTables(s.Seq, s.HeadDim)
		C, S := buf(cos), buf(sin)
		for _, inverse := range []bool{false, true} {
			sign := 1.0
			if inverse {
				sign = -1
			}
			want := refRoPE(x, cos, sin, s, sign)
			out := zeros(t, n)
			dev.RoPE(out, buf(x), C, S, s, inverse)
			// Two products and a sum per output, inputs of magnitude <= 1:
			// within 3u of |l|+|r|.
			checkClose(t, fmt.Sprintf("%s inverse=%v", name, inverse), host(out), want, 0, 3*u32*2)
			in := buf(x)
			dev.RoPE(in, in, C, S, s, inverse)
			checkEqual(t, name+" in place", host(in), host(out))
		}
		// The inverse undoes the forward (to rounding) ...
		y := buf(x)
		dev.RoPE(y, y, C, S, s, false)
		dev.RoPE(y, y, C, S, s, true)
		checkClose(t, name+" inverse(forward(x))", host(y), f64(x), 0, 8*u32)
		// ... and is the forward's transpose, so it is the backward pass:
		// <RoPE(x), g> = <x, RoPE^-1(g)>.
		g := randSlice(r, n, 1)
		fx, ig := buf(x), buf(g)
		dev.RoPE(fx, fx, C, S, s, false)
		dev.RoPE(ig, ig, C, S, s, true)
		lhs, rhs := dot(host(fx), f64(g)), dot(host(ig), f64(x))
		if math.Abs(lhs-rhs) > 1e-5*float64(n) {
			t.Errorf("%s: <RoPE(x),g> = %v, <x,RoPE^-1(g)> = %v", name, lhs, rhs)
		}
	}
}

// silu64 is a*sigmoid(a) in float64.
func silu64(a float64) float64 { return a / (1 + math.Exp(-a)) }

func TestSwiGLU(t *testing.T) {
	for _, n := range []int{1, 7, 1000, 40001} {
		r := newRand(uint64(n) + 77)
		a, b, dout := randSlice(r, n, 4), randSlice(r, n, 2), randSlice(r, n, 1)
		// Saturated gates must neither overflow nor produce NaN.
		extreme := []float32{-100, 100, -1000, 1000, 0, -20}
		for i := 0; i < len(extreme) && i < n; i++ {
			a[i] = extreme[i]
		}
		out := zeros(t, n)
		dev.SwiGLU(out, buf(a), buf(b))
		want := make([]float64, n)
		wantDa, wantDb := make([]float64, n), make([]float64, n)
		for i := range want {
			av, bv, g := float64(a[i]), float64(b[i]), float64(dout[i])
			want[i] = silu64(av) * bv
			sig := 1 / (1 + math.Exp(-av))
			wantDa[i] = g * bv * (sig + av*sig*(1-sig))
			wantDb[i] = g * silu64(av)
		}
		// exp in float64 rounded to float32, then a handful of float32
		// operations: within 8u relative, plus an absolute 8u of the
		// operand scale for values that cancel near a = 0.
		checkClose(t, fmt.Sprintf("SwiGLU n=%d", n), host(out), want, 8*u32, 8*u32)
		da, db := buf(randSlice(r, n, 1)), buf(randSlice(r, n, 1))
		dev.SwiGLUBackward(da, db, buf(dout), buf(a), buf(b))
		checkClose(t, fmt.Sprintf("SwiGLU da n=%d", n), host(da), wantDa, 16*u32, 16*u32)
		checkClose(t, fmt.Sprintf("SwiGLU db n=%d", n), host(db), wantDb, 8*u32, 8*u32)
	}
	// The analytic derivatives above agree with finite differences of the
	// float64 forward, so the reference itself is right.
	a, b, g := []float64{-3, -0.5, 0, 0.7, 2.5}, []float64{1.5, -2, 0.3, 1, -0.4}, []float32{1, -1, 0.5, 2, 1}
	ab := append(append([]float64{}, a...), b...)
	fd := fdGrad(ab, func(x []float64) float64 {
		var s float64
		for i := range a {
			s += float64(g[i]) * silu64(x[i]) * x[len(a)+i]
		}
		return s
	})
	A32, B32 := make([]float32, len(a)), make([]float32, len(b))
	for i := range a {
		A32[i], B32[i] = float32(a[i]), float32(b[i])
	}
	da, db := zeros(t, len(a)), zeros(t, len(a))
	dev.SwiGLUBackward(da, db, buf(g), buf(A32), buf(B32))
	checkClose(t, "SwiGLU da vs finite differences", host(da), fd[:len(a)], 1e-6, 1e-6)
	checkClose(t, "SwiGLU db vs finite differences", host(db), fd[len(a):], 1e-6, 1e-6)
}

// TestRMSNormGainMatchesUnfused: the fused RMSNorm with a gain gives, bit
// for bit, what RMSNorm followed by a broadcast Mul gives and, backward,
// what Mul's gradient (dy gain) through RMSNormBackward gives: the
// paths a Llama step took before the fusion. The gain's gradient, summed
// in float64 from float64 products, is within float32 rounding of the sum
// of float32 products it replaced.
func TestRMSNormGainMatchesUnfused(t *testing.T) {
	for _, cols := range []int{7, 64, 135} {
		t.Run(fmt.Sprint(cols), func(t *testing.T) {
			const rows = 9
			r := newRand(uint64(cols))
			x, gain, dy := randSlice(r, rows*cols, 2), randSlice(r, cols, 1.5), randSlice(r, rows*cols, 1)
			xb, gb, dyb := buf(x), buf(gain), buf(dy)
			out, rstd, dx, dgain := buf(make([]float32, rows*cols)), buf(make([]float32, rows)), buf(make([]float32, rows*cols)), buf(make([]float32, cols))
			dev.RMSNormGain(out, rstd, xb, gb, rows, cols, 1e-6)
			dev.RMSNormGainBackward(dx, dgain, dyb, xb, rstd, gb, rows, cols)

			want, wantRstd := buf(make([]float32, rows*cols)), buf(make([]float32, rows))
			dev.RMSNorm(want, wantRstd, xb, rows, cols, 1e-6)
			y := append([]float32(nil), cpu.Float32s(want)...)
			dims := device.DimsOf(rows, cols)
			gainRows := device.View{Buf: gb, Layout: device.Layout{Strides: [device.MaxDims]int{0, 1}}}
			dev.BinaryStrided(device.Mul, dims, want, device.Contiguous(want, dims), gainRows)
			g1 := buf(make([]float32, rows*cols))
			dev.BinaryStrided(device.Mul, dims, g1, device.Contiguous(dyb, dims), gainRows)
			wantDx := buf(make([]float32, rows*cols))
			dev.RMSNormBackward(wantDx, g1, xb, wantRstd, rows, cols)
			for _, c := range []struct {
				what      string
				got, want device.Buffer
			}{{"out", out, want}, {"rstd", rstd, wantRstd}, {"dx", dx, wantDx}} {
				for i, v := range cpu.Float32s(c.got) {
					if w := cpu.Float32s(c.want)[i]; math.Float32bits(v) != math.Float32bits(w) {
						t.Fatalf("%s[%d] = %v, unfused %v", c.what, i, v, w)
					}
				}
			}
			for j, v := range cpu.Float32s(dgain) {
				var sum, abs float64
				for i := range rows {
					p := float64(dy[i*cols+j] * y[i*cols+j])
					sum, abs = sum+p, abs+math.Abs(p)
				}
				if math.Abs(float64(v)-sum) > 2e-7*abs {
					t.Fatalf("dgain[%d] = %v, the unfused sum %v", j, v, sum)
				}
			}
		})
	}
}
