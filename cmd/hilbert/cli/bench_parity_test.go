package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// fakeBenchPy stands in for scripts/parity/bench.py: the n-th call prints
// 10 n in every measure, so that the PyTorch side's numbers differ from
// call to call.
const fakeBenchPy = `n=$(cat "$COUNT" 2>/dev/null || echo 0); n=$((n+1)); echo $n > "$COUNT"; v=$((10*n))
case "$1" in
gemm) echo "{\"gflops\": $v, \"torch\": \"fake\"}" ;;
paper|gpt2|llama) echo "{\"tokens_per_s\": $v, \"torch\": \"fake\"}" ;;
generate) echo "{\"decode_tokens_per_s\": $v, \"prefill_tokens_per_s\": $v, \"ms_per_token\": $v, \"torch\": \"fake\"}" ;;
*) echo "unknown mode $1" >&2; exit 2 ;;
esac
`

// fakeBaseline stands in for another hilbert binary (-baseline): called
// as "bench TARGET ...", it prints 5 n for its n-th call.
const fakeBaseline = `#!/bin/sh
n=$(cat "$COUNT_BASE" 2>/dev/null || echo 0); n=$((n+1)); echo $n > "$COUNT_BASE"; v=$((5*n))
case "$2" in
gemm) echo "{\"native_gflops_median\": $v}" ;;
model) echo "{\"tokens_per_s\": $v}" ;;
generate) echo "{\"decode_tokens_per_s\": $v, \"prefill_tokens_per_s\": $v, \"ms_per_token\": $v}" ;;
*) echo "unknown target $2" >&2; exit 2 ;;
esac
`

// runFakeParity runs bench parity on one tiny row of each kind, twice,
// Hilbert's side for real (this test binary as hilbert), PyTorch's and a
// -baseline binary's faked, and returns its JSON lines and its output.
func runFakeParity(t *testing.T) ([]parityLine, string) {
	t.Helper()
	dir := t.TempDir()
	script, baseline := filepath.Join(dir, "fake_bench.sh"), filepath.Join(dir, "fake_hilbert")
	if err := os.WriteFile(script, []byte(fakeBenchPy), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(baseline, []byte(fakeBaseline), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("COUNT", filepath.Join(dir, "count"))
	t.Setenv("COUNT_BASE", filepath.Join(dir, "count_base"))
	orig := parityHilbertCmd
	t.Cleanup(func() { parityHilbertCmd, parityConfigHook = orig, nil })
	parityHilbertCmd = func(args []string) (*exec.Cmd, error) {
		raw, _ := json.Marshal(args)
		// -test.run=^$: should the arguments not reach TestMain's worker
		// mode, the child runs no test (and fails to print JSON) rather
		// than this test again.
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), cmdArgsEnv+"="+string(raw))
		return cmd, nil
	}
	parityConfigHook = func(c parityConfig) parityConfig {
		c.steps, c.batch, c.seq, c.gpt2Batch = 1, 2, 8, 1
		c.paperSmall, c.paperLarge = [2]int{1, 64}, [2]int{1, 128}
		c.gpt2Small, c.gpt2Large = [3]int{1, 64, 1}, [3]int{1, 32, 1}
		c.llamaPreset, c.llamaLayers = "llama-tiny", [2]int{1, 0}
		c.genPrompt, c.genTokens, c.genBatches = 3, 2, [2]int{1, 2}
		c.gemmShape, c.gemmReps = "48x32x16", 2
		return c
	}
	jsonOut := filepath.Join(dir, "parity.jsonl")
	var stdout, stderr bytes.Buffer
	// One row of each kind (the others differ only in sizes).
	args := []string{"bench", "parity", "-rows", "gemm-2t,paper-d64,gpt2-d64,llama-tiny-l1,bf16-d64,gen-b1,gen-llama-b1", "-reps", "2", "-threads", "2",
		"-python", "/bin/sh", "-script", script, "-coretype", "none", "-json", jsonOut, "-baseline", baseline}
	if code := Run(args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr.String())
	}
	raw, err := os.ReadFile(jsonOut)
	if err != nil {
		t.Fatal(err)
	}
	var lines []parityLine
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		var l parityLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("%v: %s", err, sc.Text())
		}
		lines = append(lines, l)
	}
	return lines, stdout.String()
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-12*math.Max(math.Abs(a), math.Abs(b)) }

// TestBenchParity runs bench parity on tiny rows (runFakeParity) and
// checks that every number of the table is computed from the measured
// ones: medians and ranges of the repetitions, speedups of the medians and
// of each pair, the speedup over the baseline, the GEMM-bound ideal from
// the run's best GEMM rate, and peak RSS; and that the table prints them.
func TestBenchParity(t *testing.T) {
	lines, out := runFakeParity(t)
	wantRows := []string{"gemm-2t", "paper-d64", "gpt2-d64", "llama-tiny-l1", "bf16-d64", "gen-b1", "gen-b1", "gen-b1", "gen-llama-b1", "gen-llama-b1", "gen-llama-b1"}
	var rows []string
	for _, l := range lines {
		rows = append(rows, l.Row)
	}
	if !slices.Equal(rows, wantRows) {
		t.Fatalf("rows %v, want %v", rows, wantRows)
	}
	gemm := lines[0].Hilbert.Max // the ideal's rate: the GEMM's best repetition
	var pyValues, baseValues []float64
	for _, l := range lines {
		checkParityLine(t, l, gemm, out)
		if l.Measure != "prefill tokens/s" && l.Measure != "ms a token" { // a generation's three share one call
			pyValues = append(pyValues, l.PyTorch.Values...)
			baseValues = append(baseValues, l.Baseline.Values...)
		}
	}
	// PyTorch's and the baseline's numbers are the fakes': 10 n and 5 n
	// for their n-th calls.
	slices.Sort(pyValues)
	slices.Sort(baseValues)
	for i := range pyValues {
		if pyValues[i] != float64(10*(i+1)) || baseValues[i] != float64(5*(i+1)) {
			t.Fatalf("PyTorch values %v, want 10, 20, ...; baseline %v, want 5, 10, ... (one per call)", pyValues, baseValues)
		}
	}
	omp := os.Getenv("OMP_WAIT_POLICY")
	if omp == "" {
		omp = "passive"
	}
	for _, want := range []string{"bf16 over float32 at d64: Hilbert", "PyTorch fake", "OMP_WAIT_POLICY " + omp, "load average"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// checkParityLine checks one measure's numbers against its values, with
// gemm the run's GEMM rate, and finds them in the table out.
func checkParityLine(t *testing.T, l parityLine, gemm float64, out string) {
	t.Helper()
	name := l.Row + " " + l.Measure
	if l.Repetitions != 2 || len(l.Hilbert.Values) != 2 || len(l.PyTorch.Values) != 2 || l.Baseline == nil || len(l.Baseline.Values) != 2 {
		t.Fatalf("%s: %d repetitions, values %v, %v and baseline %+v; want 2 each", name, l.Repetitions, l.Hilbert.Values, l.PyTorch.Values, l.Baseline)
	}
	for _, s := range []parityStats{l.Hilbert, l.PyTorch, *l.Baseline} {
		mid := (s.Values[0] + s.Values[1]) / 2
		if !(s.Values[0] > 0 && s.Values[1] > 0) || !near(s.Median, mid) || s.Min != min(s.Values[0], s.Values[1]) || s.Max != max(s.Values[0], s.Values[1]) {
			t.Errorf("%s: stats %+v not those of its values", name, s)
		}
	}
	want := l.Hilbert.Median / l.PyTorch.Median
	p0, p1 := l.Hilbert.Values[0]/l.PyTorch.Values[0], l.Hilbert.Values[1]/l.PyTorch.Values[1]
	gain := l.Hilbert.Median / l.Baseline.Median
	if l.LowerBetter {
		want, p0, p1, gain = 1/want, 1/p0, 1/p1, 1/gain
	}
	if !near(l.Speedup, want) || !near(l.SpeedupMin, min(p0, p1)) || !near(l.SpeedupMax, max(p0, p1)) {
		t.Errorf("%s: speedup %v (%v-%v), want %v (%v-%v)", name, l.Speedup, l.SpeedupMin, l.SpeedupMax, want, min(p0, p1), max(p0, p1))
	}
	if l.Gain == nil || !near(*l.Gain, gain) {
		t.Errorf("%s: speedup over the baseline %v, want %v", name, l.Gain, gain)
	}
	if runtime.GOOS == "linux" && !(l.RSSHilbert.Median > 1 && l.RSSPyTorch.Median > 0 && near(l.RSSRatio, l.RSSHilbert.Median/l.RSSPyTorch.Median)) {
		t.Errorf("%s: peak RSS %v and %v MiB, ratio %v", name, l.RSSHilbert.Median, l.RSSPyTorch.Median, l.RSSRatio)
	}
	// llama-tiny, one block: q and o 64x64, k and v 64x32 (2 KV heads of
	// 16), SwiGLU 3 64x160, head 256x64; 12 L T d at T 8.
	llamaTiny := 6*float64(2*64*64+2*64*32+3*64*160+256*64) + 12*8*64
	flops := map[string]float64{"paper-d64": paperFlops(1, 64, 8), "gpt2-d64": gpt2Flops(1, 64, 8), "llama-tiny-l1": llamaTiny}[l.Row]
	if (l.OfIdeal != nil) != (flops > 0) {
		t.Errorf("%s: ideal %v, want one: %v", name, l.OfIdeal, flops > 0)
	} else if flops > 0 {
		ideal := gemm * 1e9 / flops
		if !near(*l.Ideal, ideal) || !near(*l.OfIdeal, l.Hilbert.Median/ideal) || *l.GemmGFLOPS != gemm {
			t.Errorf("%s: ideal %v (%v of it), want %v at %v GFLOP/s (%v)", name, *l.Ideal, *l.OfIdeal, ideal, gemm, l.Hilbert.Median/ideal)
		}
	}
	cell := fmt.Sprintf("| %s | %s | %s | %s | %s | %.2fx | %.2fx (%.2f-%.2f) |", l.Row, l.Measure, formatStats(l.PyTorch),
		formatStats(*l.Baseline), formatStats(l.Hilbert), *l.Gain, l.Speedup, l.SpeedupMin, l.SpeedupMax)
	if !strings.Contains(out, cell) {
		t.Errorf("table lacks %q:\n%s", cell, out)
	}
}

// TestParityRows: the full table has issue 24's rows, and groups pick
// them.
func TestParityRows(t *testing.T) {
	all := parityRows(defaultParityConfig(2))
	var names []string
	for _, r := range all {
		names = append(names, r.name)
	}
	want := []string{"gemm-2t", "gemm-1t", "paper-d128", "paper-d256", "gpt2-d256", "gpt2-124m", "llama-135m-l4", "llama-135m", "bf16-d128", "bf16-d256", "gen-b1", "gen-b8", "gen-llama-b1", "gen-llama-b8"}
	if !slices.Equal(names, want) {
		t.Errorf("rows %v, want %v", names, want)
	}
	for list, want := range map[string]int{"all": 14, "gemm": 2, "paper": 2, "update": 2, "gpt2,gen": 6, "llama": 2, "bf16-d256,gemm-1t": 2, "gen-llama-b8": 1} {
		if got, bad := selectRows(all, list); len(got) != want || len(bad) > 0 {
			t.Errorf("-rows %s: %d rows (unknown %v), want %d", list, len(got), bad, want)
		}
	}
}

// TestBenchParityErrors: unknown rows, bad counts and a missing PyTorch
// are refused before anything runs.
func TestBenchParityErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-rows", "nope"}, `no row or group ["nope"]`},
		{[]string{"-reps", "0"}, "want each >= 1"},
		{[]string{"-python", "/nonexistent/python3"}, "-python /nonexistent/python3"},
		{[]string{"-python", "/bin/sh", "-script", "/nonexistent/bench.py"}, "-script /nonexistent/bench.py"},
	} {
		var stdout, stderr bytes.Buffer
		if code := Run(append([]string{"bench", "parity"}, c.args...), &stdout, &stderr); code == 0 || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%q: exit %d, stderr %q; want a failure naming %q", c.args, code, stderr.String(), c.want)
		}
	}
}
