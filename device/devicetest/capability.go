package devicetest

import (
	"fmt"
	"math"
	"testing"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/compose"
)

// capCase runs one capability method through device/compose on a set of
// buffers: once on the device under test (its kernel) and once on its
// Core alone (the composition that defines the kernel), from the same
// initial contents; every buffer must then agree (outputs, and the inputs
// an in-place kernel updates).
type capCase struct {
	name string
	// has reports whether the device has the capability.
	has  func(device.Core) bool
	bufs []hostData
	run  func(d device.Core, b []device.Buffer)
	tol  tol
}

// hostData is a buffer's initial contents: float32 values, or int32 ones.
type hostData struct {
	f []float64
	i []int32
}

func floats(v []float64) hostData { return hostData{f: v} }
func ints(v []int32) hostData     { return hostData{i: v} }

// fusedTol is how closely a fused float32 kernel must follow its
// composition (a different order of the same float32 operations).
var fusedTol = tol{rtol: 1e-4, atol: 2e-5}

func hasCap[C any](d device.Core) bool { _, ok := d.(C); return ok }

// capabilities checks every capability dev has against its composition,
// in float32.
func capabilities(t *testing.T, dev device.Core) {
	h := &harness{dev: dev, dt: device.Float32}
	ran := 0
	for _, c := range capCases() {
		if !c.has(dev) {
			continue
		}
		ran++
		t.Run(c.name, func(t *testing.T) {
			got := h.runCap(t, dev, c)
			want := h.runCap(t, compose.CoreOnly(dev), c)
			for k := range got {
				if c.bufs[k].i != nil {
					for j := range got[k].i {
						if got[k].i[j] != want[k].i[j] {
							t.Errorf("buffer %d (int32): element %d = %d, the composition gives %d", k, j, got[k].i[j], want[k].i[j])
							break
						}
					}
					continue
				}
				compare(t, fmt.Sprintf("%s: buffer %d", c.name, k), got[k].f, want[k].f, c.tol)
			}
		})
	}
	t.Logf("%s: %d capability checks against the compositions", dev.Name(), ran)
}

// runCap uploads the case's buffers to d, runs it and reads them back.
func (h *harness) runCap(t *testing.T, d device.Core, c capCase) []hostData {
	t.Helper()
	hd := &harness{dev: d, dt: h.dt}
	bufs := make([]device.Buffer, len(c.bufs))
	for k, b := range c.bufs {
		if b.i != nil {
			bufs[k] = hd.uploadInt32(t, b.i)
		} else {
			bufs[k] = hd.upload(t, b.f)
		}
	}
	c.run(d, bufs)
	out := make([]hostData, len(bufs))
	for k, b := range c.bufs {
		if b.i != nil {
			out[k].i = hd.downloadInt32(t, bufs[k])
		} else {
			out[k].f = hd.download(t, bufs[k])
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

func fill(n int, v float64) []float64 {
	s := make([]float64, n)
	for i := range s {
		s[i] = v
	}
	return s
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
func capCases() []capCase {
	r := func(seed uint64, n int) hostData { return floats(randoms(seed, n, 1)) }
	var cs []capCase
	el := hasCap[device.Elementwise]
	for _, op := range []device.BinaryOp{device.Add, device.Sub, device.Mul} {
		cs = append(cs, capCase{name: "Binary/" + op.String(), has: el, tol: exact,
			bufs: []hostData{r(1, 1001), r(2, 1001), r(3, 1001)},
			run:  func(d device.Core, b []device.Buffer) { compose.Binary(d, op, b[0], b[1], b[2]) }})
	}
	cs = append(cs,
		capCase{name: "Transpose", has: hasCap[device.Transposer], tol: exact,
			bufs: []hostData{r(4, 2*33*5*7), r(5, 2*33*5*7)},
			run:  func(d device.Core, b []device.Buffer) { compose.Transpose(d, b[0], b[1], 2, 33, 5, 7) }},
		capCase{name: "FillFrom", has: el, tol: exact, bufs: []hostData{r(6, 777), r(7, 1)},
			run: func(d device.Core, b []device.Buffer) { compose.FillFrom(d, b[0], b[1], -0.5) }},
		capCase{name: "Scale/inplace", has: el, tol: exact, bufs: []hostData{r(8, 1001)},
			run: func(d device.Core, b []device.Buffer) { compose.Scale(d, b[0], b[0], 0.3) }},
		capCase{name: "Axpby", has: el, tol: fusedTol, bufs: []hostData{r(9, 1001), r(10, 1001)},
			run: func(d device.Core, b []device.Buffer) { compose.Axpby(d, b[0], b[1], 0.7, -1.25) }},
		capCase{name: "AddRow", has: el, tol: fusedTol, bufs: []hostData{r(11, 300*77), r(12, 77)},
			run: func(d device.Core, b []device.Buffer) { compose.AddRow(d, b[0], b[1], 300, 77, -2) }},
		capCase{name: "Gather", has: hasCap[device.RowGatherer], tol: exact,
			bufs: []hostData{r(13, 70*48), r(14, 50*48), ints(indices(15, 70, 50))},
			run:  func(d device.Core, b []device.Buffer) { compose.Gather(d, b[0], b[1], b[2], 48) }},
		capCase{name: "ScatterAdd", has: hasCap[device.RowGatherer], tol: fusedTol,
			bufs: []hostData{r(16, 50*48), r(17, 70*48), ints(indices(18, 70, 50))},
			run:  func(d device.Core, b []device.Buffer) { compose.ScatterAdd(d, b[0], b[1], b[2], 48) }},
		capCase{name: "RowScale", has: hasCap[device.RowScaler], tol: fusedTol,
			bufs: []hostData{r(19, 37*129), r(20, 37*129)},
			run:  func(d device.Core, b []device.Buffer) { compose.RowScale(d, b[0], b[1], 37, 129, 0.5, 1e-8) }},
		capCase{name: "RowScale/inplace", has: hasCap[device.RowScaler], tol: fusedTol,
			bufs: []hostData{r(21, 37*129)},
			run:  func(d device.Core, b []device.Buffer) { compose.RowScale(d, b[0], b[0], 37, 129, 1, 0.1) }},
		capCase{name: "RMSNorm", has: hasCap[device.RMSNormer], tol: fusedTol,
			bufs: []hostData{r(22, 37*129), r(23, 37), r(24, 37*129)},
			run:  func(d device.Core, b []device.Buffer) { compose.RMSNorm(d, b[0], b[1], b[2], 37, 129, 1e-6) }},
		capCase{name: "RMSNormBackward", has: hasCap[device.RMSNormer], tol: fusedTol,
			bufs: []hostData{r(25, 37*129), r(26, 37*129), r(27, 37*129), floats(positive(randoms(28, 37, 1)))},
			run:  func(d device.Core, b []device.Buffer) { compose.RMSNormBackward(d, b[0], b[1], b[2], b[3], 37, 129) }},
		capCase{name: "SwiGLU", has: hasCap[device.SwiGLUer], tol: fusedTol,
			bufs: []hostData{r(29, 1001), floats(randoms(30, 1001, 4)), r(31, 1001)},
			run:  func(d device.Core, b []device.Buffer) { compose.SwiGLU(d, b[0], b[1], b[2]) }},
		capCase{name: "SwiGLUBackward", has: hasCap[device.SwiGLUer], tol: fusedTol,
			bufs: []hostData{r(32, 1001), r(33, 1001), r(34, 1001), floats(randoms(35, 1001, 4)), r(36, 1001)},
			run:  func(d device.Core, b []device.Buffer) { compose.SwiGLUBackward(d, b[0], b[1], b[2], b[3], b[4]) }},
	)
	for _, op := range []device.ReduceOp{device.Sum, device.SumSquares, device.Max} {
		for axis, n := range []int{129, 37} {
			cs = append(cs, capCase{name: fmt.Sprintf("Reduce/%v/%d", op, axis), has: hasCap[device.Reducer], tol: fusedTol,
				bufs: []hostData{r(37, n), r(38, 37*129)},
				run:  func(d device.Core, b []device.Buffer) { compose.Reduce(d, op, axis, b[0], b[1], 37, 129) }})
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
			cs = append(cs, capCase{name: name, has: hasCap[device.RoPEr], tol: fusedTol,
				bufs: []hostData{r(39, n), r(40, n), floats(c), floats(sn)},
				run:  func(d device.Core, b []device.Buffer) { compose.RoPE(d, b[0], b[1], b[2], b[3], s, inv) }},
				capCase{name: name + "/inplace", has: hasCap[device.RoPEr], tol: fusedTol,
					bufs: []hostData{r(41, n), floats(c), floats(sn)},
					run:  func(d device.Core, b []device.Buffer) { compose.RoPE(d, b[0], b[0], b[1], b[2], s, inv) }})
		}
		lse := s.Batch * s.Heads * s.Seq
		scale := float32(1 / math.Sqrt(float64(s.HeadDim)))
		// Forward, then backward from the forward's out and lse: buffers
		// out, lse, q, k, v, dout, dq, dk, dv.
		cs = append(cs, capCase{name: fmt.Sprintf("Attention/%dx%dx%dx%d", s.Batch, s.Seq, s.Heads, s.HeadDim), has: hasCap[device.Attender], tol: fusedTol,
			bufs: []hostData{r(42, n), r(43, lse), floats(randoms(44, n, 2)), floats(randoms(45, n, 2)), r(46, n), r(47, n), r(48, n), r(49, n), r(50, n)},
			run: func(d device.Core, b []device.Buffer) {
				compose.Attention(d, b[0], b[1], b[2], b[3], b[4], s, scale)
				compose.AttentionBackward(d, b[6], b[7], b[8], b[5], b[2], b[3], b[4], b[0], b[1], s, scale)
			}})
	}
	cs = append(cs, attentionKVCases()...)
	const rows, vocab = 13, 300
	logits := func(seed uint64) hostData { return floats(randoms(seed, rows*vocab, 3)) }
	targets := ints(indices(51, rows, vocab))
	cs = append(cs,
		// Buffers loss, lse, logits, targets, dloss, dlogits.
		capCase{name: "CrossEntropy", has: hasCap[device.CrossEntropier], tol: fusedTol,
			bufs: []hostData{r(52, rows), r(53, rows), logits(54), targets, r(55, rows), r(56, rows*vocab)},
			run: func(d device.Core, b []device.Buffer) {
				compose.CrossEntropy(d, b[0], b[1], b[2], b[3], rows, vocab)
				compose.CrossEntropyBackward(d, b[5], b[4], b[2], b[1], b[3], rows, vocab)
			}},
		capCase{name: "CrossEntropyBackward/inplace", has: hasCap[device.CrossEntropier], tol: fusedTol,
			bufs: []hostData{r(57, rows), r(58, rows), logits(59), targets, r(60, rows)},
			run: func(d device.Core, b []device.Buffer) {
				compose.CrossEntropy(d, b[0], b[1], b[2], b[3], rows, vocab)
				compose.CrossEntropyBackward(d, b[2], b[4], b[2], b[1], b[3], rows, vocab)
			}},
		capCase{name: "CrossEntropyWithGrad", has: hasCap[device.CrossEntropier], tol: fusedTol,
			bufs: []hostData{r(61, rows), r(62, rows), logits(63), targets},
			run: func(d device.Core, b []device.Buffer) {
				compose.CrossEntropyWithGrad(d, b[0], b[1], b[2], b[3], rows, vocab, 1.0/rows)
			}},
	)
	adam := device.AdamW{LR: 1e-2, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1,
		BiasCorrection1: 1 - 0.9*0.9*0.9, BiasCorrection2: 1 - 0.95*0.95*0.95}
	for _, withStep := range []bool{false, true} {
		name := "AdamWStep"
		if withStep {
			name += "/step"
		}
		cs = append(cs, capCase{name: name, has: hasCap[device.AdamWStepper], tol: fusedTol,
			bufs: []hostData{r(64, 1001), r(65, 1001), floats(randoms(66, 1001, 0.1)), floats(positive(randoms(67, 1001, 0.01))), r(68, 1001)},
			run: func(d device.Core, b []device.Buffer) {
				step := b[4]
				if !withStep {
					step = nil
				}
				compose.AdamWStep(d, b[0], b[1], b[2], b[3], step, adam)
			}})
	}
	// The running maximum over two column tiles of one row block: a
	// diagonal tile (only pairs above the diagonal count) and one to its
	// right; best starts at -Inf but for a few rows, and one NaN is in g.
	const pr, pc = 17, 23
	best := fill(pr, math.Inf(-1))
	best[3], best[10] = 1e9, -1e9
	g := randoms(69, pr*2*pc, 1)
	g[5] = math.NaN()
	cs = append(cs, capCase{name: "PairDistanceMax", has: hasCap[device.PairDistanceMaxer], tol: fusedTol,
		bufs: []hostData{floats(best), ints(make([]int32, pr)), floats(g), floats(positive(randoms(70, pr, 2))), floats(positive(randoms(71, 2*pc, 2)))},
		run: func(d device.Core, b []device.Buffer) {
			for k, c0 := range []int{0, 40} {
				compose.PairDistanceMax(d, b[0], b[1], b[2].Slice(k*pr*pc, pr*pc), b[3], b[4].Slice(k*pc, pc), pr, pc, 0, c0)
			}
		}})
	return cs
}
