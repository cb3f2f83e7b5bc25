package oraclestudy

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"

	"github.com/hilbert-ml/hilbert/internal/atomicfile"
	"github.com/hilbert-ml/hilbert/optim/geometry/oracle"
)

// Size is one synthetic gradient's shape: V rows of width D.
type Size struct{ V, D int }

// ParseSizes reads comma-separated sizes "VxD" (V >= 2, D >= 1).
func ParseSizes(s string) ([]Size, error) {
	var sizes []Size
	for _, size := range strings.Split(s, ",") {
		vs, ds, ok := strings.Cut(strings.TrimSpace(size), "x")
		v, err1 := strconv.Atoi(vs)
		d, err2 := strconv.Atoi(ds)
		if !ok || err1 != nil || err2 != nil || v < 2 || d < 1 {
			return nil, fmt.Errorf("size %q: want VxD with V >= 2, D >= 1", size)
		}
		sizes = append(sizes, Size{v, d})
	}
	return sizes, nil
}

// Timing solves a synthetic Zipf-frequency gradient of each size (samples
// positions summed into each) and writes the table to dir/timing.md,
// which it returns; each row also goes to log as it is measured.
func Timing(dir string, sizes []Size, samples int, opt oracle.Options, log io.Writer) (string, error) {
	var b strings.Builder
	threads := opt.Threads
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	fmt.Fprintf(&b, "Synthetic Zipf-frequency gradients (%d positions each), relative gap %g, %d threads, float64.\n\n", samples, opt.Tol, threads)
	b.WriteString("| V | d | rank | pairs | iterations | wall s | CPU s | gap | active pairs | Delta_RN/Delta_* | bound |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, s := range sizes {
		v, d := s.V, s.D
		g := zipfGradient(rand.New(rand.NewPCG(uint64(v), uint64(d))), v, d, samples)
		cpu0 := cpuSeconds()
		row, err := measure(g, v, d, opt)
		if err != nil {
			return "", fmt.Errorf("oraclestudy: %dx%d: %w", v, d, err)
		}
		cpuS := "-"
		if c := cpuSeconds() - cpu0; !math.IsNaN(c) {
			cpuS = fmt.Sprintf("%.1f", c)
		}
		line := fmt.Sprintf("| %d | %d | %d | %d | %d | %.2f | %s | %.1e | %d | %.5f | %.5f |\n",
			v, d, row.Rank, v*(v-1)/2, row.Iterations, row.SolveS, cpuS, row.Gap, row.Active, row.Ratio, row.Bound)
		b.WriteString(line)
		if log != nil {
			fmt.Fprint(log, line)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("oraclestudy: %w", err)
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, "timing.md"), []byte(b.String())); err != nil {
		return "", fmt.Errorf("oraclestudy: %w", err)
	}
	return b.String(), nil
}

// cpuSeconds returns the process's user + system CPU time from
// /proc/self/stat (Linux, clock ticks of 1/100 s), or NaN elsewhere.
func cpuSeconds() float64 {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return math.NaN()
	}
	// Fields after the command name, which is parenthesised and may hold
	// spaces: state is field 3, utime 14 and stime 15.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return math.NaN()
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return math.NaN()
	}
	u, err1 := strconv.ParseFloat(f[11], 64)
	s, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return math.NaN()
	}
	return (u + s) / 100
}

// zipfGradient is a synthetic head gradient: n positions with Gaussian
// hidden states, softmax probabilities around Zipf frequencies and Zipf
// targets, g_i = mean over positions of (p_i - [target = i]) h.
func zipfGradient(rng *rand.Rand, v, d, n int) []float64 {
	g := make([]float64, v*d)
	h := make([]float64, d)
	z := make([]float64, v)
	w := make([]float64, v)
	cum := make([]float64, v)
	var ws float64
	for i := range w {
		w[i] = 1 / float64(i+1)
		ws += w[i]
		cum[i] = ws
	}
	for t := 0; t < n; t++ {
		for c := range h {
			h[c] = rng.NormFloat64()
		}
		var zs float64
		for i := range z {
			z[i] = w[i] * math.Exp(0.5*rng.NormFloat64())
			zs += z[i]
		}
		u := rng.Float64() * ws
		tgt := min(v-1, sort.SearchFloat64s(cum, u))
		for i := range z {
			p := z[i] / zs
			if i == tgt {
				p--
			}
			row := g[i*d : (i+1)*d]
			for c, e := range h {
				row[c] += p * e / float64(n)
			}
		}
	}
	return g
}
