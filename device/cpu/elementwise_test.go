package cpu_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/compose"
)

// Sizes for elementwise kernels: empty, tiny, odd, and large enough (above
// twice the parallel grain of 2^14) to split across goroutines unevenly.
var elementSizes = []int{0, 1, 7, 1000, 40001}

// threadCounts are the kernel thread settings the parallel paths are
// checked with; 3 on a 2-core machine gives uneven chunks.
var threadCounts = []int{1, 3}

func TestFill(t *testing.T) {
	for _, n := range elementSizes {
		for _, th := range threadCounts {
			withThreads(th, func() {
				x := buf(randSlice(newRand(1), n, 1))
				dev.Fill(x, -2.5)
				want := make([]float32, n)
				for i := range want {
					want[i] = -2.5
				}
				checkEqual(t, fmt.Sprintf("Fill n=%d threads=%d", n, th), host(x), want)
			})
		}
	}
}

func TestFillFrom(t *testing.T) {
	for _, n := range []int{1, 5, 40001} {
		x := buf(randSlice(newRand(2), n, 1))
		src := buf([]float32{3, 99}) // only src[0] counts
		compose.FillFrom(dev, x, src.Slice(0, 1), -0.5)
		want := make([]float32, n)
		for i := range want {
			want[i] = -1.5
		}
		checkEqual(t, fmt.Sprintf("FillFrom n=%d", n), host(x), want)
	}
}

func TestBinary(t *testing.T) {
	ops := []struct {
		op device.BinaryOp
		f  func(a, b float64) float64
	}{
		{device.Add, func(a, b float64) float64 { return a + b }},
		{device.Sub, func(a, b float64) float64 { return a - b }},
		{device.Mul, func(a, b float64) float64 { return a * b }},
	}
	for _, o := range ops {
		for _, n := range elementSizes {
			for _, alias := range []string{"none", "a", "b"} {
				name := fmt.Sprintf("%v/n=%d/alias=%s", o.op, n, alias)
				r := newRand(uint64(n) + 11)
				a, b := randSlice(r, n, 3), randSlice(r, n, 3)
				A, B := buf(a), buf(b)
				dst := zeros(t, n)
				switch alias {
				case "a":
					dst = A
				case "b":
					dst = B
				}
				dims := device.DimsOf(n)
				dev.BinaryStrided(o.op, dims, dst, device.Contiguous(A, dims), device.Contiguous(B, dims))
				want := make([]float64, n)
				for i := range want {
					want[i] = o.f(float64(a[i]), float64(b[i]))
				}
				// One float32 rounding of the exact result.
				checkClose(t, name, host(dst), want, u32, 0)
			}
		}
	}
}

func TestScale(t *testing.T) {
	for _, n := range elementSizes {
		for _, alias := range []bool{false, true} {
			x := randSlice(newRand(uint64(n)), n, 2)
			X := buf(x)
			dst := zeros(t, n)
			if alias {
				dst = X
			}
			dev.Axpby(dst, X, -1.25, 0)
			want := make([]float64, n)
			for i := range want {
				want[i] = -1.25 * float64(x[i])
			}
			checkClose(t, fmt.Sprintf("Scale n=%d alias=%v", n, alias), host(dst), want, u32, 0)
		}
	}
}

func TestAxpby(t *testing.T) {
	for _, n := range elementSizes {
		for _, ab := range [][2]float32{{2, 1}, {-0.5, 0}, {0.3, 0.7}, {1, -1}} {
			r := newRand(uint64(n) + 5)
			x, d := randSlice(r, n, 1), randSlice(r, n, 1)
			D := buf(d)
			dev.Axpby(D, buf(x), ab[0], ab[1])
			want := make([]float64, n)
			for i := range want {
				want[i] = float64(ab[0])*float64(x[i]) + float64(ab[1])*float64(d[i])
			}
			// Two products and a sum, each rounded: within 3u of the
			// magnitudes involved.
			checkCloseTol(t, fmt.Sprintf("Axpby n=%d alpha=%g beta=%g", n, ab[0], ab[1]), host(D), want, func(i int) float64 {
				return 3 * u32 * (math.Abs(float64(ab[0])*float64(x[i])) + math.Abs(float64(ab[1])*float64(d[i])))
			})
		}
	}
}

// refReduce reduces x (rows x cols) in float64.
func refReduce(op device.ReduceOp, axis int, x []float32, rows, cols int) []float64 {
	n := rows
	if axis == 0 {
		n = cols
	}
	out := make([]float64, n)
	for i := range out {
		if op == device.Max {
			out[i] = math.Inf(-1)
		}
	}
	for r := 0; r < rows; r++ {
		for c := 0; c < cols; c++ {
			v := float64(x[r*cols+c])
			i := r
			if axis == 0 {
				i = c
			}
			switch op {
			case device.Sum:
				out[i] += v
			case device.SumSquares:
				out[i] += v * v
			case device.Max:
				out[i] = math.Max(out[i], v)
			}
		}
	}
	return out
}

func TestReduce(t *testing.T) {
	shapes := [][2]int{{1, 1}, {3, 5}, {5, 3}, {7, 1000}, {100, 401}, {1000, 7}, {1, 300}, {300, 1}}
	for _, op := range []device.ReduceOp{device.Sum, device.SumSquares, device.Max} {
		for _, axis := range []int{0, 1} {
			for _, sh := range shapes {
				for _, th := range threadCounts {
					rows, cols := sh[0], sh[1]
					name := fmt.Sprintf("%v/axis%d/%dx%d/threads=%d", op, axis, rows, cols, th)
					r := newRand(uint64(rows*cols + axis))
					// Values offset to -3..-1 on a third of the inputs, so that
					// a Max initialised to 0 instead of -Inf would be caught.
					x := randSlice(r, rows*cols, 1)
					if rows*cols%3 == 0 || rows == 1 {
						for i := range x {
							x[i] -= 2
						}
					}
					n := rows
					if axis == 0 {
						n = cols
					}
					dst := buf(randSlice(r, n, 100)) // garbage that must be overwritten
					withThreads(th, func() { dev.Reduce(op, axis, dst, buf(x), rows, cols) })
					want := refReduce(op, axis, x, rows, cols)
					// The CPU backend sums in float64 and rounds once; allow
					// a few u of the result's magnitude plus a few u of the
					// sum of magnitudes for cancellation (sums of ~1000
					// values of either sign).
					mag := refReduce(device.SumSquares, axis, x, rows, cols)
					checkCloseTol(t, name, host(dst), want, func(i int) float64 {
						return 2*u32*math.Abs(want[i]) + 4*u32*math.Sqrt(mag[i]*float64(max(rows, cols)))
					})
				}
			}
		}
	}
}

func TestReduceMaxNaN(t *testing.T) {
	nan := float32(math.NaN())
	x := []float32{1, nan, 3, 4, 5, 6}
	for _, axis := range []int{0, 1} {
		n := 2
		if axis == 0 {
			n = 3
		}
		dst := zeros(t, n)
		dev.Reduce(device.Max, axis, dst, buf(x), 2, 3)
		got := host(dst)
		// The NaN at [0,1] must reach row 0 (axis 1) or column 1 (axis 0).
		if !math.IsNaN(float64(got[1-axis])) {
			t.Errorf("Max axis %d = %v: NaN did not propagate", axis, got)
		}
	}
}

func TestRowScale(t *testing.T) {
	for _, sh := range [][2]int{{1, 1}, {3, 7}, {50, 768}, {1, 40000}} {
		for _, alias := range []bool{false, true} {
			rows, cols := sh[0], sh[1]
			x := randSlice(newRand(uint64(cols)), rows*cols, 2)
			clear(x[:cols]) // a zero row: scale alpha/eps, no NaN
			X := buf(x)
			dst := zeros(t, rows*cols)
			if alias {
				dst = X
			}
			alpha, eps := float32(1.5), float32(1e-3)
			dev.RowScale(dst, X, rows, cols, alpha, eps)
			want := make([]float64, rows*cols)
			for r := 0; r < rows; r++ {
				var ss float64
				for _, v := range x[r*cols : (r+1)*cols] {
					ss += float64(v) * float64(v)
				}
				s := float64(alpha) / (math.Sqrt(ss) + float64(eps))
				for c := 0; c < cols; c++ {
					want[r*cols+c] = float64(x[r*cols+c]) * s
				}
			}
			// The scale is computed in float64 and rounded, then one
			// product: within 3u.
			checkClose(t, fmt.Sprintf("RowScale %dx%d alias=%v", rows, cols, alias), host(dst), want, 3*u32, 0)
		}
	}
}

func TestAddRow(t *testing.T) {
	for _, sh := range [][2]int{{1, 1}, {4, 9}, {300, 200}} {
		rows, cols := sh[0], sh[1]
		r := newRand(uint64(rows))
		d, v := randSlice(r, rows*cols, 1), randSlice(r, cols, 1)
		D := buf(d)
		compose.AddRow(dev, D, buf(v), rows, cols, -0.75)
		want := make([]float64, rows*cols)
		for i := range want {
			want[i] = float64(d[i]) - 0.75*float64(v[i%cols])
		}
		checkCloseTol(t, fmt.Sprintf("AddRow %dx%d", rows, cols), host(D), want, func(i int) float64 {
			return 2 * u32 * (math.Abs(float64(d[i])) + math.Abs(0.75*float64(v[i%cols])))
		})
	}
}

func TestGatherScatterAdd(t *testing.T) {
	for _, tc := range []struct {
		tableRows, cols int
		idx             []int32
	}{
		{1, 1, []int32{0}},
		{5, 3, []int32{4, 0, 4, 2, 4}},
		{10, 70, []int32{9, 9, 9, 1, 0, 3, 9, 1}}, // columns > 64: parallel column split
		{50257, 8, []int32{50256, 0, 50256, 13}},
		{7, 4, []int32{}},
	} {
		name := fmt.Sprintf("%dx%d/%d-ids", tc.tableRows, tc.cols, len(tc.idx))
		r := newRand(uint64(tc.tableRows))
		table := randSlice(r, tc.tableRows*tc.cols, 1)
		n := len(tc.idx)
		dst := buf(randSlice(r, n*tc.cols, 9))
		dev.Gather(dst, buf(table), ibuf(t, tc.idx), tc.cols)
		want := make([]float32, n*tc.cols)
		for i, id := range tc.idx {
			copy(want[i*tc.cols:(i+1)*tc.cols], table[int(id)*tc.cols:])
		}
		checkEqual(t, "Gather "+name, host(dst), want)

		// ScatterAdd accumulates into existing contents, repeated ids
		// adding up.
		src := randSlice(r, n*tc.cols, 1)
		base := randSlice(r, tc.tableRows*tc.cols, 1)
		for _, th := range threadCounts {
			acc := buf(base)
			withThreads(th, func() { dev.ScatterAdd(acc, buf(src), ibuf(t, tc.idx), tc.cols) })
			wantAcc := f64(base)
			cnt := make([]int, tc.tableRows)
			for i, id := range tc.idx {
				cnt[id]++
				for c := 0; c < tc.cols; c++ {
					wantAcc[int(id)*tc.cols+c] += float64(src[i*tc.cols+c])
				}
			}
			// Float32 accumulation of up to cnt+1 terms of magnitude <= 1.
			checkCloseTol(t, fmt.Sprintf("ScatterAdd %s threads=%d", name, th), host(acc), wantAcc, func(i int) float64 {
				return float64(cnt[i/tc.cols]+1) * 2 * u32 * float64(cnt[i/tc.cols]+1)
			})
		}
	}
}

// TestAdamWStep runs two steps against a float64 reference. The step output
// excludes weight decay, and the update with a nil step buffer matches.
func TestAdamWStep(t *testing.T) {
	const n = 40001
	r := newRand(42)
	p0 := randSlice(r, n, 1)
	grads := [][]float32{randSlice(r, n, 1), randSlice(r, n, 0.01)}
	grads[0][0], grads[1][0] = 0, 0 // zero gradient: only decay moves p
	const lr32, b132, b232, eps32, wd = float32(1e-2), float32(0.9), float32(0.95), float32(1e-8), 0.1

	P, M, V, S := buf(p0), zeros(t, n), zeros(t, n), zeros(t, n)
	P2, M2, V2 := buf(p0), zeros(t, n), zeros(t, n)
	p, m, v := f64(p0), make([]float64, n), make([]float64, n)
	for step := 1; step <= 2; step++ {
		b1, b2 := float64(b132), float64(b232)
		bc1, bc2 := float32(1-math.Pow(b1, float64(step))), float32(1-math.Pow(b2, float64(step)))
		g := grads[step-1]
		decay := float32(1 - float64(lr32)*wd)
		dev.AdamWStep(P, buf(g), M, V, S, lr32, b132, b232, float32(1-0.9), float32(1-0.95), eps32, decay, bc1, bc2)
		dev.AdamWStep(P2, buf(g), M2, V2, nil, lr32, b132, b232, float32(1-0.9), float32(1-0.95), eps32, decay, bc1, bc2)

		wantStep := make([]float64, n)
		lr, eps := float64(lr32), float64(eps32)
		for i := range p {
			gi := float64(g[i])
			m[i] = b1*m[i] + (1-b1)*gi
			v[i] = b2*v[i] + (1-b2)*gi*gi
			mhat := m[i] / (1 - math.Pow(b1, float64(step)))
			vhat := v[i] / (1 - math.Pow(b2, float64(step)))
			wantStep[i] = -lr * mhat / (math.Sqrt(vhat) + eps)
			p[i] = p[i]*(1-lr*wd) + wantStep[i]
		}
		// Each quantity goes through a handful of float32 roundings
		// (including the bias corrections): a relative 1e-5 on m, v and
		// the step is generous yet far below any formula error (the step
		// is ~lr = 1e-2). p carries the step's error plus its own
		// rounding.
		tag := fmt.Sprintf("step %d ", step)
		checkClose(t, tag+"m", host(M), m, 1e-5, 1e-12)
		checkClose(t, tag+"v", host(V), v, 1e-5, 1e-14)
		checkClose(t, tag+"step", host(S), wantStep, 1e-5, 1e-9)
		checkClose(t, tag+"p", host(P), p, 1e-6, 1e-7)
		checkEqual(t, tag+"p with nil step", host(P2), host(P))
		if got := host(S)[0]; got != 0 {
			t.Errorf("%sstep[0] = %v for a zero gradient: weight decay leaked into the step", tag, got)
		}
	}
}
