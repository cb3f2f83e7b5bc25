package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/device/devicetest"
	"github.com/hilbert-ml/hilbert/device/profile"
)

// The GPU tests run every kernel on CUDA and on the CPU backend with the
// same inputs and compare. They detect the GPU at run time and skip, with
// the reason, when there is none (no build tags).

var (
	gpuOnce sync.Once
	gpuDev  *Device
	gpuErr  error
)

// deviceSuites compare every kernel with the CPU backend. TestGPU runs them
// on a real GPU; TestEmulator runs them on the CPU emulation of CUDA
// (internal/cudaemu), which executes the same CUDA C source.
var deviceSuites = []struct {
	name string
	run  func(t *testing.T, g *Device)
}{
	{"Elementwise", suiteElementwise},
	{"Rows", suiteRows},
	{"RoPE", suiteRoPE},
	{"CrossEntropy", suiteCrossEntropy},
	{"Attention", suiteAttention},
	{"AttentionTC", suiteAttentionTC},
	{"FlashAttention2048", suiteFlashAttention2048},
	{"Gemm", gemmParity},
	{"Cast", suiteCast},
	{"PairDistanceMax", suitePairDistanceMax},
	// The backend conformance suite of the core ops, against float64
	// references (the same suite the CPU backend runs).
	{"Conformance", func(t *testing.T, g *Device) { devicetest.Run(t, g) }},
}

func runSuites(t *testing.T, g *Device) {
	for _, s := range deviceSuites {
		t.Run(s.name, func(t *testing.T) { s.run(t, g) })
	}
}

// TestGPU runs the parity suites on CUDA device 0, or skips saying why.
func TestGPU(t *testing.T) { runSuites(t, gpu(t)) }

// gpu returns the shared CUDA device or skips the test.
func gpu(tb testing.TB) *Device {
	tb.Helper()
	gpuOnce.Do(func() { gpuDev, gpuErr = New(0) })
	if gpuErr != nil {
		tb.Skipf("no CUDA device: %v", gpuErr)
	}
	return gpuDev
}

// hostBuf is one kernel operand: float32 data (uploaded as dtype on the
// GPU, as float32 rounded to dtype on the CPU) or int32 ids.
type hostBuf struct {
	f     []float32
	i     []int32
	dtype device.DType // GPU dtype of f; 0 means Float32
}

// opCase is one kernel call compared across backends: every float32 buffer
// (inputs, which in-place kernels modify, and outputs) is compared after run.
// fullDevice is a backend with every capability (the CPU and CUDA ones),
// whose fused kernels the cases below compare.
type fullDevice interface {
	device.Device
	device.Fused
	// The kernels optim and optim/geometry declare (optim.AdamWStepper,
	// optim.RowScaler, geometry.PairDistanceMaxer).
	AdamWStep(p, g, m, v, step device.Buffer, lr, beta1, beta2, oneMinusBeta1, oneMinusBeta2, eps, decay, bc1, bc2 float32)
	RowScale(dst, src device.Buffer, rows, cols int, alpha, eps float32)
	PairDistanceMax(best, arg, g, na, nb device.Buffer, rows, cols, r0, c0 int)
}

type opCase struct {
	name string
	ins  []hostBuf
	outs []int // lengths of zeroed float32 outputs
	run  func(d fullDevice, in, out []device.Buffer)
	tol  float64
}

func checkCase(t *testing.T, g *Device, c opCase) {
	t.Helper()
	c0 := cpu.New()
	upload := func(d device.Device, gpuSide bool) ([]device.Buffer, []device.Buffer) {
		var in, out []device.Buffer
		for _, h := range c.ins {
			if h.i != nil {
				b, err := d.Alloc(device.Int32, len(h.i))
				if err != nil {
					t.Fatal(err)
				}
				d.CopyInt32FromHost(b, h.i)
				in = append(in, b)
				continue
			}
			dt, data := device.Float32, h.f
			if h.dtype == device.BFloat16 {
				data = roundBF16(h.f)
				if gpuSide {
					dt = device.BFloat16
				}
			}
			b, err := d.Alloc(dt, len(data))
			if err != nil {
				t.Fatal(err)
			}
			d.CopyFromHost(b, data)
			in = append(in, b)
		}
		for _, n := range c.outs {
			b, err := d.Alloc(device.Float32, n)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, b)
		}
		return in, out
	}
	cin, cout := upload(c0, false)
	gin, gout := upload(g, true)
	c.run(c0, cin, cout)
	c.run(g, gin, gout)
	if err := g.Synchronize(); err != nil {
		t.Fatalf("%s: %v", c.name, err)
	}
	tol := c.tol
	if tol == 0 {
		tol = 1e-4
	}
	cmp := func(what string, cb, gb device.Buffer) {
		want := make([]float32, cb.Len())
		got := make([]float32, gb.Len())
		c0.CopyToHost(want, cb)
		g.CopyToHost(got, gb)
		worst, at := 0.0, -1
		for i := range want {
			w, x := float64(want[i]), float64(got[i])
			if math.IsNaN(w) != math.IsNaN(x) {
				t.Fatalf("%s %s[%d]: got %v, want %v", c.name, what, i, x, w)
			}
			if e := math.Abs(x-w) / (1 + math.Abs(w)); e > worst {
				worst, at = e, i
			}
		}
		if worst > tol {
			t.Errorf("%s %s: error %.3g at [%d] (got %v, want %v) > tol %.1g", c.name, what, worst, at, got[at], want[at], tol)
		}
	}
	for i, h := range c.ins {
		if h.i == nil {
			cmp(fmt.Sprintf("in%d", i), cin[i], gin[i])
		}
	}
	for i := range c.outs {
		cmp(fmt.Sprintf("out%d", i), cout[i], gout[i])
	}
}

func roundBF16(x []float32) []float32 {
	y := make([]float32, len(x))
	for i, v := range x {
		y[i] = float32FromBF16(bf16FromFloat32(v))
	}
	return y
}

func randn(rng *rand.Rand, n int, scale float32) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = scale * float32(rng.NormFloat64())
	}
	return x
}

func randIDs(rng *rand.Rand, n, limit int) []int32 {
	x := make([]int32, n)
	for i := range x {
		x[i] = int32(rng.IntN(limit))
	}
	return x
}

func f(x []float32) hostBuf  { return hostBuf{f: x} }
func bf(x []float32) hostBuf { return hostBuf{f: x, dtype: device.BFloat16} }
func ids(x []int32) hostBuf  { return hostBuf{i: x} }
func absf(x []float32) []float32 {
	for i := range x {
		x[i] = float32(math.Abs(float64(x[i]))) + 0.1
	}
	return x
}

func suiteElementwise(t *testing.T, g *Device) {
	rng := rand.New(rand.NewPCG(3, 4))
	const n = 100003
	var cases []opCase
	for _, h := range []func([]float32) hostBuf{f, bf} {
		tol := 1e-6
		if h(nil).dtype == device.BFloat16 {
			tol = 1e-2
		}
		cases = append(cases,
			opCase{name: "Fill", ins: []hostBuf{h(randn(rng, n, 1))}, tol: tol,
				run: func(d fullDevice, in, _ []device.Buffer) { d.Fill(in[0].Slice(7, n-20), 2.5) }},
			opCase{name: "Axpby/beta0", ins: []hostBuf{h(randn(rng, n, 1)), h(randn(rng, n, 1))}, tol: tol,
				run: func(d fullDevice, in, _ []device.Buffer) { d.Axpby(in[0], in[1], 0.3, 0) }},
			opCase{name: "Axpby", ins: []hostBuf{h(randn(rng, n, 1)), h(randn(rng, n, 1))}, tol: tol,
				run: func(d fullDevice, in, _ []device.Buffer) { d.Axpby(in[0], in[1], 0.7, -1.25) }},
		)
	}
	cases = append(cases,
		opCase{name: "Transpose", ins: []hostBuf{f(randn(rng, 2*33*5*64, 1))}, outs: []int{2 * 33 * 5 * 64},
			run: func(d fullDevice, in, out []device.Buffer) { d.Transpose(out[0], in[0], 2, 33, 5, 64) }},
		opCase{name: "Transpose2D", ins: []hostBuf{f(randn(rng, 129*65, 1))}, outs: []int{129 * 65},
			run: func(d fullDevice, in, out []device.Buffer) { d.Transpose(out[0], in[0], 1, 129, 65, 1) }},
		opCase{name: "Gather", ins: []hostBuf{f(randn(rng, 1000*48, 1)), ids(randIDs(rng, 517, 1000))}, outs: []int{517 * 48},
			run: func(d fullDevice, in, out []device.Buffer) { d.Gather(out[0], in[0], in[1], 48) }},
		opCase{name: "ScatterAdd", ins: []hostBuf{f(randn(rng, 50*48, 1)), f(randn(rng, 517*48, 1)), ids(randIDs(rng, 517, 50))},
			run: func(d fullDevice, in, _ []device.Buffer) { d.ScatterAdd(in[0], in[1], in[2], 48) }},
		opCase{name: "AdamWStep", ins: []hostBuf{f(randn(rng, n, 1)), f(randn(rng, n, 1)), f(randn(rng, n, 0.1)), f(absf(randn(rng, n, 0.01)))}, outs: []int{n},
			run: func(d fullDevice, in, out []device.Buffer) {
				d.AdamWStep(in[0], in[1], in[2], in[3], out[0], 4e-3, 0.9, 0.999, float32(1-0.9), float32(1-0.999), 1e-10, float32(1-float64(float32(4e-3))*0.1), 0.271, 0.003)
			}},
		opCase{name: "AdamWStep/nostep", ins: []hostBuf{f(randn(rng, n, 1)), f(randn(rng, n, 1)), f(randn(rng, n, 0.1)), f(absf(randn(rng, n, 0.01)))},
			run: func(d fullDevice, in, _ []device.Buffer) {
				d.AdamWStep(in[0], in[1], in[2], in[3], nil, 1e-2, 0.9, 0.999, float32(1-0.9), float32(1-0.999), 1e-8, 1, 0.1, 0.001)
			}},
		opCase{name: "SwiGLU", ins: []hostBuf{f(randn(rng, n, 3)), f(randn(rng, n, 1))}, outs: []int{n},
			run: func(d fullDevice, in, out []device.Buffer) { d.SwiGLU(out[0], in[0], in[1]) }},
		opCase{name: "SwiGLUBackward", ins: []hostBuf{f(randn(rng, n, 1)), f(randn(rng, n, 3)), f(randn(rng, n, 1))}, outs: []int{n, n},
			run: func(d fullDevice, in, out []device.Buffer) { d.SwiGLUBackward(out[0], out[1], in[0], in[1], in[2]) }},
	)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { checkCase(t, g, c) })
	}
}

func suiteRows(t *testing.T, g *Device) {
	rng := rand.New(rand.NewPCG(5, 6))
	var cases []opCase
	for _, sh := range [][2]int{{37, 513}, {1, 1 << 20}, {4096, 3}} {
		r, c := sh[0], sh[1]
		for _, op := range []device.ReduceOp{device.Sum, device.SumSquares, device.Max} {
			for axis, n := range []int{c, r} {
				cases = append(cases, opCase{name: fmt.Sprintf("Reduce/%s/axis%d/%dx%d", op, axis, r, c), ins: []hostBuf{f(randn(rng, r*c, 1))}, outs: []int{n}, tol: 1e-5,
					run: func(d fullDevice, in, out []device.Buffer) { d.Reduce(op, axis, out[0], in[0], r, c) }})
			}
		}
	}
	const rows, cols = 300, 512
	cases = append(cases,
		opCase{name: "RowScale", ins: []hostBuf{f(randn(rng, rows*cols, 1))}, outs: []int{rows * cols},
			run: func(d fullDevice, in, out []device.Buffer) { d.RowScale(out[0], in[0], rows, cols, 0.5, 1e-8) }},
		opCase{name: "RowScale/alias", ins: []hostBuf{f(randn(rng, rows*cols, 1e-3))},
			run: func(d fullDevice, in, _ []device.Buffer) { d.RowScale(in[0], in[0], rows, cols, 1, 0.1) }},
		opCase{name: "RMSNorm", ins: []hostBuf{f(randn(rng, rows*cols, 4))}, outs: []int{rows * cols, rows},
			run: func(d fullDevice, in, out []device.Buffer) { d.RMSNorm(out[0], out[1], in[0], rows, cols, 1e-6) }},
		opCase{name: "RMSNormBackward", ins: []hostBuf{f(randn(rng, rows*cols, 1)), f(randn(rng, rows*cols, 4)), f(absf(randn(rng, rows, 1)))}, outs: []int{rows * cols},
			run: func(d fullDevice, in, out []device.Buffer) {
				d.RMSNormBackward(out[0], in[0], in[1], in[2], rows, cols)
			}},
	)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { checkCase(t, g, c) })
	}
}

func suiteRoPE(t *testing.T, g *Device) {
	rng := rand.New(rand.NewPCG(7, 8))
	s := device.AttentionShape{Batch: 2, Seq: 50, Heads: 3, HeadDim: 64}
	half := s.HeadDim / 2
	cs, sn := make([]float32, s.Seq*half), make([]float32, s.Seq*half)
	for tt := 0; tt < s.Seq; tt++ {
		for j := 0; j < half; j++ {
			a := float64(tt) * math.Pow(10000, -2*float64(j)/float64(s.HeadDim))
			cs[tt*half+j], sn[tt*half+j] = float32(math.Cos(a)), float32(math.Sin(a))
		}
	}
	n := s.Batch * s.Seq * s.Heads * s.HeadDim
	for _, inv := range []bool{false, true} {
		checkCase(t, g, opCase{name: fmt.Sprintf("RoPE/inverse=%v", inv), ins: []hostBuf{f(randn(rng, n, 1)), f(cs), f(sn)}, outs: []int{n},
			run: func(d fullDevice, in, out []device.Buffer) { d.RoPE(out[0], in[0], in[1], in[2], s, inv) }})
		checkCase(t, g, opCase{name: fmt.Sprintf("RoPE/alias/inverse=%v", inv), ins: []hostBuf{f(randn(rng, n, 1)), f(cs), f(sn)},
			run: func(d fullDevice, in, _ []device.Buffer) { d.RoPE(in[0], in[0], in[1], in[2], s, inv) }})
	}
}

func suiteCrossEntropy(t *testing.T, g *Device) {
	rng := rand.New(rand.NewPCG(9, 10))
	const rows, vocab = 16, 50257
	logits, targets := randn(rng, rows*vocab, 3), randIDs(rng, rows, vocab)
	checkCase(t, g, opCase{name: "CrossEntropy", ins: []hostBuf{f(logits), ids(targets)}, outs: []int{rows, rows},
		run: func(d fullDevice, in, out []device.Buffer) {
			d.CrossEntropy(out[0], out[1], in[0], in[1], rows, vocab)
		}})
	lse := make([]float32, rows)
	for r := 0; r < rows; r++ {
		m, s := math.Inf(-1), 0.0
		for _, v := range logits[r*vocab : (r+1)*vocab] {
			m = math.Max(m, float64(v))
		}
		for _, v := range logits[r*vocab : (r+1)*vocab] {
			s += math.Exp(float64(v) - m)
		}
		lse[r] = float32(m + math.Log(s))
	}
	checkCase(t, g, opCase{name: "CrossEntropyBackward", ins: []hostBuf{f(randn(rng, rows, 1)), f(logits), f(lse), ids(targets)}, outs: []int{rows * vocab},
		run: func(d fullDevice, in, out []device.Buffer) {
			d.CrossEntropyBackward(out[0], in[0], in[1], in[2], in[3], rows, vocab)
		}})
	checkCase(t, g, opCase{name: "CrossEntropyBackward/alias", ins: []hostBuf{f(randn(rng, rows, 1)), f(logits), f(lse), ids(targets)},
		run: func(d fullDevice, in, _ []device.Buffer) {
			d.CrossEntropyBackward(in[1], in[0], in[1], in[2], in[3], rows, vocab)
		}})
}

// attentionCases compares forward and backward; the backward gets the CPU
// forward's out and lse as inputs on both backends. fwdTol bounds the
// forward, tol the backward: both run the tensor-core kernels where
// g.attentionTC(s) (bf16 operands, head dims 64 and 128, sm_80 or newer),
// else the f32 SIMT kernels. round feeds q, k, v rounded to bf16 to both
// backends.
func attentionCases(t *testing.T, g *Device, s device.AttentionShape, fwdTol, tol float64, round bool) {
	rng := rand.New(rand.NewPCG(uint64(s.Seq), uint64(s.HeadDim)))
	n := s.Batch * s.Seq * s.Heads * s.HeadDim
	nl := s.Batch * s.Heads * s.Seq
	scale := float32(1 / math.Sqrt(float64(s.HeadDim)))
	q, k, v := randn(rng, n, 1), randn(rng, n, 1), randn(rng, n, 1)
	name := fmt.Sprintf("B%dT%dH%dD%d", s.Batch, s.Seq, s.Heads, s.HeadDim)
	if round {
		q, k, v = roundBF16(q), roundBF16(k), roundBF16(v)
		name += "/bf16-inputs"
	}
	checkCase(t, g, opCase{name: "Attention/" + name, ins: []hostBuf{f(q), f(k), f(v)}, outs: []int{n, nl}, tol: fwdTol,
		run: func(d fullDevice, in, out []device.Buffer) {
			d.Attention(out[0], out[1], in[0], in[1], in[2], s, scale)
		}})
	c0 := cpu.New()
	bq, bk, bv := cpu.NewFloat32(q), cpu.NewFloat32(k), cpu.NewFloat32(v)
	out, lse := cpu.NewFloat32(make([]float32, n)), cpu.NewFloat32(make([]float32, nl))
	c0.Attention(out, lse, bq, bk, bv, s, scale)
	checkCase(t, g, opCase{name: "AttentionBackward/" + name,
		ins:  []hostBuf{f(randn(rng, n, 1)), f(q), f(k), f(v), f(cpu.Float32s(out)), f(cpu.Float32s(lse))},
		outs: []int{n, n, n}, tol: tol,
		run: func(d fullDevice, in, o []device.Buffer) {
			d.AttentionBackward(o[0], o[1], o[2], in[0], in[1], in[2], in[3], in[4], in[5], s, scale)
		}})
}

// Tolerances of the tensor-core forward (error / (1 + |want|) against the
// f32 CPU backend). Rounding q and k to bf16 (relative 2^-9 each) moves a
// score of D products by about 2^-9 sqrt(2 D) |q_d k_d| scale, some 2e-3
// at unit inputs; exp turns that into a relative weight error, and P and V
// rounded to bf16 add 2^-9 each per term of an average over the keys: a
// few 1e-3 in O and lse (the emulator's worst over the suites: 9e-3 in
// O, 3e-3 in lse), bounded at 2e-2. With inputs already bf16 only the
// rounding of P remains (worst 2e-3): bounded at 5e-3. The tensor-core
// backward also rounds dO and dS to bf16, and dP = dO V^T (bf16 operands)
// meets delta = dO . O in f32, so dS carries their rounding difference
// even where it is 0 exactly (T 1): worst 1.7e-2 over the suites, bounded
// at 3e-2; with q, k, v already bf16, worst 7e-3, bounded at 1.5e-2.
const (
	attTCTol           = 2e-2
	attTCTolRounded    = 5e-3
	attTCBwdTol        = 3e-2
	attTCBwdTolRounded = 1.5e-2
)

func suiteAttention(t *testing.T, g *Device) {
	shapes := []device.AttentionShape{
		{Batch: 2, Seq: 100, Heads: 3, HeadDim: 64},
		{Batch: 1, Seq: 77, Heads: 2, HeadDim: 32},
		{Batch: 1, Seq: 65, Heads: 2, HeadDim: 128},
		{Batch: 2, Seq: 40, Heads: 2, HeadDim: 16},
		{Batch: 1, Seq: 70, Heads: 1, HeadDim: 48},
		{Batch: 1, Seq: 33, Heads: 3, HeadDim: 80},
		{Batch: 1, Seq: 90, Heads: 1, HeadDim: 96},
		{Batch: 1, Seq: 1, Heads: 1, HeadDim: 64},
		{Batch: 1, Seq: 37, Heads: 2, HeadDim: 8}, // no kernel: the Core composition
	}
	for _, s := range shapes {
		attentionCases(t, g, s, 5e-4, 5e-4, false) // float32 operands: the SIMT kernels
		if s.BFloat16Operands = true; g.attentionTC(s) {
			attentionCases(t, g, s, attTCTol, attTCBwdTol, false)
		}
	}
	// The SIMT forward and backward stay the fallback: check them at the
	// tensor-core head dims too, with bf16 operands allowed.
	g.simtAttention = true
	defer func() { g.simtAttention = false }()
	for _, s := range shapes {
		if slices.Contains(attentionTCHeadDims, s.HeadDim) {
			s.BFloat16Operands = true
			if g.attentionTC(s) {
				t.Fatalf("%+v takes the tensor-core kernels with simtAttention set", s)
			}
			t.Run("SIMT", func(t *testing.T) { attentionCases(t, g, s, 5e-4, 5e-4, false) })
		}
	}
}

// suiteAttentionTC checks the tensor-core forward and backward at their
// head dims, with several query tiles, a ragged last tile and inputs
// already in bf16.
func suiteAttentionTC(t *testing.T, g *Device) {
	for _, s := range []device.AttentionShape{
		{Batch: 1, Seq: 200, Heads: 2, HeadDim: 64, BFloat16Operands: true},
		{Batch: 2, Seq: 130, Heads: 1, HeadDim: 128, BFloat16Operands: true},
		{Batch: 1, Seq: 17, Heads: 1, HeadDim: 64, BFloat16Operands: true},
	} {
		if !g.attentionTC(s) {
			t.Fatalf("%+v does not take the tensor-core forward", s)
		}
		attentionCases(t, g, s, attTCTol, attTCBwdTol, false)
		attentionCases(t, g, s, attTCTolRounded, attTCBwdTolRounded, true)
		attentionChain(t, g, s, attTCBwdTol)
	}
	// The profile names the kernel that ran: tensor cores here, SIMT with
	// f32 operands.
	s := device.AttentionShape{Batch: 1, Seq: 40, Heads: 2, HeadDim: 64, BFloat16Operands: true}
	if got := g.AttentionKernel(s); got != "mma.sync bf16" {
		t.Errorf("AttentionKernel(%+v) = %q, want the tensor-core kernels", s, got)
	}
	profileAttentionRows(t, g, s)
	s.BFloat16Operands = false
	profileAttentionRows(t, g, s)
}

// attentionChain runs forward then backward on each backend's own out and
// lse, as training does, and compares the gradients.
func attentionChain(t *testing.T, g *Device, s device.AttentionShape, tol float64) {
	rng := rand.New(rand.NewPCG(uint64(s.Seq)+1, uint64(s.HeadDim)))
	n := s.Batch * s.Seq * s.Heads * s.HeadDim
	nl := s.Batch * s.Heads * s.Seq
	scale := float32(1 / math.Sqrt(float64(s.HeadDim)))
	checkCase(t, g, opCase{name: fmt.Sprintf("AttentionChain/B%dT%dH%dD%d", s.Batch, s.Seq, s.Heads, s.HeadDim),
		ins:  []hostBuf{f(randn(rng, n, 1)), f(randn(rng, n, 1)), f(randn(rng, n, 1)), f(randn(rng, n, 1))},
		outs: []int{n, nl, n, n, n}, tol: tol,
		run: func(d fullDevice, in, o []device.Buffer) {
			d.Attention(o[0], o[1], in[0], in[1], in[2], s, scale)
			d.AttentionBackward(o[2], o[3], o[4], in[3], in[0], in[1], in[2], o[0], o[1], s, scale)
		}})
}

// suiteFlashAttention2048 checks the paper's context length, where a
// T x T score matrix per head would be 16 MiB: the tensor-core kernels,
// then the SIMT ones.
func suiteFlashAttention2048(t *testing.T, g *Device) {
	if testing.Short() {
		t.Skip("-short")
	}
	s := device.AttentionShape{Batch: 1, Seq: 2048, Heads: 2, HeadDim: 64, BFloat16Operands: true}
	attentionCases(t, g, s, attTCTol, attTCBwdTol, false)
	// The f32 SIMT fallback at the same length, forward and backward.
	g.simtAttention = true
	defer func() { g.simtAttention = false }()
	if got := g.AttentionKernel(s); got != "simt f32" {
		t.Fatalf("AttentionKernel(%+v) with simtAttention = %q, want simt f32", s, got)
	}
	t.Run("SIMT", func(t *testing.T) { attentionCases(t, g, s, 5e-4, 5e-4, false) })
}

// TestStubGemmParity runs the GEMM parity cases through the stub cuBLAS
// (which computes on the host), checking the harness and the bf16 path
// without a GPU.
func TestStubGemmParity(t *testing.T) {
	d, _ := newStubDevice(t)
	gemmParity(t, d)
}

// gemmParity compares Gemm with the CPU backend for every transpose pair,
// padded pitches, strides and batches, in float32 and bfloat16.
func gemmParity(t *testing.T, g *Device) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, dt := range []device.DType{device.Float32, device.BFloat16} {
		for _, ta := range []bool{false, true} {
			for _, tb := range []bool{false, true} {
				m, n, k, batch := 67, 129, 45, 3
				lda, ldb := k+1, n+2
				if ta {
					lda = m + 1
				}
				if tb {
					ldb = k + 2
				}
				sa, sb, sc := 200*lda, 200*ldb, m*(n+3)
				h := f
				tol := 1e-4
				if dt == device.BFloat16 {
					h, tol = bf, 1e-3
				}
				checkCase(t, g, opCase{name: fmt.Sprintf("Gemm/%s/ta=%v/tb=%v", dt, ta, tb), tol: tol,
					ins: []hostBuf{h(randn(rng, sa*batch, 1)), h(randn(rng, sb*batch, 1)), f(randn(rng, sc*batch, 1))},
					run: func(d fullDevice, in, _ []device.Buffer) {
						d.Gemm(device.GemmArgs{TransA: ta, TransB: tb, M: m, N: n, K: k, Alpha: 0.5, Beta: 0.25,
							A: in[0], LDA: lda, StrideA: sa, B: in[1], LDB: ldb, StrideB: sb, C: in[2], LDC: n + 3, StrideC: sc, Batch: batch})
					}})
			}
		}
	}
}

// suiteCast rounds float32 to bfloat16 and back on the device and checks
// every value bit for bit against device.BFloat16FromFloat32.
func suiteCast(t *testing.T, g *Device) {
	rng := rand.New(rand.NewPCG(9, 10))
	x := randn(rng, 70001, 3)
	x[0], x[1], x[2] = float32(math.Inf(1)), float32(math.NaN()), 1+1.0/256
	src, _ := g.Alloc(device.Float32, len(x))
	mid, _ := g.Alloc(device.BFloat16, len(x))
	back, _ := g.Alloc(device.Float32, len(x))
	g.CopyFromHost(src, x)
	g.Cast(mid, src)
	g.Cast(back, mid)
	got := make([]float32, len(x))
	g.CopyToHost(got, back)
	if err := g.Synchronize(); err != nil {
		t.Fatal(err)
	}
	for i, v := range x {
		want := device.Float32FromBFloat16(device.BFloat16FromFloat32(v))
		if math.Float32bits(got[i]) != math.Float32bits(want) && !(want != want && got[i] != got[i]) {
			t.Fatalf("Cast(%v) = %v, want %v", v, got[i], want)
		}
	}
}

func TestArchAtLeast(t *testing.T) {
	for _, c := range []struct {
		arch string
		want bool
	}{
		{"sm_90", true}, {"sm_80", true}, {"sm_100", true}, {"sm_75", false}, {"sm_", false}, {"compute_90", false}, {"", false},
	} {
		if got := archAtLeast(c.arch, 80); got != c.want {
			t.Errorf("archAtLeast(%q, 80) = %v, want %v", c.arch, got, c.want)
		}
	}
}

// The CUDA backend names its attention kernels to device/profile.
var _ profile.AttentionKerneler = (*Device)(nil)

// TestAttentionKernel checks the kernel names the profile shows against
// the choice Attention makes: tensor cores for bf16 operands at head dims
// 64 and 128 on sm_80 and newer, SIMT otherwise, the composition for a
// head dim without a kernel.
func TestAttentionKernel(t *testing.T) {
	for _, c := range []struct {
		arch  string
		simt  bool
		shape device.AttentionShape
		want  string
	}{
		{"sm_90", false, device.AttentionShape{Batch: 8, Seq: 2048, Heads: 8, HeadDim: 64, BFloat16Operands: true}, "mma.sync bf16"},
		{"sm_80", false, device.AttentionShape{Batch: 1, Seq: 7, Heads: 1, HeadDim: 128, BFloat16Operands: true}, "mma.sync bf16"},
		{"sm_90", false, device.AttentionShape{Batch: 8, Seq: 2048, Heads: 8, HeadDim: 64}, "simt f32"},
		{"sm_90", true, device.AttentionShape{Batch: 8, Seq: 2048, Heads: 8, HeadDim: 64, BFloat16Operands: true}, "simt f32"},
		{"sm_75", false, device.AttentionShape{Batch: 1, Seq: 64, Heads: 1, HeadDim: 64, BFloat16Operands: true}, "simt f32"},
		{"sm_90", false, device.AttentionShape{Batch: 1, Seq: 64, Heads: 1, HeadDim: 96, BFloat16Operands: true}, "simt f32"},
		{"sm_90", false, device.AttentionShape{Batch: 1, Seq: 64, Heads: 1, HeadDim: 8, BFloat16Operands: true}, "composed"},
	} {
		d := &Device{arch: c.arch, simtAttention: c.simt}
		if got := d.AttentionKernel(c.shape); got != c.want {
			t.Errorf("%s simt=%v %+v: AttentionKernel = %q, want %q", c.arch, c.simt, c.shape, got, c.want)
		}
	}
}

// profileAttentionRows runs one forward and backward of s through
// device/profile on g and checks the rows: the kernel's name in the
// detail and the FLOPs of profile.AttentionFlops.
func profileAttentionRows(t *testing.T, g *Device, s device.AttentionShape) {
	p := profile.Wrap(g)
	n := s.Batch * s.Seq * s.Heads * s.HeadDim
	bufs := make([]device.Buffer, 9)
	for i := range bufs {
		m := n
		if i == 8 {
			m = s.Batch * s.Heads * s.Seq
		}
		b, err := p.Alloc(device.Float32, m)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Free(b)
		bufs[i] = b
	}
	q, k, v, o, dout, dq, dk, dv, lse := bufs[0], bufs[1], bufs[2], bufs[3], bufs[4], bufs[5], bufs[6], bufs[7], bufs[8]
	p.Record(true)
	p.Attention(o, lse, q, k, v, s, 0.125)
	p.AttentionBackward(dq, dk, dv, dout, q, k, v, o, lse, s, 0.125)
	p.Record(false)
	if err := p.Synchronize(); err != nil {
		t.Fatal(err)
	}
	detail := fmt.Sprintf("B%d T%d H%d D%d %s", s.Batch, s.Seq, s.Heads, s.HeadDim, g.AttentionKernel(s))
	rows := 0
	for _, op := range p.Ops() {
		if op.Name != "Attention" && op.Name != "AttentionBackward" {
			continue
		}
		rows++
		want := profile.AttentionFlops(s, op.Name == "AttentionBackward")
		if op.Detail != detail || op.Flops != want || op.Calls != 1 {
			t.Errorf("%s row: detail %q, flops %g, calls %d; want %q, %g, 1", op.Name, op.Detail, op.Flops, op.Calls, detail, want)
		}
	}
	if rows != 2 {
		t.Errorf("%d attention rows in %+v, want 2", rows, p.Ops())
	}
}
