package devicetest

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/hilbert-ml/hilbert/device"
)

var reduceOps = []device.ReduceOp{device.Sum, device.SumSquares, device.Max, device.Min, device.ArgMax, device.ArgMin}

// reduceRef reduces x[o, :, c] of an [outer, n, inner] array: the value
// (sums in float64), or the index for the arg ops, and the sum of
// magnitudes that bounds a sum's rounding.
func reduceRef(op device.ReduceOp, x []float64, o, n, inner, c int) (v float64, idx int32, mag float64) {
	idx = -1
	switch op {
	case device.Max:
		v = math.Inf(-1)
	case device.Min:
		v = math.Inf(1)
	}
	for j := range n {
		e := x[(o*n+j)*inner+c]
		switch op {
		case device.Sum:
			v += e
			mag += math.Abs(e)
		case device.SumSquares:
			v += e * e
			mag += e * e
		case device.Max:
			v = max(v, e)
		case device.Min:
			v = min(v, e)
		case device.ArgMax, device.ArgMin:
			if idx < 0 {
				idx, v = 0, e
				continue
			}
			if math.IsNaN(v) {
				continue
			}
			if math.IsNaN(e) || (op == device.ArgMax && e > v) || (op == device.ArgMin && e < v) {
				idx, v = int32(j), e
			}
		}
	}
	return v, idx, mag
}

func (h *harness) reduce(t *testing.T) {
	shapes := [][3]int{
		{1, 1, 1}, {1, 7, 1}, {3, 5, 1}, {5, 20, 1}, {5, 33, 1}, {1, 1000, 1}, {4, 300, 3}, {2, 3, 300},
		{2, 17, 513}, {3, 0, 2}, {0, 5, 3}, {2, 0, 1}, {1, large(100003, 3001), 1}, {large(300, 30), 257, 1},
	}
	for si, s := range shapes {
		outer, n, inner := s[0], s[1], s[2]
		x := h.roundAll(randoms(uint64(40+si), outer*n*inner, 3))
		// Quantised copies give ties for the arg ops; a few NaNs and
		// infinities in the last shapes check propagation.
		q := make([]float64, len(x))
		for i, v := range x {
			q[i] = math.Round(v)
		}
		variants := map[string][]float64{"random": x, "ties": q}
		if len(x) > 40 {
			nan := slices.Clone(x)
			nan[len(nan)/3], nan[len(nan)/2], nan[7] = math.NaN(), math.Inf(1), math.NaN()
			nan[len(nan)-1] = math.Inf(-1)
			variants["nan"] = nan
		}
		for vname, vals := range variants {
			src := h.upload(t, vals)
			for _, op := range reduceOps {
				what := fmt.Sprintf("%v %v %s", op, s, vname)
				arg := op == device.ArgMax || op == device.ArgMin
				out := outer * inner
				want := make([]float64, out)
				wantIdx := make([]int32, out)
				mags := make([]float64, out)
				for o := range outer {
					for c := range inner {
						v, idx, mag := reduceRef(op, vals, o, n, inner, c)
						want[o*inner+c], wantIdx[o*inner+c], mags[o*inner+c] = h.round(v), idx, mag
					}
				}
				if arg {
					dst := h.alloc(t, device.Int32, out)
					h.dev.ReduceAxis(op, dst, src, outer, n, inner)
					got := h.downloadInt32(t, dst)
					for i := range got {
						if got[i] != wantIdx[i] {
							t.Errorf("%s: output %d = %d, want %d", what, i, got[i], wantIdx[i])
							break
						}
					}
					continue
				}
				dst := h.alloc(t, h.dt, out)
				h.dev.ReduceAxis(op, dst, src, outer, n, inner)
				got := h.download(t, dst)
				for i := range got {
					c := exact
					if op == device.Sum || op == device.SumSquares {
						// float64 accumulation rounded once: within a unit
						// in the last place of the magnitude sum.
						eps := 1.2e-7
						if h.dt == device.Float64 {
							eps = 1e-13
						}
						c = tol{atol: eps * (mags[i] + 1e-30)}
					}
					if !agree(got[i], want[i], c) {
						t.Errorf("%s: output %d = %v, want %v", what, i, got[i], want[i])
						break
					}
				}
			}
		}
	}
}

// gatherCase is one indexing pattern: [outer, n, inner] data, m indices
// per (outer, inner) read through an index layout over [outer, m, inner].
type gatherCase struct {
	name                 string
	outer, n, inner, m   int
	idxLayout            device.Layout
	idxLen               int
	repeated, emptyIndex bool
}

func gatherCases() []gatherCase {
	sel := func(s0 int) device.Layout { return device.Layout{Strides: [device.MaxDims]int{s0, 1, 0}} }
	full := func(m, inner int) device.Layout {
		return device.Layout{Strides: [device.MaxDims]int{m * inner, inner, 1}}
	}
	return []gatherCase{
		{name: "embedding", outer: 1, n: 10, inner: 4, m: 6, idxLayout: sel(0), idxLen: 6},
		{name: "index_select middle", outer: 3, n: 7, inner: 5, m: 4, idxLayout: sel(0), idxLen: 4},
		{name: "index_select per outer", outer: 3, n: 7, inner: 5, m: 4, idxLayout: sel(4), idxLen: 12},
		{name: "torch.gather", outer: 3, n: 5, inner: 4, m: 2, idxLayout: full(2, 4), idxLen: 24},
		{name: "torch.gather last axis", outer: 6, n: 9, inner: 1, m: 3, idxLayout: full(3, 1), idxLen: 18},
		{name: "offset indices", outer: 2, n: 8, inner: 3, m: 5, idxLayout: device.Layout{Offset: 3, Strides: [device.MaxDims]int{5, 1, 0}}, idxLen: 13},
		{name: "repeated", outer: 1, n: 4, inner: 7, m: 40, idxLayout: sel(0), idxLen: 40, repeated: true},
		{name: "no indices", outer: 2, n: 4, inner: 3, m: 0, idxLayout: sel(0), idxLen: 0},
		// im2col's shape: one element a row, an index shared by the rows,
		// rows split over workers mid-row.
		{name: "im2col", outer: 40, n: 50, inner: 1, m: large(1000, 100), idxLayout: device.Layout{Offset: 2, Strides: [device.MaxDims]int{0, 1, 0}}, idxLen: large(1000, 100) + 2},
		{name: "large embedding", outer: 1, n: 501, inner: large(256, 16), m: large(2048, 100), idxLayout: sel(0), idxLen: large(2048, 100), repeated: true},
	}
}

// indices returns c's index storage with values in [0, n).
func (c gatherCase) indices(seed uint64) []int32 {
	r := randoms(seed, c.idxLen, 1)
	ix := make([]int32, c.idxLen)
	span := c.n
	if c.repeated {
		span = min(c.n, 3)
	}
	for i, v := range r {
		ix[i] = int32(math.Abs(v)*1e6) % int32(span)
	}
	return ix
}

// index returns the index of element (o, j, i).
func (c gatherCase) index(ix []int32, o, j, i int) int {
	l := c.idxLayout
	return int(ix[l.Offset+o*l.Strides[0]+j*l.Strides[1]+i*l.Strides[2]])
}

func (h *harness) gatherAxis(t *testing.T) {
	for ci, c := range gatherCases() {
		src := h.roundAll(randoms(uint64(60+ci), c.outer*c.n*c.inner, 1))
		ix := c.indices(uint64(80 + ci))
		want := make([]float64, c.outer*c.m*c.inner)
		for o := range c.outer {
			for j := range c.m {
				for i := range c.inner {
					want[(o*c.m+j)*c.inner+i] = src[(o*c.n+c.index(ix, o, j, i))*c.inner+i]
				}
			}
		}
		dst := h.alloc(t, h.dt, len(want))
		h.dev.GatherAxis(dst, h.upload(t, src), device.View{Buf: h.uploadInt32(t, ix), Layout: c.idxLayout}, c.outer, c.n, c.inner, c.m)
		compare(t, "GatherAxis "+c.name, h.download(t, dst), want, exact)
	}
}

func (h *harness) scatterAddAxis(t *testing.T) {
	for ci, c := range gatherCases() {
		init := h.roundAll(randoms(uint64(90+ci), c.outer*c.n*c.inner, 1))
		src := h.roundAll(randoms(uint64(110+ci), c.outer*c.m*c.inner, 1))
		ix := c.indices(uint64(130 + ci))
		want := slices.Clone(init)
		mag := make([]float64, len(init))
		for i, v := range init {
			mag[i] = math.Abs(v)
		}
		for o := range c.outer {
			for j := range c.m {
				for i := range c.inner {
					k := (o*c.n+c.index(ix, o, j, i))*c.inner + i
					v := src[(o*c.m+j)*c.inner+i]
					want[k] += v
					mag[k] += math.Abs(v)
				}
			}
		}
		dst := h.upload(t, init)
		h.dev.ScatterAddAxis(dst, h.upload(t, src), device.View{Buf: h.uploadInt32(t, ix), Layout: c.idxLayout}, c.outer, c.n, c.inner, c.m)
		got := h.download(t, dst)
		// Each addition rounds (in an order the backend picks).
		eps := 2.4e-7
		if h.dt == device.Float64 {
			eps = 1e-15
		}
		for i := range got {
			if !agree(got[i], h.round(want[i]), tol{atol: eps * mag[i]}) {
				t.Errorf("ScatterAddAxis %s: element %d = %v, want %v", c.name, i, got[i], want[i])
				break
			}
		}
	}
}
