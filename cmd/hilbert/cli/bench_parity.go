package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"

	xcpu "golang.org/x/sys/cpu"

	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/internal/atomicfile"
)

// parityFlags are bench parity's settings.
type parityFlags struct {
	rows, python, script, coretype, blasDir, jsonOut, baseline, ompWait string
	reps, steps, threads                                                int
}

// paritySample is what one child process measured: its JSON line and its
// peak resident set (MiB; 0 where the system does not say).
type paritySample struct {
	out map[string]any
	rss float64
}

// parityRun is every sample of a run, by row and side.
type parityRun struct {
	rows                []parityRow
	hilbert, pytorch    [][]paritySample // [row][rep]
	baseline            [][]paritySample // nil without -baseline
	baselineName        string
	threads, reps       int
	coretype, torch     string
	ompWait             string
	loadStart, loadStop string
}

// parityHilbertCmd returns the command that runs this program with args;
// the command's test replaces it (the test binary is not hilbert).
var parityHilbertCmd = func(args []string) (*exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding this program to run its bench targets: %w", err)
	}
	return exec.Command(exe, args...), nil
}

// parityConfigHook, when set, changes the rows' sizes (the command's
// test makes them tiny).
var parityConfigHook func(parityConfig) parityConfig

// runBenchParity is the "parity" bench target: issue 24's table, Hilbert
// against PyTorch (scripts/parity/bench.py with Debian's python3-torch),
// every measure in its own process, the two sides taking turns.
func runBenchParity(args []string, stdout, stderr io.Writer) error {
	var f parityFlags
	fs := newFlagSet("bench parity", "", stderr)
	fs.StringVar(&f.rows, "rows", "all", "rows to run, comma-separated: names (gemm-2t, paper-d128, gen-b1, ...) or groups (gemm, paper, gpt2, llama, bf16, gen, all)")
	fs.IntVar(&f.reps, "reps", 3, "repetitions of each row; the sides take turns (Hilbert, PyTorch, then PyTorch, Hilbert) and the rows interleave")
	fs.IntVar(&f.steps, "steps", 3, "timed steps of each training measure (after one warm-up step)")
	fs.IntVar(&f.threads, "threads", runtime.NumCPU(), "threads of both sides (GOMAXPROCS, torch.set_num_threads); the GEMM rows also run at 1")
	fs.StringVar(&f.python, "python", "/usr/bin/python3", "the Python with torch (Debian's python3-torch)")
	fs.StringVar(&f.script, "script", "scripts/parity/bench.py", "PyTorch's side")
	fs.StringVar(&f.coretype, "coretype", "auto", "OPENBLAS_CORETYPE for PyTorch: auto (kept if set; where OpenBLAS would run its generic Prescott kernels, this CPU's: Cooperlake with AVX512-BF16, SkylakeX with AVX-512, Haswell with AVX2), none, or a name")
	fs.StringVar(&f.blasDir, "blas-dir", "/usr/lib/x86_64-linux-gnu/openblas-openmp", "put first on PyTorch's LD_LIBRARY_PATH where it exists (the OpenMP build of OpenBLAS; empty: leave it)")
	fs.StringVar(&f.ompWait, "omp-wait", "passive", "OMP_WAIT_POLICY for PyTorch unless the environment sets it: passive (its threads sleep at barriers, as Hilbert asks of its own OpenMP OpenBLAS: spinning threads on a busy machine cost PyTorch 3 to 8 times its speed), active, or empty to leave it")
	fs.StringVar(&f.jsonOut, "json", "", "also write every measure as a JSON line to this file")
	fs.StringVar(&f.baseline, "baseline", "", "another hilbert binary (a build of main, say) to run as a third side, taking turns with the other two; the table adds its medians and this binary's speedup over it")
	if stop, err := parseCommand(fs, args); stop {
		return err
	}
	if f.reps < 1 || f.steps < 1 || f.threads < 1 {
		return usageErr(fs.Name(), fmt.Errorf("-reps %d, -steps %d, -threads %d: want each >= 1", f.reps, f.steps, f.threads))
	}
	cfg := defaultParityConfig(f.threads)
	cfg.steps = f.steps
	if parityConfigHook != nil {
		cfg = parityConfigHook(cfg)
	}
	rows, bad := selectRows(parityRows(cfg), f.rows)
	if len(bad) > 0 || len(rows) == 0 {
		var names []string
		for _, r := range parityRows(cfg) {
			names = append(names, r.name)
		}
		return usageErr(fs.Name(), fmt.Errorf("-rows %q: no row or group %q (rows: %s; groups: gemm, paper, gpt2, llama, bf16, gen, all)", f.rows, bad, strings.Join(names, ", ")))
	}
	for _, p := range []struct{ flag, path string }{{"-python", f.python}, {"-script", f.script}, {"-baseline", f.baseline}} {
		if p.path == "" {
			continue
		}
		if _, err := os.Stat(p.path); err != nil {
			return fmt.Errorf("%s %s: %w (PyTorch's side: Debian's python3-torch and scripts/parity/bench.py; run from the repository root or give -script)", p.flag, p.path, err)
		}
	}
	run := &parityRun{rows: rows, threads: f.threads, reps: f.reps, coretype: parityCoretype(f.coretype)}
	if err := run.measure(f, stderr); err != nil {
		return err
	}
	lines := run.lines()
	if f.jsonOut != "" {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		for _, l := range lines {
			if err := enc.Encode(l); err != nil {
				return err
			}
		}
		if err := atomicfile.WriteFile(f.jsonOut, buf.Bytes()); err != nil {
			return fmt.Errorf("-json: %w", err)
		}
	}
	return run.writeTable(stdout, lines)
}

// parityCoretype resolves -coretype to the OPENBLAS_CORETYPE PyTorch gets
// ("" to leave the environment as it is).
func parityCoretype(flagValue string) string {
	switch flagValue {
	case "none":
		return ""
	case "auto":
	default:
		return flagValue
	}
	if v := os.Getenv("OPENBLAS_CORETYPE"); v != "" {
		return v
	}
	if !cpu.OpenBLASGenericCore(cpu.OpenBLASCoreName()) {
		return ""
	}
	switch {
	case xcpu.X86.HasAVX512BF16:
		return "Cooperlake"
	case xcpu.X86.HasAVX512F:
		return "SkylakeX"
	case xcpu.X86.HasAVX2:
		return "Haswell"
	}
	return ""
}

// measure runs every row reps times, the rows interleaved and the sides
// taking turns (the first side of a repetition goes last in the next),
// and keeps the samples.
func (r *parityRun) measure(f parityFlags, stderr io.Writer) error {
	r.hilbert = make([][]paritySample, len(r.rows))
	r.pytorch = make([][]paritySample, len(r.rows))
	sides := []string{"hilbert", "pytorch"}
	if f.baseline != "" {
		r.baseline = make([][]paritySample, len(r.rows))
		r.baselineName = f.baseline
		sides = append(sides, "baseline")
	}
	r.loadStart = loadAverage()
	pyEnv := os.Environ()
	if r.coretype != "" {
		pyEnv = append(pyEnv, "OPENBLAS_CORETYPE="+r.coretype)
	}
	r.ompWait = os.Getenv("OMP_WAIT_POLICY")
	if r.ompWait == "" && f.ompWait != "" {
		r.ompWait = f.ompWait
		pyEnv = append(pyEnv, "OMP_WAIT_POLICY="+f.ompWait)
	}
	if f.blasDir != "" {
		if _, err := os.Stat(f.blasDir); err == nil {
			pyEnv = append(pyEnv, "LD_LIBRARY_PATH="+f.blasDir+prefixed(":", os.Getenv("LD_LIBRARY_PATH")))
		}
	}
	goEnv := func(cmd *exec.Cmd) {
		if cmd.Env == nil {
			cmd.Env = os.Environ()
		}
		cmd.Env = append(cmd.Env, "GOMAXPROCS="+strconv.Itoa(r.threads))
	}
	for rep := range r.reps {
		for i, row := range r.rows {
			for k := range sides {
				side := sides[(k+rep)%len(sides)]
				var cmd *exec.Cmd
				var into *[]paritySample
				switch side {
				case "hilbert":
					c, err := parityHilbertCmd(append([]string{"bench"}, row.hilbert...))
					if err != nil {
						return err
					}
					cmd, into = c, &r.hilbert[i]
					goEnv(cmd)
				case "baseline":
					cmd, into = exec.Command(f.baseline, append([]string{"bench"}, row.hilbert...)...), &r.baseline[i]
					goEnv(cmd)
				default:
					cmd, into = exec.Command(f.python, append([]string{f.script}, row.pytorch...)...), &r.pytorch[i]
					cmd.Env = pyEnv
				}
				start := time.Now()
				s, err := runParityChild(cmd)
				if err != nil {
					return fmt.Errorf("bench parity: row %s, %s side: %w", row.name, side, err)
				}
				*into = append(*into, s)
				if v, ok := s.out["torch"].(string); ok && side == "pytorch" {
					r.torch = v
				}
				m := row.measures[0]
				key := m.hilbertKey
				if side == "pytorch" {
					key = m.pytorchKey
				}
				v, _ := s.out[key].(float64)
				fmt.Fprintf(stderr, "bench parity: rep %d/%d %s %s: %s %s, peak RSS %.0f MiB (%.1f s)\n",
					rep+1, r.reps, row.name, side, formatNumber(v), m.label, s.rss, time.Since(start).Seconds())
			}
		}
	}
	r.loadStop = loadAverage()
	return nil
}

// runParityChild runs cmd and returns the last JSON line it printed and
// its peak RSS; a failure carries the end of its stderr.
func runParityChild(cmd *exec.Cmd) (paritySample, error) {
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if err != nil {
		tail := errOut.String()
		if len(tail) > 2000 {
			tail = "..." + tail[len(tail)-2000:]
		}
		return paritySample{}, fmt.Errorf("%s: %w\n%s", strings.Join(cmd.Args, " "), err, tail)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var s paritySample
	if err := json.Unmarshal([]byte(lines[0]), &s.out); err != nil {
		return paritySample{}, fmt.Errorf("%s: its first output line is not JSON (%v): %q", strings.Join(cmd.Args, " "), err, lines[0])
	}
	s.rss = peakRSSMiB(cmd.ProcessState)
	return s, nil
}

func prefixed(sep, s string) string {
	if s == "" {
		return ""
	}
	return sep + s
}

// loadAverage is the first three fields of /proc/loadavg, "" where there
// is none.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}
