package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/cpu"
)

func init() {
	register(subcommand{
		name:    "bench",
		summary: "measure kernel throughput: bench <target> [flags] (targets: " + strings.Join(benchTargetNames(), ", ") + ")",
		run:     runBench,
	})
}

// benchTarget is one thing "hilbert bench" can measure.
type benchTarget struct {
	summary string
	run     func(args []string, stdout, stderr io.Writer) error
}

// benchTargets maps the word after "bench" to its runner. Add new targets
// here; each parses its own flags.
var benchTargets = map[string]benchTarget{
	"gemm": {
		summary: "native, bfloat16, OpenBLAS and gonum GEMM GFLOP/s on the model's products, one JSON line per shape with native_over_openblas and bf16_over_native, then a summary line",
		run:     runBenchGemm,
	},
	"model": {
		summary: "a model's forward+backward or whole update (-update recipe|adamw) tokens/s for a preset (-preset cpu-128 -batch 8 -seq 256), one JSON line",
		run:     runBenchModel,
	},
	"parity": {
		summary: "issue 24's table: every measure (GEMM, paper update, GPT-2, bf16, generation, peak RSS) against PyTorch (scripts/parity/bench.py), interleaved repetitions, medians and ranges, speedups",
		run:     runBenchParity,
	},
	"generate": {
		summary: "greedy generation with the KV cache (-model gpt2 -preset gpt2 -batch 1 -prompt 64 -tokens 32): prefill and decode tokens/s, ms a token, one JSON line",
		run:     runBenchGenerate,
	},
}

func benchTargetNames() []string {
	return slices.Sorted(maps.Keys(benchTargets))
}

// runBench dispatches "hilbert bench <target> [flags]".
func runBench(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintln(stderr, "usage: hilbert bench <target> [flags]\n\ntargets:")
		for _, n := range benchTargetNames() {
			fmt.Fprintf(stderr, "  %-8s %s\n", n, benchTargets[n].summary)
		}
		if len(args) == 0 {
			return usageErr("bench", errors.New("missing bench target"))
		}
		return nil
	}
	t, ok := benchTargets[args[0]]
	if !ok {
		return usageErr("bench", fmt.Errorf("unknown bench target %q (want one of %s)", args[0], strings.Join(benchTargetNames(), ", ")))
	}
	return t.run(args[1:], stdout, stderr)
}

// gemmShape is one product to time: C (M x N) = op(A) (M x K) * op(B) (K x N).
type gemmShape struct {
	name           string
	m, n, k        int
	transA, transB bool
}

// parseGemmShapes parses a comma-separated list of MxNxK shapes, each
// optionally followed by ":" and two letters giving op(A) and op(B), n for
// as stored or t for transposed ("2048x50257x128:nt" is the LM head with
// its weight stored vocab x d).
func parseGemmShapes(list string) ([]gemmShape, error) {
	var shapes []gemmShape
	for _, field := range strings.Split(list, ",") {
		field = strings.TrimSpace(field)
		if field == "" {
			continue
		}
		dims, ops, hasOps := strings.Cut(field, ":")
		parts := strings.Split(strings.ToLower(dims), "x")
		if len(parts) != 3 {
			return nil, fmt.Errorf("shape %q: want MxNxK", field)
		}
		var v [3]int
		for i, p := range parts {
			x, err := strconv.Atoi(p)
			if err != nil || x < 1 {
				return nil, fmt.Errorf("shape %q: dimension %q is not a positive integer", field, p)
			}
			v[i] = x
		}
		s := gemmShape{name: dims, m: v[0], n: v[1], k: v[2]}
		if hasOps {
			ops = strings.ToLower(ops)
			if len(ops) != 2 || strings.Trim(ops, "nt") != "" {
				return nil, fmt.Errorf("shape %q: transposes %q: want two letters of n and t, like nt", field, ops)
			}
			s.transA, s.transB = ops[0] == 't', ops[1] == 't'
			s.name = field
		}
		shapes = append(shapes, s)
	}
	if len(shapes) == 0 {
		return nil, fmt.Errorf("no shapes in %q", list)
	}
	return shapes, nil
}

// defaultGemmShapes are the products of the model's training step, each
// with the transposes the code uses: a GPT-2-small projection, a square, the
// LM head at d 128 and 512 in its three products (autograd's fused
// LinearCrossEntropy: logits = X W^T, dX = dlogits W, dW^T = X^T dlogits,
// W stored vocab x d), and attention's per-(batch, head) products at T 256
// and 2048, head dim 64 and 128 (S = Q K^T and dP = dO V^T; O = P V and
// dQ = dS K; dV = P^T dO and dK = dS^T Q), run as whole T x T products.
var defaultGemmShapes = []struct{ shape, role string }{
	{"2048x768x768", "projection (tokens x d x d)"},
	{"512x512x512", "square"},
	{"2048x50257x128:nt", "head d128 forward: logits = X W^T"},
	{"2048x128x50257:nn", "head d128 dX = dlogits W"},
	{"128x50257x2048:tn", "head d128 dW^T = X^T dlogits"},
	{"2048x50257x512:nt", "head d512 forward: logits = X W^T"},
	{"2048x512x50257:nn", "head d512 dX = dlogits W"},
	{"512x50257x2048:tn", "head d512 dW^T = X^T dlogits"},
	{"256x256x64:nt", "attention T256 D64: Q K^T, dO V^T"},
	{"256x64x256:nn", "attention T256 D64: P V, dS K"},
	{"256x64x256:tn", "attention T256 D64: P^T dO, dS^T Q"},
	{"256x256x128:nt", "attention T256 D128: Q K^T, dO V^T"},
	{"256x128x256:nn", "attention T256 D128: P V, dS K"},
	{"256x128x256:tn", "attention T256 D128: P^T dO, dS^T Q"},
	{"2048x2048x64:nt", "attention T2048 D64: Q K^T, dO V^T"},
	{"2048x64x2048:nn", "attention T2048 D64: P V, dS K"},
	{"2048x64x2048:tn", "attention T2048 D64: P^T dO, dS^T Q"},
	{"2048x2048x128:nt", "attention T2048 D128: Q K^T, dO V^T"},
	{"2048x128x2048:nn", "attention T2048 D128: P V, dS K"},
	{"2048x128x2048:tn", "attention T2048 D128: P^T dO, dS^T Q"},
}

func defaultGemmShapeList() string {
	var s []string
	for _, d := range defaultGemmShapes {
		s = append(s, d.shape)
	}
	return strings.Join(s, ",")
}

// gemmImpl is one GEMM the bench can time: a float32 one (run), or the
// bfloat16 one (run16, on the operands rounded to bfloat16 beforehand).
type gemmImpl struct {
	name  string
	run   func(tA, tB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int)
	run16 func(tA, tB bool, m, n, k int, alpha float32, a []uint16, lda int, b []uint16, ldb int, beta float32, c []float32, ldc int)
}

// gemmResult is the JSON line printed for one shape. GFLOP/s are from the
// fastest timed repetition, the medians show the spread; a GEMM that is
// not available or not asked for is null. native_over_openblas is the
// ratio of the two best rates from the same run, bf16_over_native that of
// the bfloat16 GEMM (Device.Gemm's on bfloat16 operands: bf16_kernel, or
// "float32" where it widens them) to the native float32 GEMM.
type gemmResult struct {
	Shape              string   `json:"shape"`
	Role               string   `json:"role,omitempty"`
	M                  int      `json:"m"`
	N                  int      `json:"n"`
	K                  int      `json:"k"`
	Trans              string   `json:"trans"`
	NativeGFLOPS       *float64 `json:"native_gflops"`
	BF16GFLOPS         *float64 `json:"bf16_gflops"`
	OpenBLASGFLOPS     *float64 `json:"openblas_gflops"`
	GoGFLOPS           *float64 `json:"go_gflops"`
	NativeOverOpenBLAS *float64 `json:"native_over_openblas"`
	BF16OverNative     *float64 `json:"bf16_over_native"`
	NativeMedian       *float64 `json:"native_gflops_median"`
	BF16Median         *float64 `json:"bf16_gflops_median"`
	OpenBLASMedian     *float64 `json:"openblas_gflops_median"`
	GoMedian           *float64 `json:"go_gflops_median"`
	MedianRatio        *float64 `json:"native_over_openblas_median"`
	BF16MedianRatio    *float64 `json:"bf16_over_native_median"`
	Reps               gemmReps `json:"reps"`
	Gemm               string   `json:"gemm"`
	NativeKernel       string   `json:"native_kernel"`
	BF16Kernel         string   `json:"bf16_kernel"`
	Threads            int      `json:"threads"`
}

// gemmReps is how many timed repetitions each GEMM ran.
type gemmReps struct {
	Native   int `json:"native,omitempty"`
	BF16     int `json:"bf16,omitempty"`
	OpenBLAS int `json:"openblas,omitempty"`
	Go       int `json:"go,omitempty"`
}

// runBenchGemm times each available GEMM (native, OpenBLAS, gonum) on the
// same operands. After a warm-up they take turns, the order rotating every
// repetition, so that a noisy machine penalises all alike; each stops after
// -reps repetitions or once it has used -budget (at least one).
func runBenchGemm(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("bench gemm", "", stderr)
	shapeList := fs.String("shapes", defaultGemmShapeList(), "comma-separated MxNxK[:nt] shapes (op letters: n as stored, t transposed); the default is the model's training-step products")
	gemmList := fs.String("gemms", "native,bf16,openblas,go", "GEMMs to time: native, bf16 (Device.Gemm on bfloat16 operands), openblas (when it loads), go (gonum)")
	reps := fs.Int("reps", 10, "most timed repetitions per GEMM and shape")
	warmup := fs.Int("warmup", 1, "untimed repetitions per GEMM and shape before timing")
	budget := fs.Duration("budget", 5*time.Second, "timed repetitions stop once a GEMM has used this long on a shape (after at least one)")
	threads := fs.Int("threads", 0, "kernel and OpenBLAS threads (0: GOMAXPROCS)")
	if stop, err := parseCommand(fs, args); stop {
		return err
	}
	if *reps < 1 || *warmup < 0 {
		return usageErr(fs.Name(), fmt.Errorf("-reps %d, -warmup %d: want reps >= 1 and warmup >= 0", *reps, *warmup))
	}
	shapes, err := parseGemmShapes(*shapeList)
	if err != nil {
		return err
	}
	cpu.New()
	if err := cpu.GemmError(); err != nil {
		fmt.Fprintf(stderr, "hilbert bench gemm: warning: %v\n", err)
	}
	cpu.SetThreads(*threads)
	var impls []gemmImpl
	core := "" // OpenBLAS's kernel set, when it is timed
	for _, name := range strings.Split(*gemmList, ",") {
		switch strings.TrimSpace(name) {
		case "native":
			impls = append(impls, gemmImpl{name: "native", run: cpu.SgemmNative})
		case "bf16":
			impls = append(impls, gemmImpl{name: "bf16", run16: cpu.GemmBFloat16})
		case "openblas":
			if !cpu.SgemmOpenBLAS(false, false, 1, 1, 1, 1, []float32{1}, 1, []float32{1}, 1, 0, []float32{0}, 1) {
				fmt.Fprintf(stderr, "hilbert bench gemm: OpenBLAS is not loaded (%s); openblas_gflops is null; %s\n", cpu.OpenBLASDescription(), cpu.OpenBLASMissing)
				continue
			}
			core = cpu.OpenBLASCoreName()
			fmt.Fprintf(stderr, "hilbert bench gemm: OpenBLAS: %s (kernels: %s)\n", cpu.OpenBLASDescription(), orUnknown(core))
			if w := openBLASCoreWarning(core); w != "" {
				fmt.Fprintf(stderr, "hilbert bench gemm: warning: %s\n", w)
			}
			impls = append(impls, gemmImpl{name: "openblas", run: func(tA, tB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
				cpu.SgemmOpenBLAS(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
			}})
		case "go", "gonum":
			impls = append(impls, gemmImpl{name: "go", run: cpu.SgemmGonum})
		case "":
		default:
			return fmt.Errorf("-gemms: unknown GEMM %q (want native, bf16, openblas or go)", name)
		}
	}
	if len(impls) == 0 {
		return fmt.Errorf("-gemms %q: no GEMM to time", *gemmList)
	}
	enc := json.NewEncoder(stdout)
	var results []gemmResult
	for _, s := range shapes {
		res, err := benchGemmShape(s, impls, *reps, *warmup, *budget)
		if err != nil {
			return err
		}
		if err := enc.Encode(res); err != nil {
			return err
		}
		results = append(results, res)
	}
	return enc.Encode(summarizeGemm(results, core))
}

// gemmSummary is the last line "bench gemm" prints: the worst shape for
// the native GEMM against OpenBLAS (best rates, and medians) and the
// OpenBLAS kernel set the comparison ran against. The ratios and shapes
// are null when OpenBLAS was not timed; openblas_coretype is null when it
// was not timed or does not name its kernels.
type gemmSummary struct {
	Summary             bool     `json:"summary"`
	Shapes              int      `json:"shapes"`
	MinRatio            *float64 `json:"min_native_over_openblas"`
	ShapeAtMin          *string  `json:"shape_at_min"`
	MinMedianRatio      *float64 `json:"min_native_over_openblas_median"`
	ShapeAtMinMedian    *string  `json:"shape_at_min_median"`
	OpenBLASCoreType    *string  `json:"openblas_coretype"`
	OpenBLASGenericCore bool     `json:"openblas_generic_core"`
	MinBF16Ratio        *float64 `json:"min_bf16_over_native"`
	ShapeAtMinBF16      *string  `json:"shape_at_min_bf16"`
	NativeKernel        string   `json:"native_kernel"`
	BF16Kernel          string   `json:"bf16_kernel"`
	Gemm                string   `json:"gemm"`
	Threads             int      `json:"threads"`
}

// summarizeGemm builds the summary line of the per-shape results; core is
// OpenBLAS's kernel set ("" when unknown or not timed).
func summarizeGemm(results []gemmResult, core string) gemmSummary {
	sum := gemmSummary{Summary: true, Shapes: len(results), Gemm: cpu.GemmName(), Threads: cpu.Threads(), BF16Kernel: cpu.BFloat16Kernel()}
	sum.NativeKernel, _, _ = cpu.NativeKernel()
	if core != "" {
		sum.OpenBLASCoreType = &core
		sum.OpenBLASGenericCore = cpu.OpenBLASGenericCore(core)
	}
	for i := range results {
		r := &results[i]
		if r.NativeOverOpenBLAS != nil && (sum.MinRatio == nil || *r.NativeOverOpenBLAS < *sum.MinRatio) {
			sum.MinRatio, sum.ShapeAtMin = r.NativeOverOpenBLAS, &r.Shape
		}
		if r.MedianRatio != nil && (sum.MinMedianRatio == nil || *r.MedianRatio < *sum.MinMedianRatio) {
			sum.MinMedianRatio, sum.ShapeAtMinMedian = r.MedianRatio, &r.Shape
		}
		if r.BF16OverNative != nil && (sum.MinBF16Ratio == nil || *r.BF16OverNative < *sum.MinBF16Ratio) {
			sum.MinBF16Ratio, sum.ShapeAtMinBF16 = r.BF16OverNative, &r.Shape
		}
	}
	return sum
}

// openBLASCoreWarning explains why a comparison against OpenBLAS's generic
// kernel set is unfair, and how to fix it; "" for any other set.
func openBLASCoreWarning(core string) string {
	if !cpu.OpenBLASGenericCore(core) {
		return ""
	}
	return fmt.Sprintf("OpenBLAS runs its generic %s kernels (SSE3: it did not recognise this CPU, or OPENBLAS_CORETYPE asked for them), about 5 times slower than its AVX-512 ones, so native_over_openblas overstates the native GEMM: rerun with OPENBLAS_CORETYPE set to this CPU's kernel set (Cooperlake or SkylakeX for AVX-512, Haswell for AVX2)", core)
}

func orUnknown(s string) string {
	if s == "" {
		return "not reported"
	}
	return s
}

// benchGemmShape measures one shape on each GEMM.
//
// funclen: the setup, the timing loop and the result's fields read best in
// one piece (the float32 and bfloat16 GEMMs share all three).
func benchGemmShape(s gemmShape, impls []gemmImpl, reps, warmup int, budget time.Duration) (gemmResult, error) {
	lda, ldb := s.k, s.n
	if s.transA {
		lda = s.m
	}
	if s.transB {
		ldb = s.k
	}
	a, b := benchFill(s.m*s.k, 1), benchFill(s.k*s.n, 2)
	var a16, b16 []uint16
	for _, im := range impls {
		if im.run16 != nil && a16 == nil {
			a16, b16 = toBFloat16(a), toBFloat16(b)
		}
	}
	outs := make([][]float32, len(impls))
	times := make([][]time.Duration, len(impls))
	spent := make([]time.Duration, len(impls))
	once := func(i int) time.Duration {
		t0 := time.Now()
		if impls[i].run16 != nil {
			impls[i].run16(s.transA, s.transB, s.m, s.n, s.k, 1, a16, lda, b16, ldb, 0, outs[i], s.n)
		} else {
			impls[i].run(s.transA, s.transB, s.m, s.n, s.k, 1, a, lda, b, ldb, 0, outs[i], s.n)
		}
		return time.Since(t0)
	}
	for i := range impls {
		outs[i] = make([]float32, s.m*s.n)
		for w := 0; w < warmup; w++ {
			if once(i) > budget/2 {
				break // a slow GEMM: one warm-up is enough
			}
		}
	}
	for r := 0; r < reps; r++ {
		for j := range impls {
			i := (j + r) % len(impls)
			if len(times[i]) > 0 && spent[i] >= budget {
				continue
			}
			d := once(i)
			times[i] = append(times[i], d)
			spent[i] += d
		}
	}
	trans := map[bool]string{false: "n", true: "t"}
	res := gemmResult{
		Shape: s.name, M: s.m, N: s.n, K: s.k, Trans: trans[s.transA] + trans[s.transB],
		Gemm: cpu.GemmName(), Threads: cpu.Threads(),
	}
	res.NativeKernel, _, _ = cpu.NativeKernel()
	for _, d := range defaultGemmShapes {
		if d.shape == s.name || d.shape == s.name+":nn" {
			res.Role = d.role
		}
	}
	flops := 2 * float64(s.m) * float64(s.n) * float64(s.k)
	for i, im := range impls {
		// Every GEMM computed the same product: they must agree to float32
		// rounding, the bfloat16 one to the rounding of its operands
		// (2^-8 relative each).
		tol := 1e-3
		if im.run16 != nil || impls[0].run16 != nil {
			tol = 0x1p-6
		}
		if d := maxRelDiff(outs[i], outs[0]); d > tol {
			return res, fmt.Errorf("shape %s: %s and %s products differ (max relative difference %.3g)", s.name, im.name, impls[0].name, d)
		}
		best, median := gflops(flops, times[i])
		switch im.name {
		case "native":
			res.NativeGFLOPS, res.NativeMedian, res.Reps.Native = &best, &median, len(times[i])
		case "bf16":
			res.BF16GFLOPS, res.BF16Median, res.Reps.BF16 = &best, &median, len(times[i])
			res.BF16Kernel = cpu.BFloat16Kernel()
		case "openblas":
			res.OpenBLASGFLOPS, res.OpenBLASMedian, res.Reps.OpenBLAS = &best, &median, len(times[i])
		case "go":
			res.GoGFLOPS, res.GoMedian, res.Reps.Go = &best, &median, len(times[i])
		}
	}
	if res.NativeGFLOPS != nil && res.OpenBLASGFLOPS != nil {
		r, rm := round3(*res.NativeGFLOPS / *res.OpenBLASGFLOPS), round3(*res.NativeMedian / *res.OpenBLASMedian)
		res.NativeOverOpenBLAS, res.MedianRatio = &r, &rm
	}
	if res.NativeGFLOPS != nil && res.BF16GFLOPS != nil {
		r, rm := round3(*res.BF16GFLOPS / *res.NativeGFLOPS), round3(*res.BF16Median / *res.NativeMedian)
		res.BF16OverNative, res.BF16MedianRatio = &r, &rm
	}
	return res, nil
}

// toBFloat16 rounds s to bfloat16.
func toBFloat16(s []float32) []uint16 {
	h := make([]uint16, len(s))
	for i, v := range s {
		h[i] = device.BFloat16FromFloat32(v)
	}
	return h
}

// gflops returns the throughput of the fastest and of the median run,
// rounded to 3 decimals.
func gflops(flops float64, ts []time.Duration) (best, median float64) {
	rate := func(d time.Duration) float64 { return round3(flops / max(d.Seconds(), 1e-9) / 1e9) }
	return rate(slices.Min(ts)), rate(medianDuration(ts))
}

func round3(x float64) float64 { return math.Round(x*1000) / 1000 }

// benchFill returns n deterministic values in [-1, 1).
func benchFill(n int, seed uint32) []float32 {
	s := make([]float32, n)
	x := seed*2654435761 + 1
	for i := range s {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		s[i] = float32(x)/(1<<31) - 1
	}
	return s
}

// maxRelDiff returns max |a-b| relative to the largest |b|.
func maxRelDiff(a, b []float32) float64 {
	var d, m float64
	for i := range a {
		d = max(d, math.Abs(float64(a[i])-float64(b[i])))
		m = max(m, math.Abs(float64(b[i])))
	}
	if m == 0 {
		return d
	}
	return d / m
}
