package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
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
		summary: "framework GEMM (Device.Gemm) vs a direct OpenBLAS call, one JSON line per shape",
		run:     runBenchGemm,
	},
	"model": {
		summary: "transformer forward+backward tokens/s for a preset (-preset cpu-128 -batch 8 -seq 256), one JSON line",
		run:     runBenchModel,
	},
}

func benchTargetNames() []string {
	names := make([]string, 0, len(benchTargets))
	for n := range benchTargets {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// runBench dispatches "hilbert bench <target> [flags]".
func runBench(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintln(stderr, "usage: hilbert bench <target> [flags]\n\ntargets:")
		for _, n := range benchTargetNames() {
			fmt.Fprintf(stderr, "  %-8s %s\n", n, benchTargets[n].summary)
		}
		if len(args) == 0 {
			return errors.New("missing bench target")
		}
		return nil
	}
	t, ok := benchTargets[args[0]]
	if !ok {
		return fmt.Errorf("unknown bench target %q (want one of %s)", args[0], strings.Join(benchTargetNames(), ", "))
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

// gemmResult is the JSON line printed for one shape. GFLOP/s are from the
// best of the timed repetitions; the medians show the spread. OpenBLAS
// fields are null when OpenBLAS is not loaded.
type gemmResult struct {
	Shape           string   `json:"shape"`
	M               int      `json:"m"`
	N               int      `json:"n"`
	K               int      `json:"k"`
	Trans           string   `json:"trans"`
	FrameworkGFLOPS float64  `json:"framework_gflops"`
	OpenBLASGFLOPS  *float64 `json:"openblas_gflops"`
	Ratio           *float64 `json:"ratio"`
	FrameworkMedian float64  `json:"framework_gflops_median"`
	OpenBLASMedian  *float64 `json:"openblas_gflops_median"`
	Reps            int      `json:"reps"`
	Gemm            string   `json:"gemm"`
	Threads         int      `json:"threads"`
}

// runBenchGemm times the framework's GEMM against a direct OpenBLAS call
// on the same operands. After a warm-up the two alternate, each going
// first on every other repetition, so that a noisy machine penalises both
// alike.
func runBenchGemm(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench gemm", flag.ContinueOnError)
	fs.SetOutput(stderr)
	shapeList := fs.String("shapes", "2048x768x768,512x512x512", "comma-separated MxNxK[:nt] shapes (op letters: n as stored, t transposed)")
	reps := fs.Int("reps", 10, "timed repetitions per GEMM and shape")
	warmup := fs.Int("warmup", 2, "untimed repetitions per GEMM and shape before timing")
	threads := fs.Int("threads", 0, "kernel and OpenBLAS threads (0: GOMAXPROCS)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *reps < 1 || *warmup < 0 {
		return fmt.Errorf("-reps %d, -warmup %d: want reps >= 1 and warmup >= 0", *reps, *warmup)
	}
	shapes, err := parseGemmShapes(*shapeList)
	if err != nil {
		return err
	}
	dev := cpu.New()
	if err := cpu.GemmError(); err != nil {
		fmt.Fprintf(stderr, "hilbert bench gemm: warning: %v\n", err)
	}
	cpu.SetThreads(*threads)
	haveBLAS := cpu.SgemmOpenBLAS(false, false, 1, 1, 1, 1, []float32{1}, 1, []float32{1}, 1, 0, []float32{0}, 1)
	if !haveBLAS {
		fmt.Fprintf(stderr, "hilbert bench gemm: OpenBLAS is not loaded (GEMM %s); openblas_gflops is null\n", cpu.GemmName())
	}
	enc := json.NewEncoder(stdout)
	for _, s := range shapes {
		res, err := benchGemmShape(dev, s, *reps, *warmup, haveBLAS)
		if err != nil {
			return err
		}
		if err := enc.Encode(res); err != nil {
			return err
		}
	}
	return nil
}

// benchGemmShape measures one shape.
func benchGemmShape(dev device.Device, s gemmShape, reps, warmup int, haveBLAS bool) (gemmResult, error) {
	lda, ldb := s.k, s.n
	if s.transA {
		lda = s.m
	}
	if s.transB {
		ldb = s.k
	}
	a, b := benchFill(s.m*s.k, 1), benchFill(s.k*s.n, 2)
	cFw, cBLAS := make([]float32, s.m*s.n), make([]float32, s.m*s.n)
	g := device.GemmArgs{
		TransA: s.transA, TransB: s.transB, M: s.m, N: s.n, K: s.k, Alpha: 1,
		A: cpu.NewFloat32(a), LDA: lda, B: cpu.NewFloat32(b), LDB: ldb, C: cpu.NewFloat32(cFw), LDC: s.n,
	}
	framework := func() time.Duration {
		t0 := time.Now()
		dev.Gemm(g)
		if err := dev.Synchronize(); err != nil {
			panic(err) // the CPU device never reports one
		}
		return time.Since(t0)
	}
	direct := func() time.Duration {
		t0 := time.Now()
		cpu.SgemmOpenBLAS(s.transA, s.transB, s.m, s.n, s.k, 1, a, lda, b, ldb, 0, cBLAS, s.n)
		return time.Since(t0)
	}
	for i := 0; i < warmup; i++ {
		framework()
		if haveBLAS {
			direct()
		}
	}
	var tFw, tBLAS []time.Duration
	for i := 0; i < reps; i++ {
		if i%2 == 0 || !haveBLAS {
			tFw = append(tFw, framework())
			if haveBLAS {
				tBLAS = append(tBLAS, direct())
			}
		} else {
			tBLAS = append(tBLAS, direct())
			tFw = append(tFw, framework())
		}
	}
	trans := map[bool]string{false: "n", true: "t"}
	flops := 2 * float64(s.m) * float64(s.n) * float64(s.k)
	best, median := gflops(flops, tFw)
	res := gemmResult{
		Shape: s.name, M: s.m, N: s.n, K: s.k, Trans: trans[s.transA] + trans[s.transB],
		FrameworkGFLOPS: best, FrameworkMedian: median,
		Reps: reps, Gemm: cpu.GemmName(), Threads: cpu.Threads(),
	}
	if haveBLAS {
		// Both computed the same product: they must agree to float32
		// rounding (identical when the framework runs OpenBLAS too).
		if d := maxRelDiff(cFw, cBLAS); d > 1e-3 {
			return res, fmt.Errorf("shape %s: framework and OpenBLAS products differ (max relative difference %.3g)", s.name, d)
		}
		b, m := gflops(flops, tBLAS)
		ratio := round3(best / b)
		res.OpenBLASGFLOPS, res.OpenBLASMedian, res.Ratio = &b, &m, &ratio
	}
	return res, nil
}

// gflops returns the throughput of the fastest and of the median run,
// rounded to 3 decimals.
func gflops(flops float64, ts []time.Duration) (best, median float64) {
	s := slices.Clone(ts)
	slices.Sort(s)
	rate := func(d time.Duration) float64 { return round3(flops / max(d.Seconds(), 1e-9) / 1e9) }
	return rate(s[0]), rate(s[len(s)/2])
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
