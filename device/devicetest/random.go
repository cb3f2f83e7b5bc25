package devicetest

import (
	"fmt"
	"math"
	"testing"

	"github.com/hilbert-ml/hilbert/device"
)

// randomCase is one distribution with its parameters, mean and variance.
type randomCase struct {
	dist           device.Distribution
	a, b           float32
	mean, variance float64
}

// randomSeed seeds random's streams.
const randomSeed = 0x1234_5678_9abc_def0

// random checks Random against the definition in package device (bit for
// bit; normals within a few units in the last place), the continuation of
// a stream across calls at an offset, and the moments of each
// distribution.
func (h *harness) random(t *testing.T) {
	n := large(100003, 20011)
	for _, c := range []randomCase{
		{device.Uniform, -1, 3, 1, 16.0 / 12},
		{device.Normal, 0.5, 2, 0.5, 4},
		{device.Bernoulli, 0.3, 0, 0.3, 0.21},
	} {
		t.Run(c.dist.String(), func(t *testing.T) { h.randomStream(t, c, n) })
	}
	// Another seed gives other numbers; an empty fill is a no-op.
	a, b := h.alloc(t, h.dt, 64), h.alloc(t, h.dt, 64)
	h.dev.Random(device.Uniform, a, 1, 0, 0, 1)
	h.dev.Random(device.Uniform, b, 2, 0, 0, 1)
	same := 0
	av, bv := h.download(t, a), h.download(t, b)
	for i := range av {
		if av[i] == bv[i] {
			same++
		}
	}
	if same > 2 {
		t.Errorf("seeds 1 and 2 share %d of 64 uniforms", same)
	}
	h.dev.Random(device.Normal, h.alloc(t, h.dt, 0), randomSeed, 0, 0, 1)
}

// randomStream checks n values of one distribution: against the
// definition, split across two calls, and their moments and range.
func (h *harness) randomStream(t *testing.T, c randomCase, n int) {
	const offset = 13
	want := make([]float64, n)
	if h.dt == device.Float64 {
		device.FillRandom64(want, c.dist, randomSeed, offset, c.a, c.b)
	} else {
		w32 := make([]float32, n)
		device.FillRandom(w32, c.dist, randomSeed, offset, c.a, c.b)
		for i, v := range w32 {
			want[i] = float64(v)
		}
	}
	whole := h.alloc(t, h.dt, n)
	h.dev.Random(c.dist, whole, randomSeed, offset, c.a, c.b)
	got := h.download(t, whole)
	tl := exact
	if c.dist == device.Normal {
		tl = tol{rtol: 2.4e-7, atol: 1e-7}
		if h.dt == device.Float64 {
			tl = tol{rtol: 1e-14, atol: 1e-15}
		}
	}
	compare(t, fmt.Sprintf("%v stream", c.dist), got, want, tl)

	// Two calls continuing the stream at an offset give the same values
	// as one.
	cut := n/3 + 1
	parts := h.alloc(t, h.dt, n)
	h.dev.Random(c.dist, parts.Slice(0, cut), randomSeed, offset, c.a, c.b)
	h.dev.Random(c.dist, parts.Slice(cut, n-cut), randomSeed, offset+uint64(cut), c.a, c.b)
	compare(t, fmt.Sprintf("%v split at %d", c.dist, cut), h.download(t, parts), got, exact)
	checkMoments(t, c, got)
}

// checkMoments checks the mean within 6 standard errors, the variance
// within 5% and every value inside the distribution's range.
func checkMoments(t *testing.T, c randomCase, got []float64) {
	n := len(got)
	var sum, sq float64
	for _, v := range got {
		sum += v
	}
	mean := sum / float64(n)
	for _, v := range got {
		sq += (v - mean) * (v - mean)
	}
	variance := sq / float64(n-1)
	if se := math.Sqrt(c.variance / float64(n)); math.Abs(mean-c.mean) > 6*se {
		t.Errorf("%v: mean %v, want %v (standard error %v)", c.dist, mean, c.mean, se)
	}
	if math.Abs(variance-c.variance) > 0.05*c.variance {
		t.Errorf("%v: variance %v, want %v", c.dist, variance, c.variance)
	}
	for i, v := range got {
		bad := false
		switch c.dist {
		case device.Uniform:
			bad = v < float64(c.a) || v > float64(c.b)
		case device.Bernoulli:
			bad = v != 0 && v != 1
		case device.Normal:
			bad = math.IsNaN(v) || math.IsInf(v, 0)
		}
		if bad {
			t.Fatalf("%v: element %d = %v", c.dist, i, v)
		}
	}
}

// rawDTypes checks that CopyStrided moves Int32 and BFloat16 elements (and
// Float64 where supported) untouched, and GatherAxis Int32 ones.
func rawDTypes(t *testing.T, dev device.Core) {
	h := &harness{dev: dev, dt: device.Float32}
	dims := device.DimsOf(3, 5)
	tr := transposedOperand(nil, dims).layout
	t.Run("int32", func(t *testing.T) {
		src := make([]int32, 15)
		for i := range src {
			src[i] = int32(i*7919) - 50000
		}
		sb, db := h.uploadInt32(t, src), h.alloc(t, device.Int32, 15)
		dev.CopyStrided(dims, device.Contiguous(db, dims), device.View{Buf: sb, Layout: tr})
		got := h.downloadInt32(t, db)
		for i := range 15 {
			if want := src[offsetAt(dims, tr, i)]; got[i] != want {
				t.Fatalf("int32 copy: element %d = %d, want %d", i, got[i], want)
			}
		}
		// Gather of int32 rows.
		ix := h.uploadInt32(t, []int32{2, 0, 2})
		g := h.alloc(t, device.Int32, 15)
		dev.GatherAxis(g, sb, device.View{Buf: ix, Layout: device.Layout{Strides: [device.MaxDims]int{0, 1, 0}}}, 1, 3, 5, 3)
		gv := h.downloadInt32(t, g)
		for j, k := range []int{2, 0, 2} {
			for i := range 5 {
				if gv[j*5+i] != src[k*5+i] {
					t.Fatalf("int32 gather: row %d element %d = %d, want %d", j, i, gv[j*5+i], src[k*5+i])
				}
			}
		}
	})
	t.Run("bfloat16", func(t *testing.T) {
		b, err := dev.Alloc(device.BFloat16, 15)
		if err != nil {
			t.Skipf("no bfloat16 storage: %v", err)
		}
		defer dev.Free(b)
		vals := make([]float32, 15)
		for i := range vals {
			vals[i] = device.Float32FromBFloat16(device.BFloat16FromFloat32(float32(i) - 7.25))
		}
		dev.CopyFromHost(b, vals)
		d := h.alloc(t, device.BFloat16, 15)
		dev.CopyStrided(dims, device.Contiguous(d, dims), device.View{Buf: b, Layout: tr})
		got := h.readF32(t, d)
		for i := range 15 {
			if want := vals[offsetAt(dims, tr, i)]; got[i] != want {
				t.Fatalf("bfloat16 copy: element %d = %v, want %v", i, got[i], want)
			}
		}
	})
}
