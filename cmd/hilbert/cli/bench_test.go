package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/device/profile"
)

func TestBenchGemm(t *testing.T) {
	// Read inside the test so go test's cache keys on the GEMM choice.
	t.Logf("HILBERT_GEMM=%q LD_LIBRARY_PATH=%q", os.Getenv("HILBERT_GEMM"), os.Getenv("LD_LIBRARY_PATH"))
	kernel, _, _ := cpu.NativeKernel()
	var stdout, stderr bytes.Buffer
	code := Run([]string{"bench", "gemm", "-shapes", "8x4x3, 5x7x2:nt,3x2x9:tt", "-reps", "3", "-warmup", "1", "-threads", "1"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	want := []struct {
		shape, trans string
		m, n, k      int
	}{{"8x4x3", "nn", 8, 4, 3}, {"5x7x2:nt", "nt", 5, 7, 2}, {"3x2x9:tt", "tt", 3, 2, 9}}
	if len(lines) != len(want)+1 {
		t.Fatalf("got %d lines, want %d and a summary:\n%s", len(lines), len(want), stdout.String())
	}
	summaryLine := lines[len(lines)-1]
	lines = lines[:len(lines)-1]
	minRatio, minShape := math.Inf(1), ""
	haveBLAS := cpu.SgemmOpenBLAS(false, false, 1, 1, 1, 1, []float32{1}, 1, []float32{1}, 1, 0, []float32{0}, 1)
	for i, line := range lines {
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("line %d is not JSON: %v\n%s", i, err, line)
		}
		w := want[i]
		if r["shape"] != w.shape || r["trans"] != w.trans || r["m"] != float64(w.m) || r["n"] != float64(w.n) || r["k"] != float64(w.k) {
			t.Errorf("line %d = %s, want shape %s (%s) m=%d n=%d k=%d", i, line, w.shape, w.trans, w.m, w.n, w.k)
		}
		for _, key := range []string{"native_gflops", "go_gflops", "native_gflops_median", "go_gflops_median",
			"bf16_gflops", "bf16_gflops_median", "bf16_over_native", "bf16_over_native_median"} {
			if g, ok := r[key].(float64); !ok || g <= 0 {
				t.Errorf("line %d: %s = %v, want a positive number", i, key, r[key])
			}
		}
		if r["gemm"] != cpu.GemmName() || r["native_kernel"] != kernel || r["threads"] != float64(1) {
			t.Errorf("line %d: gemm %v kernel %v threads %v, want %s, %s, 1", i, r["gemm"], r["native_kernel"], r["threads"], cpu.GemmName(), kernel)
		}
		if reps, _ := r["reps"].(map[string]any); reps["native"] != float64(3) || reps["go"] != float64(3) || reps["bf16"] != float64(3) {
			t.Errorf("line %d: reps %v, want 3 for native, bf16 and go", i, r["reps"])
		}
		if r["bf16_kernel"] != cpu.BFloat16Kernel() {
			t.Errorf("line %d: bf16_kernel %v, want %s", i, r["bf16_kernel"], cpu.BFloat16Kernel())
		}
		for _, key := range []string{"openblas_gflops", "native_over_openblas", "openblas_gflops_median", "native_over_openblas_median"} {
			v, present := r[key]
			if !present {
				t.Errorf("line %d: no %s", i, key)
			}
			if haveBLAS {
				if g, ok := v.(float64); !ok || g <= 0 {
					t.Errorf("line %d: %s = %v with OpenBLAS loaded, want a positive number", i, key, v)
				}
			} else if v != nil {
				t.Errorf("line %d: %s = %v without OpenBLAS, want null", i, key, v)
			}
		}
		if g, ok := r["native_over_openblas"].(float64); ok && g < minRatio {
			minRatio, minShape = g, w.shape
		}
	}
	var sum map[string]any
	if err := json.Unmarshal([]byte(summaryLine), &sum); err != nil {
		t.Fatalf("summary line is not JSON: %v\n%s", err, summaryLine)
	}
	if sum["summary"] != true || sum["shapes"] != float64(len(want)) || sum["native_kernel"] != kernel || sum["threads"] != float64(1) ||
		sum["bf16_kernel"] != cpu.BFloat16Kernel() {
		t.Errorf("summary %s: want summary true, shapes %d, native_kernel %s, bf16_kernel %s, threads 1", summaryLine, len(want), kernel, cpu.BFloat16Kernel())
	}
	if g, ok := sum["min_bf16_over_native"].(float64); !ok || g <= 0 {
		t.Errorf("summary %s: min_bf16_over_native not a positive number", summaryLine)
	}
	core := cpu.OpenBLASCoreName()
	if haveBLAS {
		if sum["min_native_over_openblas"] != minRatio || sum["shape_at_min"] != minShape {
			t.Errorf("summary %s: want min_native_over_openblas %v at %s", summaryLine, minRatio, minShape)
		}
		if g, ok := sum["min_native_over_openblas_median"].(float64); !ok || g <= 0 {
			t.Errorf("summary %s: min_native_over_openblas_median not a positive number", summaryLine)
		}
		if core != "" && (sum["openblas_coretype"] != core || sum["openblas_generic_core"] != cpu.OpenBLASGenericCore(core)) {
			t.Errorf("summary %s: want openblas_coretype %q", summaryLine, core)
		}
		if !strings.Contains(stderr.String(), "(kernels: ") {
			t.Errorf("stderr does not name OpenBLAS's kernels:\n%s", stderr.String())
		}
		if warned := strings.Contains(stderr.String(), "OPENBLAS_CORETYPE"); warned != cpu.OpenBLASGenericCore(core) {
			t.Errorf("OpenBLAS kernels %q: warning about OPENBLAS_CORETYPE on stderr is %v, want %v:\n%s", core, warned, cpu.OpenBLASGenericCore(core), stderr.String())
		}
	} else {
		for _, key := range []string{"min_native_over_openblas", "shape_at_min", "min_native_over_openblas_median", "shape_at_min_median", "openblas_coretype"} {
			if v, present := sum[key]; !present || v != nil {
				t.Errorf("summary %s: %s = %v without OpenBLAS, want null", summaryLine, key, v)
			}
		}
	}
	if !haveBLAS && (!strings.Contains(stderr.String(), "OpenBLAS is not loaded") || !strings.Contains(stderr.String(), "apt-get install libopenblas0-openmp")) {
		t.Errorf("no note on stderr that OpenBLAS is absent; stderr:\n%s", stderr.String())
	}
	cpu.SetThreads(0)
}

// TestSummarizeGemm checks the summary line on hand-made results: the
// smallest ratio and its shape (best rates and medians separately), nulls
// without OpenBLAS, and the kernel set.
func TestSummarizeGemm(t *testing.T) {
	f := func(x float64) *float64 { return &x }
	res := func(shape string, ratio, median *float64) gemmResult {
		return gemmResult{Shape: shape, NativeOverOpenBLAS: ratio, MedianRatio: median}
	}
	for _, c := range []struct {
		name               string
		results            []gemmResult
		core               string
		min, minMedian     *float64
		atMin, atMinMedian string
	}{
		{"three", []gemmResult{res("a", f(1.2), f(1.1)), res("b", f(0.93), f(1.05)), res("c", f(1.5), f(0.97))}, "Cooperlake", f(0.93), f(0.97), "b", "c"},
		{"first-of-ties", []gemmResult{res("a", f(0.9), f(0.9)), res("b", f(0.9), f(0.9))}, "Prescott", f(0.9), f(0.9), "a", "a"},
		{"no-openblas", []gemmResult{res("a", nil, nil), res("b", nil, nil)}, "", nil, nil, "", ""},
		{"empty", nil, "", nil, nil, "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := summarizeGemm(c.results, c.core)
			b, err := json.Marshal(s)
			if err != nil {
				t.Fatal(err)
			}
			var got map[string]any
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatal(err)
			}
			val := func(p *float64) any {
				if p == nil {
					return nil
				}
				return *p
			}
			str := func(s string) any {
				if s == "" {
					return nil
				}
				return s
			}
			want := map[string]any{
				"summary": true, "shapes": float64(len(c.results)),
				"min_native_over_openblas": val(c.min), "shape_at_min": str(c.atMin),
				"min_native_over_openblas_median": val(c.minMedian), "shape_at_min_median": str(c.atMinMedian),
				"openblas_coretype": str(c.core), "openblas_generic_core": c.core == "Prescott",
			}
			for k, v := range want {
				if got[k] != v {
					t.Errorf("%s = %v, want %v (line %s)", k, got[k], v, b)
				}
			}
		})
	}
}

func TestOpenBLASCoreWarning(t *testing.T) {
	if w := openBLASCoreWarning("Prescott"); !strings.Contains(w, "OPENBLAS_CORETYPE") || !strings.Contains(w, "Cooperlake") || !strings.Contains(w, "generic Prescott") {
		t.Errorf("Prescott warning %q: want the generic kernels named and OPENBLAS_CORETYPE with a value", w)
	}
	for _, core := range []string{"Cooperlake", "SkylakeX", "Haswell", ""} {
		if w := openBLASCoreWarning(core); w != "" {
			t.Errorf("kernels %q: warning %q, want none", core, w)
		}
	}
}

// TestBenchHelp checks that -h on a bench target prints its flags and
// succeeds.
func TestBenchHelp(t *testing.T) {
	for _, target := range []string{"gemm", "model"} {
		var stdout, stderr bytes.Buffer
		if code := Run([]string{"bench", target, "-h"}, &stdout, &stderr); code != 0 || !strings.Contains(stderr.String(), "-threads") && !strings.Contains(stderr.String(), "-preset") {
			t.Errorf("bench %s -h: exit %d, stderr %q; want 0 and the flags", target, code, stderr.String())
		}
	}
}

func TestBenchErrors(t *testing.T) {
	for _, args := range [][]string{
		{"bench"},
		{"bench", "nosuchtarget"},
		{"bench", "gemm", "-shapes", "8x4"},
		{"bench", "gemm", "-shapes", "8x0x3"},
		{"bench", "gemm", "-shapes", "8x4x3:nx"},
		{"bench", "gemm", "-reps", "0"},
		{"bench", "gemm", "-nosuchflag"},
		{"bench", "gemm", "extra"},
		{"bench", "gemm", "-gemms", "nosuchgemm"},
	} {
		var stdout, stderr bytes.Buffer
		if code := Run(args, &stdout, &stderr); code == 0 {
			t.Errorf("%q: exit 0, want failure", args)
		}
		if stdout.Len() != 0 {
			t.Errorf("%q: wrote to stdout: %s", args, stdout.String())
		}
	}
	var stdout, stderr bytes.Buffer
	if code := Run([]string{"bench", "help"}, &stdout, &stderr); code != 0 || !strings.Contains(stderr.String(), "gemm") {
		t.Errorf("bench help: exit %d, stderr %q; want 0 and a list naming gemm", code, stderr.String())
	}
}

// TestBenchModelAttentionShare checks that a profiled bench model reports
// attention's share of the step, from the profile's attention rows.
func TestBenchModelAttentionShare(t *testing.T) {
	var stdout, stderr bytes.Buffer
	args := []string{"bench", "model", "-preset", "cpu-128", "-batch", "1", "-seq", "32", "-steps", "1", "-profile", "3"}
	if code := Run(args, &stdout, &stderr); code != 0 {
		t.Fatalf("%q: exit %d, stderr:\n%s", args, code, stderr.String())
	}
	var out map[string]any
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("stdout %q: %v", stdout.String(), err)
	}
	share, ok := out["attention_share"].(float64)
	if !ok || share <= 0 || share >= 1 {
		t.Errorf("attention_share = %v, want a fraction in (0, 1)", out["attention_share"])
	}
	if !strings.Contains(stderr.String(), "attention (forward and backward):") {
		t.Errorf("stderr lacks the attention line:\n%s", stderr.String())
	}
	// The speed line before the profile, the JSON's figure to the unit.
	var tps, msStep float64
	if i := strings.Index(stderr.String(), "bench model: "); i < 0 {
		t.Errorf("stderr lacks the bench model speed line:\n%s", stderr.String())
	} else if _, err := fmt.Sscanf(stderr.String()[i:], "bench model: %f tokens/s (%f ms a step)", &tps, &msStep); err != nil {
		t.Errorf("speed line: %v\n%s", err, stderr.String())
	} else if want := out["tokens_per_s"].(float64); math.Abs(tps-want) > 0.5 || math.Abs(msStep-out["ms_per_step"].(float64)) > 0.05 {
		t.Errorf("speed line %v tokens/s, %v ms; JSON %v tokens/s, %v ms", tps, msStep, want, out["ms_per_step"])
	}

	a, total := attentionShare([]profile.Op{
		{Name: "Attention", Time: 3 * time.Millisecond},
		{Name: "AttentionBackward", Time: 5 * time.Millisecond},
		{Name: "Gemm", Time: 12 * time.Millisecond},
	})
	if a != 8*time.Millisecond || total != 20*time.Millisecond {
		t.Errorf("attentionShare = %v of %v, want 8ms of 20ms", a, total)
	}
}

// TestBenchModelFamilies: bench model times any registered family, and
// names what it refuses.
func TestBenchModelFamilies(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // in stderr; "" for success
	}{
		{[]string{"-model", "gpt2", "-preset", "gpt2-tiny", "-seq", "16"}, ""},
		{[]string{"-model", "llama", "-preset", "llama-tiny", "-seq", "16"}, ""},
		{[]string{"-model", "nope", "-preset", "x"}, `unknown model "nope"`},
		{[]string{"-model", "gpt2", "-preset", "cpu-128"}, `no preset "cpu-128"`},
		{[]string{"-model", "gpt2", "-preset", "gpt2-tiny", "-seq", "17"}, "context 16"},
	} {
		var stdout, stderr bytes.Buffer
		args := append([]string{"bench", "model", "-batch", "2", "-steps", "1"}, tc.args...)
		code := Run(args, &stdout, &stderr)
		if tc.want != "" {
			if code == 0 || !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("%q: exit %d, stderr %q; want a failure naming %q", args, code, stderr.String(), tc.want)
			}
			continue
		}
		var out map[string]any
		if code != 0 || json.Unmarshal(stdout.Bytes(), &out) != nil || out["model"] != tc.args[1] || !(out["tokens_per_s"].(float64) > 0) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q", args, code, stdout.String(), stderr.String())
		}
	}
}
