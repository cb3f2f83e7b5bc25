package devicetest

import (
	"fmt"
	"math"
	"testing"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/compose"
)

// Capability is the check of one capability's kernel against its
// composition: Run runs the capability method (through device/compose, or
// compose.Run for a capability declared outside package device) on a set
// of buffers, once on the device under test (its kernel) and once on its
// Core alone (compose.CoreOnly: the composition that defines the kernel),
// from the same initial contents; every buffer must then agree (outputs,
// and the inputs an in-place kernel updates). Run checks the capabilities
// of package device; a package that declares its own (optim,
// optim/geometry) checks them on every backend with Capabilities.
type Capability struct {
	Name string
	// Has reports whether the device has the capability (compose.Has).
	Has func(device.Core) bool
	// Buffers are the initial contents of Run's buffers.
	Buffers []Data
	Run     func(d device.Core, b []device.Buffer)
	// Exact asks for agreement bit for bit; otherwise within a few float32
	// roundings (a fused kernel runs the same float32 operations in
	// another order).
	Exact bool
}

// Data is a buffer's initial contents: float values (uploaded as
// float32), or int32 ones when Int32s is set.
type Data struct {
	Floats []float64
	Int32s []int32
}

func floats(v []float64) Data { return Data{Floats: v} }
func ints(v []int32) Data     { return Data{Int32s: v} }

// fusedTol is how closely a fused float32 kernel must follow its
// composition.
var fusedTol = tol{rtol: 1e-4, atol: 2e-5}

// Randoms returns n normal values of scale s from a generator seeded by
// seed: the suite's test data.
func Randoms(seed uint64, n int, s float64) []float64 { return randoms(seed, n, s) }

// capabilities checks every capability of package device that dev has
// against its composition, in float32.
func capabilities(t *testing.T, dev device.Core) { Capabilities(t, dev, capCases()) }

// Capabilities checks each case whose capability dev has against its
// composition, in float32, as a subtest named after the case.
func Capabilities(t *testing.T, dev device.Core, cases []Capability) {
	h := &harness{dev: dev, dt: device.Float32}
	ran := 0
	for _, c := range cases {
		if !c.Has(dev) {
			continue
		}
		ran++
		t.Run(c.Name, func(t *testing.T) {
			got := h.runCap(t, dev, c)
			want := h.runCap(t, compose.CoreOnly(dev), c)
			tl := fusedTol
			if c.Exact {
				tl = exact
			}
			for k := range got {
				if c.Buffers[k].Int32s != nil {
					for j := range got[k].Int32s {
						if got[k].Int32s[j] != want[k].Int32s[j] {
							t.Errorf("buffer %d (int32): element %d = %d, the composition gives %d", k, j, got[k].Int32s[j], want[k].Int32s[j])
							break
						}
					}
					continue
				}
				compare(t, fmt.Sprintf("%s: buffer %d", c.Name, k), got[k].Floats, want[k].Floats, tl)
			}
		})
	}
	t.Logf("%s: %d capability checks against the compositions", dev.Name(), ran)
}

// runCap uploads the case's buffers to d, runs it and reads them back.
func (h *harness) runCap(t *testing.T, d device.Core, c Capability) []Data {
	t.Helper()
	hd := &harness{dev: d, dt: h.dt}
	bufs := make([]device.Buffer, len(c.Buffers))
	for k, b := range c.Buffers {
		if b.Int32s != nil {
			bufs[k] = hd.uploadInt32(t, b.Int32s)
		} else {
			bufs[k] = hd.upload(t, b.Floats)
		}
	}
	c.Run(d, bufs)
	out := make([]Data, len(bufs))
	for k, b := range c.Buffers {
		if b.Int32s != nil {
			out[k].Int32s = hd.downloadInt32(t, bufs[k])
		} else {
			out[k].Floats = hd.download(t, bufs[k])
		}
	}
	return out
}

// indices returns n int32 values in [0, limit) (with repeats).
func indices(seed uint64, n, limit int) []int32 {
	r := randoms(seed, n, 1)
	ix := make([]int32, n)
	for i, v := range r {
		ix[i] = int32(math.Abs(v)*1e6) % int32(limit)
	}
	return ix
}

func positive(v []float64) []float64 {
	for i := range v {
		v[i] = math.Abs(v[i]) + 0.05
	}
	return v
}

// shifted adds c to every value of v.
func shifted(v []float64, c float64) []float64 {
	for i := range v {
		v[i] += c
	}
	return v
}

// ropeTables returns cos and sin of the rotary angles for seq x half.
func ropeTables(seq, half int) (c, s []float64) {
	c, s = make([]float64, seq*half), make([]float64, seq*half)
	for t := range seq {
		for j := range half {
			a := float64(t) * math.Pow(10000, -2*float64(j)/float64(2*half))
			c[t*half+j], s[t*half+j] = math.Cos(a), math.Sin(a)
		}
	}
	return c, s
}

// capCases lists the capability checks, one entry (or one loop over ops)
// per capability.
//
// funclen: a table; each entry is a few lines and reads on its own, and
// split across functions the list would no longer be seen whole.
func capCases() []Capability {
	r := func(seed uint64, n int) Data { return floats(randoms(seed, n, 1)) }
	var cs []Capability
	ax := compose.Has[device.Axpbyer]
	nanDst := randoms(10, 1001, 1)
	nanDst[7] = math.NaN()
	cs = append(cs,
		Capability{Name: "Transpose", Has: compose.Has[device.Transposer], Exact: true,
			Buffers: []Data{r(4, 2*33*5*7), r(5, 2*33*5*7)},
			Run:     func(d device.Core, b []device.Buffer) { compose.Transpose(d, b[0], b[1], 2, 33, 5, 7) }},
		Capability{Name: "Scale/inplace", Has: ax, Exact: true, Buffers: []Data{r(8, 1001)},
			Run: func(d device.Core, b []device.Buffer) { compose.Scale(d, b[0], b[0], 0.3) }},
		Capability{Name: "Axpby", Has: ax, Buffers: []Data{r(9, 1001), r(10, 1001)},
			Run: func(d device.Core, b []device.Buffer) { compose.Axpby(d, b[0], b[1], 0.7, -1.25) }},
		// beta 0 does not read dst: the NaN in it must not propagate.
		Capability{Name: "Axpby/beta0", Has: ax, Exact: true, Buffers: []Data{floats(nanDst), r(11, 1001)},
			Run: func(d device.Core, b []device.Buffer) { compose.Axpby(d, b[0], b[1], -1.5, 0) }},
		Capability{Name: "Gather", Has: compose.Has[device.RowGatherer], Exact: true,
			Buffers: []Data{r(13, 70*48), r(14, 50*48), ints(indices(15, 70, 50))},
			Run:     func(d device.Core, b []device.Buffer) { compose.Gather(d, b[0], b[1], b[2], 48) }},
		Capability{Name: "ScatterAdd", Has: compose.Has[device.RowGatherer],
			Buffers: []Data{r(16, 50*48), r(17, 70*48), ints(indices(18, 70, 50))},
			Run:     func(d device.Core, b []device.Buffer) { compose.ScatterAdd(d, b[0], b[1], b[2], 48) }},
		Capability{Name: "RMSNorm", Has: compose.Has[device.RMSNormer],
			Buffers: []Data{r(22, 37*129), r(23, 37), r(24, 37*129)},
			Run:     func(d device.Core, b []device.Buffer) { compose.RMSNorm(d, b[0], b[1], b[2], 37, 129, 1e-6) }},
		Capability{Name: "RMSNormBackward", Has: compose.Has[device.RMSNormer],
			Buffers: []Data{r(25, 37*129), r(26, 37*129), r(27, 37*129), floats(positive(randoms(28, 37, 1)))},
			Run:     func(d device.Core, b []device.Buffer) { compose.RMSNormBackward(d, b[0], b[1], b[2], b[3], 37, 129) }},
		// Buffers out, rstd, x, gain, dy, dx, dgain: the forward, then the
		// backward from its rstd; 135 columns, past the vector column
		// sums' multiple of 16.
		Capability{Name: "RMSNormGain", Has: compose.Has[device.RMSNormGainer],
			Buffers: []Data{r(410, 37*135), r(411, 37), r(412, 37*135), r(413, 135), r(414, 37*135), r(415, 37*135), r(416, 135)},
			Run: func(d device.Core, b []device.Buffer) {
				compose.RMSNormGain(d, b[0], b[1], b[2], b[3], 37, 135, 1e-6)
				compose.RMSNormGainBackward(d, b[5], b[6], b[4], b[2], b[1], b[3], 37, 135)
			}},
		Capability{Name: "RMSNormGainBackward/frozen", Has: compose.Has[device.RMSNormGainer],
			Buffers: []Data{r(417, 37*135), r(418, 135), r(419, 37*135), floats(positive(randoms(420, 37, 1))), r(421, 37*135)},
			Run: func(d device.Core, b []device.Buffer) {
				compose.RMSNormGainBackward(d, b[4], nil, b[2], b[0], b[3], b[1], 37, 135)
			}},
		// Buffers out, mean, rstd, x, w, b, dy, dx, dw, db: the forward,
		// then the backward from its mean and rstd. x is off-centre.
		Capability{Name: "LayerNorm", Has: compose.Has[device.LayerNormer],
			Buffers: []Data{r(70, 37*129), r(71, 37), r(72, 37), floats(shifted(randoms(73, 37*129, 2), 3)), r(74, 129), r(75, 129),
				r(76, 37*129), r(77, 37*129), r(78, 129), r(79, 129)},
			Run: func(d device.Core, b []device.Buffer) {
				compose.LayerNorm(d, b[0], b[1], b[2], b[3], b[4], b[5], 37, 129, 1e-5)
				compose.LayerNormBackward(d, b[7], b[8], b[9], b[6], b[3], b[4], b[1], b[2], 37, 129)
			}},
		// No gain, no bias, no parameter gradients: buffers out, mean,
		// rstd, x, dy, dx.
		Capability{Name: "LayerNorm/plain", Has: compose.Has[device.LayerNormer],
			Buffers: []Data{r(80, 19*64), r(81, 19), r(82, 19), floats(shifted(randoms(83, 19*64, 1), -2)), r(84, 19*64), r(85, 19*64)},
			Run: func(d device.Core, b []device.Buffer) {
				compose.LayerNorm(d, b[0], b[1], b[2], b[3], nil, nil, 19, 64, 1e-5)
				compose.LayerNormBackward(d, b[5], nil, nil, b[4], b[3], nil, b[1], b[2], 19, 64)
			}},
		// Buffers out, x, bias, dout, dx; x spans the tails (scale 3).
		Capability{Name: "GELUTanh", Has: compose.Has[device.GELUer],
			Buffers: []Data{r(86, 23*301), floats(randoms(87, 23*301, 3)), r(88, 301), r(89, 23*301), r(90, 23*301)},
			Run: func(d device.Core, b []device.Buffer) {
				compose.GELUTanh(d, b[0], b[1], b[2], 23, 301)
				compose.GELUTanhBackward(d, b[4], b[3], b[1], b[2], 23, 301)
			}},
		// No bias, in place: out over x after the backward (dx over dout).
		Capability{Name: "GELUTanh/inplace", Has: compose.Has[device.GELUer],
			Buffers: []Data{floats(randoms(91, 1001, 3)), r(92, 1001)},
			Run: func(d device.Core, b []device.Buffer) {
				compose.GELUTanhBackward(d, b[1], b[1], b[0], nil, 1, 1001)
				compose.GELUTanh(d, b[0], b[0], nil, 1, 1001)
			}},
		Capability{Name: "SwiGLU", Has: compose.Has[device.SwiGLUer],
			Buffers: []Data{r(29, 1001), floats(randoms(30, 1001, 4)), r(31, 1001)},
			Run:     func(d device.Core, b []device.Buffer) { compose.SwiGLU(d, b[0], b[1], b[2]) }},
		Capability{Name: "SwiGLUBackward", Has: compose.Has[device.SwiGLUer],
			Buffers: []Data{r(32, 1001), r(33, 1001), r(34, 1001), floats(randoms(35, 1001, 4)), r(36, 1001)},
			Run:     func(d device.Core, b []device.Buffer) { compose.SwiGLUBackward(d, b[0], b[1], b[2], b[3], b[4]) }},
	)
	for _, op := range []device.ReduceOp{device.Sum, device.SumSquares, device.Max} {
		for axis, n := range []int{129, 37} {
			cs = append(cs, Capability{Name: fmt.Sprintf("Reduce/%v/%d", op, axis), Has: compose.Has[device.Reducer],
				Buffers: []Data{r(37, n), r(38, 37*129)},
				Run:     func(d device.Core, b []device.Buffer) { compose.Reduce(d, op, axis, b[0], b[1], 37, 129) }})
		}
	}
	for _, s := range []device.AttentionShape{{Batch: 2, Seq: 9, Heads: 3, HeadDim: 16}, {Batch: 1, Seq: 33, Heads: 2, HeadDim: 32}} {
		n, half := s.Batch*s.Seq*s.Heads*s.HeadDim, s.HeadDim/2
		c, sn := ropeTables(s.Seq, half)
		for _, inv := range []bool{false, true} {
			name := fmt.Sprintf("RoPE/%dx%dx%dx%d", s.Batch, s.Seq, s.Heads, s.HeadDim)
			if inv {
				name += "/inverse"
			}
			cs = append(cs, Capability{Name: name, Has: compose.Has[device.RoPEr],
				Buffers: []Data{r(39, n), r(40, n), floats(c), floats(sn)},
				Run:     func(d device.Core, b []device.Buffer) { compose.RoPE(d, b[0], b[1], b[2], b[3], s, inv) }},
				Capability{Name: name + "/inplace", Has: compose.Has[device.RoPEr],
					Buffers: []Data{r(41, n), floats(c), floats(sn)},
					Run:     func(d device.Core, b []device.Buffer) { compose.RoPE(d, b[0], b[0], b[1], b[2], s, inv) }})
		}
		lse := s.Batch * s.Heads * s.Seq
		scale := float32(1 / math.Sqrt(float64(s.HeadDim)))
		// Forward, then backward from the forward's out and lse: buffers
		// out, lse, q, k, v, dout, dq, dk, dv.
		cs = append(cs, Capability{Name: fmt.Sprintf("Attention/%dx%dx%dx%d", s.Batch, s.Seq, s.Heads, s.HeadDim), Has: compose.Has[device.Attender],
			Buffers: []Data{r(42, n), r(43, lse), floats(randoms(44, n, 2)), floats(randoms(45, n, 2)), r(46, n), r(47, n), r(48, n), r(49, n), r(50, n)},
			Run: func(d device.Core, b []device.Buffer) {
				compose.Attention(d, b[0], b[1], b[2], b[3], b[4], s, scale)
				compose.AttentionBackward(d, b[6], b[7], b[8], b[5], b[2], b[3], b[4], b[0], b[1], s, scale)
			}})
	}
	cs = append(cs, attentionKVCases()...)
	const rows, vocab = 13, 300
	logits := func(seed uint64) Data { return floats(randoms(seed, rows*vocab, 3)) }
	targets := ints(indices(51, rows, vocab))
	cs = append(cs,
		// Buffers loss, lse, logits, targets, dloss, dlogits.
		Capability{Name: "CrossEntropy", Has: compose.Has[device.CrossEntropier],
			Buffers: []Data{r(52, rows), r(53, rows), logits(54), targets, r(55, rows), r(56, rows*vocab)},
			Run: func(d device.Core, b []device.Buffer) {
				compose.CrossEntropy(d, b[0], b[1], b[2], b[3], rows, vocab)
				compose.CrossEntropyBackward(d, b[5], b[4], b[2], b[1], b[3], rows, vocab)
			}},
		Capability{Name: "CrossEntropyBackward/inplace", Has: compose.Has[device.CrossEntropier],
			Buffers: []Data{r(57, rows), r(58, rows), logits(59), targets, r(60, rows)},
			Run: func(d device.Core, b []device.Buffer) {
				compose.CrossEntropy(d, b[0], b[1], b[2], b[3], rows, vocab)
				compose.CrossEntropyBackward(d, b[2], b[4], b[2], b[1], b[3], rows, vocab)
			}},
		Capability{Name: "CrossEntropyWithGrad", Has: compose.Has[device.CrossEntropier],
			Buffers: []Data{r(61, rows), r(62, rows), logits(63), targets},
			Run: func(d device.Core, b []device.Buffer) {
				compose.CrossEntropyWithGrad(d, b[0], b[1], b[2], b[3], rows, vocab, 1.0/rows)
			}},
	)
	return cs
}
