package devicetest

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/hilbert-ml/hilbert/device"
)

// copyStrided checks permutes, transposes, slices, concatenation,
// broadcast materialisation, flips, empty and rank-0 copies. Every copy
// writes into a destination pre-filled with a sentinel, and the whole
// destination is compared (no stray writes).
func (h *harness) copyStrided(t *testing.T) {
	const sentinel = 7777
	type cpCase struct {
		name     string
		dims     device.Dims
		src      operand
		dstLen   int
		dstPlace device.Layout
	}
	var cases []cpCase
	add := func(name string, dims device.Dims, src operand, dstLen int, dst device.Layout) {
		cases = append(cases, cpCase{name, dims, src, dstLen, dst})
	}
	contiguous := func(name string, dims device.Dims, src operand) {
		add(name, dims, src, dims.Numel(), dims.RowMajor())
	}
	// Permutes of a [2 3 4] array (read permuted, written contiguous).
	base := randoms(1, 24, 1)
	baseStrides := [3]int{12, 4, 1}
	for _, perm := range [][3]int{{0, 2, 1}, {2, 1, 0}, {1, 0, 2}, {2, 0, 1}} {
		full := [3]int{2, 3, 4}
		var l device.Layout
		shape := make([]int, 3)
		for i, p := range perm {
			shape[i] = full[p]
			l.Strides[i] = baseStrides[p]
		}
		contiguous(fmt.Sprintf("permute %v", perm), device.DimsOf(shape...), operand{storage: base, layout: l})
	}
	contiguous("transpose 2-D", device.DimsOf(5, 3), transposedOperand(randoms(2, 15, 1), device.DimsOf(5, 3)))
	contiguous("transpose 6-D", device.DimsOf(2, 1, 3, 2, 2, 3), transposedOperand(randoms(3, 72, 1), device.DimsOf(2, 1, 3, 2, 2, 3)))
	// Slice rows 1..3 and columns 2..4 of a [5 6] array.
	contiguous("slice", device.DimsOf(3, 3), operand{storage: randoms(4, 30, 1), layout: device.Layout{Offset: 8, Strides: [device.MaxDims]int{6, 1}}})
	contiguous("broadcast row", device.DimsOf(3, 4), contiguousOperand(randoms(5, 4, 1), []int{4}, device.DimsOf(3, 4)))
	contiguous("broadcast column", device.DimsOf(3, 4), contiguousOperand(randoms(6, 3, 1), []int{3, 1}, device.DimsOf(3, 4)))
	contiguous("broadcast scalar", device.DimsOf(2, 3, 2), contiguousOperand(randoms(7, 1, 1), nil, device.DimsOf(2, 3, 2)))
	contiguous("flip", device.DimsOf(4, 5), flippedOperand(randoms(8, 20, 1), device.DimsOf(4, 5)))
	contiguous("rank 0", device.DimsOf(), operand{storage: []float64{3, 4.5}, layout: device.Layout{Offset: 1}})
	contiguous("empty", device.DimsOf(3, 0, 2), operand{storage: []float64{1}})
	contiguous("specials", device.DimsOf(len(specials)), operand{storage: specials, layout: device.DimsOf(len(specials)).RowMajor()})
	r, c := large(513, 67), large(1031, 45)
	contiguous("large transpose", device.DimsOf(r, c), transposedOperand(randoms(9, r*c, 1), device.DimsOf(r, c)))
	n := large(1<<20+3, 4099)
	contiguous("large contiguous", device.DimsOf(n), operand{storage: randoms(10, n, 1), layout: device.DimsOf(n).RowMajor()})
	// Concatenation of [3 4] and [3 3] into the columns of a [3 7] array.
	add("concat left", device.DimsOf(3, 4), contiguousOperand(randoms(11, 12, 1), []int{3, 4}, device.DimsOf(3, 4)),
		21, device.Layout{Strides: [device.MaxDims]int{7, 1}})
	add("concat right", device.DimsOf(3, 3), contiguousOperand(randoms(12, 9, 1), []int{3, 3}, device.DimsOf(3, 3)),
		21, device.Layout{Offset: 4, Strides: [device.MaxDims]int{7, 1}})
	// A strided destination: the transpose written through dst's strides.
	add("scatter transpose", device.DimsOf(4, 6), contiguousOperand(randoms(13, 24, 1), []int{4, 6}, device.DimsOf(4, 6)),
		24, device.Layout{Strides: [device.MaxDims]int{1, 4}})
	add("dst offset and flip", device.DimsOf(5), contiguousOperand(randoms(14, 5, 1), []int{5}, device.DimsOf(5)),
		9, device.Layout{Offset: 6, Strides: [device.MaxDims]int{-1}})

	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want := slices.Repeat([]float64{sentinel}, c.dstLen)
			for i := range c.dims.Numel() {
				want[offsetAt(c.dims, c.dstPlace, i)] = h.round(c.src.at(c.dims, i))
			}
			dst := h.upload(t, slices.Repeat([]float64{sentinel}, c.dstLen))
			h.dev.CopyStrided(c.dims, device.View{Buf: dst, Layout: c.dstPlace}, h.view(t, c.src))
			compare(t, "CopyStrided "+c.name, h.download(t, dst), want, exact)
		})
	}
}

// unaryRefs is each UnaryOp in float64.
var unaryRefs = map[device.UnaryOp]func(float64) float64{
	device.Neg:        func(x float64) float64 { return -x },
	device.Abs:        math.Abs,
	device.Exp:        math.Exp,
	device.Log:        math.Log,
	device.Sqrt:       math.Sqrt,
	device.Rsqrt:      func(x float64) float64 { return 1 / math.Sqrt(x) },
	device.Reciprocal: func(x float64) float64 { return 1 / x },
	device.Tanh:       math.Tanh,
	device.Erf:        math.Erf,
	device.Sigmoid:    func(x float64) float64 { return 1 / (1 + math.Exp(-x)) },
	device.Relu:       func(x float64) float64 { return max(x, 0) },
	device.Sin:        math.Sin,
	device.Cos:        math.Cos,
	device.Square:     func(x float64) float64 { return x * x },
	device.Sign: func(x float64) float64 {
		switch {
		case x > 0:
			return 1
		case x < 0:
			return -1
		}
		return x
	},
	device.Log1p:    math.Log1p,
	device.Expm1:    math.Expm1,
	device.Softplus: func(x float64) float64 { return max(x, 0) + math.Log1p(math.Exp(-math.Abs(x))) },
}

// unaryRef is op in float64.
func unaryRef(op device.UnaryOp, x float64) float64 {
	ref, ok := unaryRefs[op]
	if !ok {
		panic(fmt.Sprintf("devicetest: no reference for %v", op))
	}
	return ref(x)
}

// unaryExact lists the ops whose float32 result is exactly rounded.
func unaryExact(op device.UnaryOp) bool {
	switch op {
	case device.Neg, device.Abs, device.Sqrt, device.Reciprocal, device.Relu, device.Square, device.Sign:
		return true
	}
	return false
}

func (h *harness) unary(t *testing.T) {
	inputs := map[string][]float64{
		"specials": specials,
		"empty":    {},
		"one":      {0.75},
		"ragged":   randoms(20, 1001, 3),
		"large":    randoms(21, large(1<<20+3, 5003), 2),
	}
	for _, op := range device.UnaryOps() {
		for name, x := range inputs {
			if name == "large" && !unaryExact(op) && op != device.Exp && op != device.Tanh {
				continue // one large transcendental pair is enough
			}
			xr := h.roundAll(x)
			want := make([]float64, len(x))
			for i, v := range xr {
				want[i] = h.round(unaryRef(op, v))
			}
			c := h.approx()
			if unaryExact(op) {
				c = exact
			}
			src := h.upload(t, xr)
			dst := h.alloc(t, h.dt, len(x))
			h.dev.Unary(op, dst, src)
			compare(t, fmt.Sprintf("%v %s", op, name), h.download(t, dst), want, c)
			if name == "ragged" { // in place
				h.dev.Unary(op, src, src)
				compare(t, fmt.Sprintf("%v %s in place", op, name), h.download(t, src), want, c)
			}
		}
	}
}

// binaryRef is each BinaryOp in float64.
func binaryRef(op device.BinaryOp, x, y float64) float64 {
	b := func(c bool) float64 {
		if c {
			return 1
		}
		return 0
	}
	switch op {
	case device.Add:
		return x + y
	case device.Sub:
		return x - y
	case device.Mul:
		return x * y
	case device.Div:
		return x / y
	case device.Maximum:
		return max(x, y)
	case device.Minimum:
		return min(x, y)
	case device.Pow:
		return math.Pow(x, y)
	case device.Eq:
		return b(x == y)
	case device.Ne:
		return b(x != y)
	case device.Lt:
		return b(x < y)
	case device.Le:
		return b(x <= y)
	case device.Gt:
		return b(x > y)
	case device.Ge:
		return b(x >= y)
	}
	panic(fmt.Sprintf("devicetest: no reference for %v", op))
}

// binaryCase is a pair of operands over dims.
type binaryCase struct {
	name string
	dims device.Dims
	a, b operand
}

// binaryCases are the broadcast and stride patterns every binary op and
// Where are checked on.
func binaryCases(seed uint64) []binaryCase {
	var cs []binaryCase
	bc := func(as, bs []int) {
		out, ok := device.BroadcastShapes(as, bs)
		if !ok {
			panic("devicetest: bad broadcast case")
		}
		dims := device.DimsOf(out...)
		na, nb := device.DimsOf(as...).Numel(), device.DimsOf(bs...).Numel()
		seed++
		cs = append(cs, binaryCase{fmt.Sprintf("%v op %v", as, bs), dims,
			contiguousOperand(randoms(seed, na, 2), as, dims), contiguousOperand(randoms(seed+1000, nb, 2), bs, dims)})
	}
	bc([]int{7}, []int{7})
	bc(nil, []int{5})
	bc([]int{5}, nil)
	bc(nil, nil)
	bc([]int{3, 4}, []int{4})
	bc([]int{3, 4}, []int{3, 1})
	bc([]int{3, 1}, []int{1, 4})
	bc([]int{2, 3, 4}, []int{3, 1})
	bc([]int{2, 1, 4, 1}, []int{3, 1, 5})
	bc([]int{0, 3}, []int{3})
	bc([]int{3, 0}, []int{1})
	bc([]int{2, 1, 3, 1, 2, 2}, []int{1, 2, 1, 3, 1, 2})
	bc([]int{large(257, 33), large(129, 17)}, []int{large(129, 17)})
	bc([]int{large(1<<20+3, 4099)}, []int{large(1<<20+3, 4099)})
	d := device.DimsOf(6, 5)
	cs = append(cs,
		binaryCase{"transposed op contiguous", d, transposedOperand(randoms(seed+1, 30, 2), d), contiguousOperand(randoms(seed+2, 30, 2), []int{6, 5}, d)},
		binaryCase{"flipped op transposed", d, flippedOperand(randoms(seed+3, 30, 2), d), transposedOperand(randoms(seed+4, 30, 2), d)},
		binaryCase{"offset slice op broadcast column", d,
			operand{storage: randoms(seed+5, 70, 2), layout: device.Layout{Offset: 9, Strides: [device.MaxDims]int{10, 1}}},
			contiguousOperand(randoms(seed+6, 6, 2), []int{6, 1}, d)})
	return cs
}

func (h *harness) binary(t *testing.T) {
	for _, op := range device.BinaryOps() {
		for _, c := range binaryCases(uint64(op) * 100) {
			c.a.storage, c.b.storage = h.roundAll(c.a.storage), h.roundAll(c.b.storage)
			if op == device.Pow {
				for i, v := range c.a.storage {
					c.a.storage[i] = math.Abs(v) // real results
				}
			}
			if op.IsComparison() {
				// Ties: quantise both operands so that equal pairs occur.
				for _, s := range [][]float64{c.a.storage, c.b.storage} {
					for i, v := range s {
						s[i] = math.Round(v)
					}
				}
			}
			h.checkBinary(t, fmt.Sprintf("%v %s", op, c.name), op, c.dims, c.a, c.b)
		}
	}
	// In place: a += b with b broadcast, dst aliasing a.
	dims := device.DimsOf(4, 9)
	a := h.roundAll(randoms(5, 36, 1))
	b := h.roundAll(randoms(6, 9, 1))
	ab := h.upload(t, a)
	bb := h.upload(t, b)
	want := make([]float64, 36)
	for i := range want {
		want[i] = h.round(a[i] + b[i%9])
	}
	bv, _ := device.Broadcast(bb, []int{9}, dims)
	h.dev.BinaryStrided(device.Add, dims, ab, device.Contiguous(ab, dims), bv)
	compare(t, "add in place", h.download(t, ab), want, exact)
}

// binarySpecials runs every op on all pairs of special values (an outer
// product by broadcasting): NaN and Inf propagation, signed zeros, pow's
// special cases.
func (h *harness) binarySpecials(t *testing.T) {
	k := len(specials)
	dims := device.DimsOf(k, k)
	a := contiguousOperand(h.roundAll(specials), []int{k, 1}, dims)
	b := contiguousOperand(h.roundAll(specials), []int{k}, dims)
	for _, op := range device.BinaryOps() {
		h.checkBinary(t, fmt.Sprintf("%v specials", op), op, dims, a, b)
	}
}

// checkBinary runs op over dims on the operands a and b and compares the
// result, as what, with binaryRef's (exact, or within h.approx for Pow).
func (h *harness) checkBinary(t *testing.T, what string, op device.BinaryOp, dims device.Dims, a, b operand) {
	want := make([]float64, dims.Numel())
	for i := range want {
		want[i] = h.round(binaryRef(op, a.at(dims, i), b.at(dims, i)))
	}
	tl := exact
	if op == device.Pow {
		tl = h.approx()
	}
	dst := h.alloc(t, h.dt, len(want))
	h.dev.BinaryStrided(op, dims, dst, h.view(t, a), h.view(t, b))
	compare(t, what, h.download(t, dst), want, tl)
}

func (h *harness) where(t *testing.T) {
	for i, c := range binaryCases(7000) {
		c.a.storage, c.b.storage = h.roundAll(c.a.storage), h.roundAll(c.b.storage)
		// cond: the a operand's layout over a fresh storage of 0, -0, NaN,
		// 1 and -2, so it broadcasts like a.
		cond := operand{storage: make([]float64, len(c.a.storage)), layout: c.a.layout}
		for j := range cond.storage {
			cond.storage[j] = []float64{0, math.Copysign(0, -1), math.NaN(), 1, -2}[(i+j)%5]
		}
		n := c.dims.Numel()
		want := make([]float64, n)
		for j := range want {
			if cv := cond.at(c.dims, j); cv != 0 {
				want[j] = c.a.at(c.dims, j)
			} else {
				want[j] = c.b.at(c.dims, j)
			}
		}
		dst := h.alloc(t, h.dt, n)
		h.dev.Where(c.dims, dst, h.view(t, cond), h.view(t, c.a), h.view(t, c.b))
		compare(t, "Where "+c.name, h.download(t, dst), want, exact)
	}
}
