package autograd

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/tensor"
)

func f32(t *testing.T, v []float32, shape ...int) *tensor.Tensor {
	t.Helper()
	x, err := tensor.FromFloat32(cpu.New(), v, shape...)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func i32(t *testing.T, v []int32, shape ...int) *tensor.Tensor {
	t.Helper()
	x, err := tensor.FromInt32(cpu.New(), v, shape...)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// deviceIDs returns an int32 tensor written on the device (through its
// buffer, as a kernel would), with no recorded range.
func deviceIDs(t *testing.T, v []int32, shape ...int) *tensor.Tensor {
	t.Helper()
	dev := cpu.New()
	x, err := tensor.NewOf(dev, device.Int32, shape...)
	if err != nil {
		t.Fatal(err)
	}
	dev.CopyInt32FromHost(x.Buffer(), v)
	x.MarkModified()
	if _, _, ok := x.IndexRange(); ok {
		t.Fatal("a tensor written through its buffer has a recorded range")
	}
	return x
}

// TestDeviceIndicesIndex: int32 tensors made on the device index like
// host ones: ArgMaxAxis and ArgMinAxis record their range [0, n), other
// ones are read back and checked once, and a write after a recorded range
// makes it unknown again, so a stale range never admits a bad id.
func TestDeviceIndicesIndex(t *testing.T) {
	x := f32(t, []float32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, 4, 3) // rows r: 3r+1, 3r+2, 3r+3
	scores := f32(t, []float32{0.1, 0.9, 0.3, 0.2, 5, -1, 2, 2, 7, 0, 1, 8}, 3, 4)
	cases := []struct {
		name    string
		ids     func(g *Graph) *tensor.Tensor
		want    []float32 // the rows picked from x
		wantErr []string
	}{
		{"argmax", func(g *Graph) *tensor.Tensor { return g.ArgMaxAxis(scores, 1, false) }, // 1, 0, 3
			[]float32{4, 5, 6, 1, 2, 3, 10, 11, 12}, nil},
		{"argmin", func(g *Graph) *tensor.Tensor { return g.ArgMinAxis(scores, 1, false) }, // 0, 1, 1
			[]float32{1, 2, 3, 4, 5, 6, 4, 5, 6}, nil},
		{"written on the device", func(g *Graph) *tensor.Tensor { return deviceIDs(t, []int32{3, 3, 0}, 3) },
			[]float32{10, 11, 12, 10, 11, 12, 1, 2, 3}, nil},
		{"written on the device, out of range", func(g *Graph) *tensor.Tensor { return deviceIDs(t, []int32{1, 4, 0}, 3) },
			nil, []string{"IndexSelect", "[0, 4]", "[0, 4)"}},
		{"host range made stale by a device write", func(g *Graph) *tensor.Tensor {
			ids := i32(t, []int32{0, 1, 2}, 3)
			cpu.New().CopyInt32FromHost(ids.Buffer(), []int32{0, -2, 2})
			ids.MarkModified()
			return ids
		}, nil, []string{"IndexSelect", "[-2, 2]"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := New(cpu.New())
			defer g.Reset()
			ids := c.ids(g)
			out := g.IndexSelect(x, 0, ids)
			err := g.Err()
			if c.wantErr != nil {
				if err == nil {
					t.Fatalf("no error; got %v", out.Float32s())
				}
				for _, w := range c.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not say %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := out.Float32s()
			for i := range c.want {
				if got[i] != c.want[i] {
					t.Fatalf("rows %v, want %v", got, c.want)
				}
			}
			if lo, hi, ok := ids.IndexRange(); !ok || lo < 0 || hi > 3 {
				t.Errorf("range after use: [%d, %d] known %v", lo, hi, ok)
			}
		})
	}
}

// TestArgMinAxis compares ArgMinAxis and ArgMaxAxis with a host reference
// over each axis: the first extreme wins ties, NaN counts as the smallest
// (argmin) and the largest (argmax).
func TestArgMinAxis(t *testing.T) {
	nan := float32(math.NaN())
	vals := []float32{3, 1, 1, 2, 5, nan, 0, 0, -4, 7, -4, 9, 2, 2, 2, 2, 6, -1, nan, 8, 1, 1, 3, 0}
	shape := []int{2, 3, 4}
	x := f32(t, vals, shape...)
	first := func(n int, at func(int) float32, better func(a, b float32) bool) int32 {
		best := 0
		for j := 1; j < n; j++ {
			if better(at(j), at(best)) {
				best = j
			}
		}
		return int32(best)
	}
	isNaN := func(v float32) bool { return v != v }
	less := func(a, b float32) bool { return !isNaN(b) && (isNaN(a) || a < b) }
	more := func(a, b float32) bool { return !isNaN(b) && (isNaN(a) || a > b) }
	for axis := range 3 {
		for _, c := range []struct {
			name   string
			run    func(g *Graph) *tensor.Tensor
			better func(a, b float32) bool
		}{
			{"ArgMinAxis", func(g *Graph) *tensor.Tensor { return g.ArgMinAxis(x, axis, true) }, less},
			{"ArgMaxAxis", func(g *Graph) *tensor.Tensor { return g.ArgMaxAxis(x, axis-3, false) }, more},
		} {
			g := New(cpu.New())
			got := c.run(g).Int32s()
			outer, n, inner, _, _, _ := axisSplit(tensor.Shape(shape), axis, false)
			for o := range outer {
				for i := range inner {
					want := first(n, func(j int) float32 { return vals[(o*n+j)*inner+i] }, c.better)
					if got[o*inner+i] != want {
						t.Errorf("%s axis %d: element (%d, %d) = %d, want %d", c.name, axis, o, i, got[o*inner+i], want)
					}
				}
			}
			g.Reset()
		}
	}
}

// TestGatherScatterAxis checks GatherAxis and ScatterAddAxis against
// torch.gather and scatter_add written out on the host, on every axis of
// a rank-3 tensor with repeated indices, and their gradients in float64.
func TestGatherScatterAxis(t *testing.T) {
	shape := []int{2, 3, 4}
	for axis := range 3 {
		ishape := append([]int(nil), shape...)
		ishape[axis] = 5 // more indices than the axis: repeats
		n := shape[axis]
		cnt := tensor.Shape(ishape).Numel()
		idxv := make([]int32, cnt)
		for i := range idxv {
			idxv[i] = int32((i*7 + 3) % n)
		}
		idx := i32(t, idxv, ishape...)
		x := input64(t, 400+uint64(axis), shape, 1, 0, 0)
		src := input64(t, 410+uint64(axis), ishape, 1, 0, 0)
		// Host reference.
		xv, sv := x.Float64s(), src.Float64s()
		strides := func(s []int) [3]int { return [3]int{s[1] * s[2], s[2], 1} }
		xs, is := strides(shape), strides(ishape)
		wantG := make([]float64, cnt)
		wantS := append([]float64(nil), xv...)
		for a := range ishape[0] {
			for b := range ishape[1] {
				for c := range ishape[2] {
					pos := [3]int{a, b, c}
					k := a*is[0] + b*is[1] + c*is[2]
					pos[axis] = int(idxv[k])
					at := pos[0]*xs[0] + pos[1]*xs[1] + pos[2]*xs[2]
					wantG[k] = xv[at]
					wantS[at] += sv[k]
				}
			}
		}
		g := New(cpu.New())
		gotG := g.GatherAxis(x, axis, idx).Float64s()
		gotS := g.ScatterAddAxis(x, axis-3, idx, src).Float64s()
		if err := g.Err(); err != nil {
			t.Fatal(err)
		}
		for i := range wantG {
			if gotG[i] != wantG[i] {
				t.Fatalf("GatherAxis axis %d: element %d = %v, want %v", axis, i, gotG[i], wantG[i])
			}
		}
		for i := range wantS {
			if math.Abs(gotS[i]-wantS[i]) > 1e-12 {
				t.Fatalf("ScatterAddAxis axis %d: element %d = %v, want %v", axis, i, gotS[i], wantS[i])
			}
		}
		g.Reset()
		runChecks64(t, []check64{
			{"GatherAxis", func(t *testing.T) []*tensor.Tensor { return []*tensor.Tensor{x} },
				func(g *Graph, in []*tensor.Tensor) *tensor.Tensor { return g.GatherAxis(in[0], axis, idx) }},
			{"ScatterAddAxis", func(t *testing.T) []*tensor.Tensor { return []*tensor.Tensor{x, src} },
				func(g *Graph, in []*tensor.Tensor) *tensor.Tensor {
					return g.Mul(g.ScatterAddAxis(in[0], axis, idx, in[1]), in[0])
				}},
		})
	}
	// Bad operands are refused with errors that name them.
	x := mustTensor(t, 2, 3)
	for _, c := range []struct {
		name string
		run  func(g *Graph)
		want []string
	}{
		{"gather index shape", func(g *Graph) { g.GatherAxis(x, 1, i32(t, []int32{0, 1, 2}, 3, 1)) },
			[]string{"GatherAxis", "[3 1]", "[2 3]"}},
		{"gather index range", func(g *Graph) { g.GatherAxis(x, 0, i32(t, []int32{0, 2, 1}, 1, 3)) },
			[]string{"GatherAxis", "[0, 2]", "[0, 2)"}},
		{"gather float indices", func(g *Graph) { g.GatherAxis(x, 0, mustTensor(t, 1, 3)) },
			[]string{"GatherAxis", "float32", "int32"}},
		{"scatter source shape", func(g *Graph) { g.ScatterAddAxis(x, 1, i32(t, []int32{0, 1}, 2, 1), mustTensor(t, 2, 2)) },
			[]string{"ScatterAddAxis", "[2 2]"}},
		{"scatter axis", func(g *Graph) { g.ScatterAddAxis(x, 2, i32(t, []int32{0, 1}, 2, 1), mustTensor(t, 2, 1)) },
			[]string{"ScatterAddAxis", "axis 2"}},
	} {
		g := New(cpu.New())
		c.run(g)
		err := g.Err()
		if err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not say %q", c.name, err, w)
			}
		}
	}
}

// TestCast: float32 <-> float64 casts round to nearest and widen exactly,
// their gradient is the output's cast back (exactly: a sum weighted by
// float32 values), bfloat16 rounds to nearest even, and casts that cannot
// be differentiated or done are refused (int32 casts: TestCastInt32).
func TestCast(t *testing.T) {
	dev := cpu.New()
	v64 := []float64{1 + 0x1p-24, 1 + 3*0x1p-24, -1e300, 1e-50, math.Pi, math.Inf(-1)}
	x, _ := tensor.FromFloat64(dev, v64, 2, 3)
	x.SetRequiresGrad(true)
	w := f32(t, []float32{0.5, -2, 3, 1, 0.25, 0}, 2, 3)
	g := New(dev)
	y := g.Cast(x, device.Float32)
	if y.DType() != device.Float32 {
		t.Fatalf("Cast gave %v", y.DType())
	}
	for i, v := range y.Float32s() {
		if want := float32(v64[i]); v != want && !(math.IsNaN(float64(v)) && math.IsNaN(float64(want))) {
			t.Errorf("Cast to float32: element %d = %v, want %v", i, v, want)
		}
	}
	// L = sum(where(mask, float32(x), 0) * w * mask): the mask drops the
	// elements that are infinite in float32, so that L is finite.
	mask := f32(t, []float32{1, 1, 0, 1, 1, 0}, 2, 3)
	loss := g.Sum(g.Mul(g.Mul(g.Where(mask, y, g.Constant(0, device.Float32)), w), mask))
	if err := g.Backward(loss); err != nil {
		t.Fatal(err)
	}
	grad := x.Grad().Float64s()
	wv, mv := w.Float32s(), mask.Float32s()
	for i := range grad {
		if want := float64(wv[i] * mv[i] * mv[i]); grad[i] != want {
			t.Errorf("gradient element %d = %v, want %v", i, grad[i], want)
		}
	}
	g.Reset()
	// float32 -> float64 widens exactly, and back is the identity.
	src := f32(t, []float32{1.5, -0.1, 3e38, float32(math.Copysign(0, -1))}, 4)
	wide := g.Cast(src, device.Float64).Float64s()
	for i, v := range src.Float32s() {
		if wide[i] != float64(v) || math.Signbit(wide[i]) != math.Signbit(float64(v)) {
			t.Errorf("Cast to float64: element %d = %v, want %v", i, wide[i], v)
		}
	}
	// bfloat16 storage: round to nearest even, and back.
	ties := f32(t, []float32{math.Float32frombits(0x3f808000), math.Float32frombits(0x3f818000), 1.00390625 + 1e-6}, 3)
	back := g.Cast(g.Cast(ties, device.BFloat16), device.Float32).Float32s()
	for i, want := range []uint32{0x3f800000, 0x3f820000, 0x3f810000} {
		if math.Float32bits(back[i]) != want {
			t.Errorf("bfloat16 round trip: element %d = %#08x, want %#08x", i, math.Float32bits(back[i]), want)
		}
	}
	if err := g.Err(); err != nil {
		t.Fatal(err)
	}
	g.Reset()
	for _, c := range []struct {
		name string
		run  func(g *Graph)
		want []string
	}{
		{"unknown dtype", func(g *Graph) { g.Cast(i32(t, []int32{1}, 1), device.DType(99)) }, []string{"Cast", "int32"}},
		{"bfloat16 with grad", func(g *Graph) { g.Cast(x, device.BFloat16) }, []string{"Cast", "bfloat16", "requires grad"}},
	} {
		g := New(dev)
		c.run(g)
		if err := g.Err(); err == nil {
			t.Errorf("%s: no error", c.name)
		} else {
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%s: error %q does not say %q", c.name, err, w)
				}
			}
		}
	}
}

// TestCastInt32: a float tensor that requires grad cast to int32 (toward
// zero, saturated, NaN 0) indexes IndexSelect, whose gradient reaches the
// table but not the cast's source; an int32 -> int32 cast keeps the index
// range; ArgMaxAxis cast to float32 feeds arithmetic with no gradient
// path through it; int32 -> float32 / float64 round to nearest even /
// exactly.
func TestCastInt32(t *testing.T) {
	dev := cpu.New()
	// float -> int32 -> IndexSelect.
	table := f32(t, []float32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, 4, 3)
	table.SetRequiresGrad(true)
	pos := f32(t, []float32{3.9, 0.2, 2.5, float32(math.Copysign(0, -1)), 1.99}, 5)
	pos.SetRequiresGrad(true)
	g := New(dev)
	ids := g.Cast(pos, device.Int32)
	if ids == nil || ids.DType() != device.Int32 || ids.RequiresGrad() {
		t.Fatalf("Cast to int32: %v (err %v)", ids, g.Err())
	}
	wantIDs := []int32{3, 0, 2, 0, 1}
	if got := ids.Int32s(); !slices.Equal(got, wantIDs) {
		t.Fatalf("Cast to int32 = %v, want %v", got, wantIDs)
	}
	if _, _, ok := ids.IndexRange(); ok {
		t.Errorf("a cast from float32 records an index range; it cannot know one without a read back")
	}
	rows := g.IndexSelect(table, 0, ids)
	if lo, hi, ok := ids.IndexRange(); !ok || lo != 0 || hi != 3 {
		t.Errorf("IndexSelect read back the range [%d, %d] (%v), want [0, 3]", lo, hi, ok)
	}
	wv := []float32{1, -1, 2, 0.5, 3, -2, 4, 1, 0, -3, 0.25, 5, 2, 2, -1}
	w := f32(t, wv, 5, 3)
	loss := g.Sum(g.Mul(rows, w))
	tv := table.Float32s()
	var wantLoss float64
	for i, id := range wantIDs {
		for j := 0; j < 3; j++ {
			wantLoss += float64(tv[int(id)*3+j]) * float64(wv[i*3+j])
		}
	}
	if got := float64(loss.Float32s()[0]); got != wantLoss {
		t.Errorf("loss = %v, want %v", got, wantLoss)
	}
	if err := g.Backward(loss); err != nil {
		t.Fatal(err)
	}
	wantGrad := make([]float64, 12)
	for i, id := range wantIDs {
		for j := 0; j < 3; j++ {
			wantGrad[int(id)*3+j] += float64(wv[i*3+j])
		}
	}
	for i, v := range table.Grad().Float32s() {
		if float64(v) != wantGrad[i] {
			t.Errorf("table gradient element %d = %v, want %v", i, v, wantGrad[i])
		}
	}
	if pos.Grad() != nil {
		t.Errorf("the float source of an int32 cast has a gradient %v; the cast has no gradient path", pos.Grad().Float32s())
	}
	// Saturation and NaN, and an id out of range after the cast.
	g = New(dev)
	sat := g.Cast(f32(t, []float32{-2.7, 3e9, -3e9, float32(math.NaN()), float32(math.Inf(1))}, 5), device.Int32).Int32s()
	if want := []int32{-2, math.MaxInt32, math.MinInt32, 0, math.MaxInt32}; !slices.Equal(sat, want) {
		t.Errorf("saturating Cast = %v, want %v", sat, want)
	}
	g.IndexSelect(table, 0, g.Cast(f32(t, []float32{1, 4.5}, 2), device.Int32))
	if err := g.Err(); err == nil || !strings.Contains(err.Error(), "[1, 4] outside [0, 4)") {
		t.Errorf("IndexSelect of a cast id 4 into 4 rows: %v", err)
	}
	// int32 -> int32 keeps the range; int32 -> float rounds once.
	g = New(dev)
	src := i32(t, []int32{16777217, -5, 16777219, 1<<24 + 1<<16 + 1}, 4)
	same := g.Cast(src, device.Int32)
	if lo, hi, ok := same.IndexRange(); !ok || lo != -5 || hi != 1<<24+1<<16+1 {
		t.Errorf("int32 -> int32 Cast range [%d, %d] (%v), want the source's", lo, hi, ok)
	}
	if got, want := g.Cast(src, device.Float32).Float32s(), []float32{16777216, -5, 16777220, 1<<24 + 1<<16}; !slices.Equal(got, want) {
		t.Errorf("int32 -> float32 = %v, want %v", got, want)
	}
	if got, want := g.Cast(src, device.Float64).Float64s(), []float64{16777217, -5, 16777219, 1<<24 + 1<<16 + 1}; !slices.Equal(got, want) {
		t.Errorf("int32 -> float64 = %v, want %v", got, want)
	}
	if got, want := g.Cast(g.Cast(src, device.BFloat16), device.Float32).Float32s(), []float32{16777216, -5, 16777216, 1<<24 + 1<<17}; !slices.Equal(got, want) {
		t.Errorf("int32 -> bfloat16 = %v, want %v", got, want)
	}
	// ArgMaxAxis -> Cast to float32 -> arithmetic: loss = sum(2*float(argmax)
	// + 1) + sum(x*x); only the second term reaches x.
	xv := []float32{0.5, 3, -1, 2, 7, 1, 1, 6, -4, -2, -3, -1}
	x := f32(t, xv, 3, 4)
	x.SetRequiresGrad(true)
	g = New(dev)
	am := g.ArgMaxAxis(x, 1, false)
	pos32 := g.Cast(am, device.Float32)
	if pos32.RequiresGrad() {
		t.Fatalf("a float32 cast of ArgMaxAxis requires grad")
	}
	lin := g.Add(g.Scale(pos32, 2), g.Constant(1, device.Float32))
	if got, want := lin.Float32s(), []float32{3, 1, 7}; !slices.Equal(got, want) {
		t.Errorf("2*argmax+1 = %v, want %v", got, want)
	}
	loss = g.Add(g.Sum(lin), g.Sum(g.Mul(x, x)))
	var sq float64
	for _, v := range xv {
		sq += float64(v) * float64(v)
	}
	if got := float64(loss.Float32s()[0]); got != 11+sq {
		t.Errorf("loss = %v, want %v", got, 11+sq)
	}
	if err := g.Backward(loss); err != nil {
		t.Fatal(err)
	}
	for i, v := range x.Grad().Float32s() {
		if v != 2*xv[i] {
			t.Errorf("x gradient element %d = %v, want %v", i, v, 2*xv[i])
		}
	}
}

// TestRandomFills: Uniform, Normal and Bernoulli give the Philox stream
// of their seed from their offset (so a tensor drawn at offset 5 is the
// tail of one drawn at 0), in their ranges and with their moments.
func TestRandomFills(t *testing.T) {
	dev := cpu.New()
	g := New(dev)
	defer g.Reset()
	const seed = 0x5eed
	for _, c := range []struct {
		name string
		draw func(dt device.DType, offset uint64, n int) *tensor.Tensor
		dist device.Distribution
		a, b float32
	}{
		{"Uniform", func(dt device.DType, off uint64, n int) *tensor.Tensor { return g.Uniform(dt, seed, off, -2, 3, n) }, device.Uniform, -2, 3},
		{"Normal", func(dt device.DType, off uint64, n int) *tensor.Tensor { return g.Normal(dt, seed, off, 1, 0.5, n) }, device.Normal, 1, 0.5},
		{"Bernoulli", func(dt device.DType, off uint64, n int) *tensor.Tensor { return g.Bernoulli(dt, seed, off, 0.3, n) }, device.Bernoulli, 0.3, 0},
	} {
		for _, dt := range []device.DType{device.Float32, device.Float64} {
			whole := c.draw(dt, 0, 15).Float64s()
			tail := c.draw(dt, 5, 10).Float64s()
			for i := range tail {
				if tail[i] != whole[5+i] {
					t.Fatalf("%s %v: offset 5 element %d = %v, offset 0 element %d = %v", c.name, dt, i, tail[i], 5+i, whole[5+i])
				}
			}
			// The core's Random on a buffer of its own gives the same values.
			buf, _ := dev.Alloc(dt, 15)
			dev.Random(c.dist, buf, seed, 0, c.a, c.b)
			direct := make([]float64, 15)
			dev.CopyFloat64ToHost(direct, buf)
			for i := range direct {
				if direct[i] != whole[i] {
					t.Fatalf("%s %v: element %d = %v, device Random %v", c.name, dt, i, whole[i], direct[i])
				}
			}
		}
		const n = 1 << 16
		v := c.draw(device.Float32, 100, n).Float64s()
		var sum, sq float64
		for _, x := range v {
			sum += x
			sq += x * x
		}
		mean := sum / n
		variance := sq/n - mean*mean
		var wantMean, wantVar float64
		switch c.dist {
		case device.Uniform:
			wantMean, wantVar = 0.5, 25.0/12
			for _, x := range v {
				if x < -2 || x > 3 {
					t.Fatalf("Uniform value %v outside [-2, 3]", x)
				}
			}
		case device.Normal:
			wantMean, wantVar = 1, 0.25
		case device.Bernoulli:
			wantMean, wantVar = 0.3, 0.21
			for _, x := range v {
				if x != 0 && x != 1 {
					t.Fatalf("Bernoulli value %v", x)
				}
			}
		}
		// Five standard errors of the mean; 5% on the variance.
		if se := math.Sqrt(wantVar / n); math.Abs(mean-wantMean) > 5*se || math.Abs(variance-wantVar) > 0.05*wantVar {
			t.Errorf("%s: mean %.4f variance %.4f, want %.4f and %.4f", c.name, mean, variance, wantMean, wantVar)
		}
	}
	if err := g.Err(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		run  func(g *Graph)
		want string
	}{
		{"uniform bounds", func(g *Graph) { g.Uniform(device.Float32, 1, 0, 2, 1, 3) }, "Uniform: bounds [2, 1)"},
		{"normal std", func(g *Graph) { g.Normal(device.Float32, 1, 0, 0, -1, 3) }, "std >= 0"},
		{"bernoulli p", func(g *Graph) { g.Bernoulli(device.Float32, 1, 0, 1.5, 3) }, "probability 1.5"},
		{"int32", func(g *Graph) { g.Uniform(device.Int32, 1, 0, 0, 1, 3) }, "dtype int32"},
	} {
		g := New(dev)
		c.run(g)
		if err := g.Err(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one saying %q", c.name, err, c.want)
		}
	}
}
