package cuda

import (
	"debug/elf"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/device/profile"
)

// TestCheckScriptHostSide runs scripts/gpu-check.sh build and run on
// this machine: the cross-compiled binaries must build with CGO_ENABLED=0,
// stripped, into a tarball within the carry budget; and, from that
// tarball alone (all the device run carries) and without a GPU, the run
// must pass with the GPU tests skipped and say why.
func TestCheckScriptHostSide(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: compiles the package's test binary")
	}
	if os.Getenv("HILBERT_GPU_CHECK_INNER") != "" {
		t.Skip("inside gpu-check")
	}
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	root, _ := filepath.Abs("../..")
	script := filepath.Join(root, "scripts", "gpu-check.sh")
	out := t.TempDir()
	build := exec.Command("bash", script, "build", out)
	build.Dir = root
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("gpu-check.sh build: %v\n%s", err, b)
	}
	for _, f := range []string{"cuda.test", "run.sh", "summary.awk", "bench_torch.py", ".gitignore"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Fatal(err)
		}
	}
	tarball := filepath.Join(out, "gpu-check.tar.gz")
	fi, err := os.Stat(tarball)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() > 56<<20 {
		t.Errorf("%s is %d bytes, over 56 MiB", tarball, fi.Size())
	}
	for _, bin := range []string{"hilbert", "cuda.test"} {
		f, err := elf.Open(filepath.Join(out, bin))
		if err != nil {
			t.Fatal(err)
		}
		for _, sec := range []string{".symtab", ".debug_info"} {
			if f.Section(sec) != nil {
				t.Errorf("%s has a %s section: not stripped", bin, sec)
			}
		}
		f.Close()
	}
	for _, c := range []struct {
		max  string
		fail bool
	}{{"56", false}, {"1", true}} {
		size := exec.Command("bash", script, "size", out)
		size.Env = append(os.Environ(), "GPU_CHECK_MAX_MIB="+c.max)
		b, err := size.CombinedOutput()
		if (err != nil) != c.fail || (c.fail && !strings.Contains(string(b), "over the 1 MiB budget")) {
			t.Errorf("size check at %s MiB: err %v, output %q; want failure %v", c.max, err, b, c.fail)
		}
	}
	if _, err := New(0); err == nil {
		t.Skip("a GPU is present: run the script itself")
	}
	// The device run: only the tarball, in a folder of its own.
	carried := filepath.Join(t.TempDir(), "gpu-check")
	if err := os.MkdirAll(carried, 0o755); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(tarball); err != nil {
		t.Fatal(err)
	} else if err := os.WriteFile(filepath.Join(carried, "gpu-check.tar.gz"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	run := exec.Command("bash", script, "run", carried)
	run.Dir = t.TempDir() // the binary needs nothing from the checkout
	run.Env = append(os.Environ(), "HILBERT_GPU_CHECK_INNER=1", "OUT="+out)
	b, err := run.CombinedOutput()
	if err != nil {
		t.Fatalf("gpu-check.sh run: %v\n%s", err, b)
	}
	for _, want := range []string{"unpacked", "gpu-check: parity", "no CUDA device", "gpu-check: bench-gemm", "status 0"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("run output lacks %q:\n%s", want, b)
		}
	}
	if strings.Index(string(b), "gpu-check: parity") > strings.Index(string(b), "gpu-check: bench-gemm") {
		t.Errorf("parity does not come before the benchmarks:\n%s", b)
	}
}

// TestRunScriptDeadline runs scripts/gpu/run.sh with stand-ins that hang
// and a 14 s deadline: the first stage must be cut at the deadline less
// the grace (9 s), the rest skipped with a line each, the status 1, and
// the whole run over within the deadline.
func TestRunScriptDeadline(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	if _, err := exec.LookPath("timeout"); err != nil {
		t.Skip("no timeout(1)")
	}
	root, _ := filepath.Abs("../..")
	dir := t.TempDir()
	for name, body := range map[string]string{
		"hilbert":   "#!/bin/sh\nexec sleep 60\n",
		"cuda.test": "#!/bin/sh\necho \"$@\"\nexec sleep 60\n",
		"python3":   "#!/bin/sh\necho torch 9.9 CUDA 13.0 available: NVIDIA H200\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"summary.awk", "attention_share.awk"} {
		b, err := os.ReadFile(filepath.Join(root, "scripts", "gpu", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("bash", filepath.Join(root, "scripts", "gpu", "run.sh"), dir)
	cmd.Env = append(os.Environ(), "GPU_CHECK_DEADLINE=14", "OUT="+dir, "PATH="+dir+":/usr/bin:/bin")
	start := time.Now()
	b, err := cmd.CombinedOutput()
	elapsed := time.Since(start)
	if err == nil {
		t.Errorf("run.sh passed with every stage hung:\n%s", b)
	}
	if elapsed > 16*time.Second {
		t.Errorf("run.sh took %v, past its 14 s deadline:\n%s", elapsed, b)
	}
	// The first stage's limit is what was left of the deadline, less the
	// grace, when it started.
	m := regexp.MustCompile(`=== gpu-check: devices \(limit (\d+)s, (\d+)s elapsed\)`).FindStringSubmatch(string(b))
	if m == nil {
		t.Fatalf("no devices stage line:\n%s", b)
	}
	if limit, _ := strconv.Atoi(m[1]); limit+atoi(m[2]) != 14-5 {
		t.Errorf("devices stage limit %ss after %ss: want the 9 s left", m[1], m[2])
	}
	for _, want := range []string{
		"=== gpu-check: devices FAILED",
		"gpu-check: torch 9.9 CUDA 13.0 available: NVIDIA H200\n",
		"=== gpu-check: parity SKIPPED: out of time",
		"=== gpu-check: bench-gemm SKIPPED: out of time",
		"skipped for time: parity",
		"summary 190m (batch ?, seq ?): hilbert missing",
		"status 1",
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("run output lacks %q:\n%s", want, b)
		}
	}
}

// TestRunScriptTorchCheck runs scripts/gpu/run.sh with quick stand-ins
// (no GPU) and python3 stand-ins for each answer of the torch check at the
// start: the run must say what it found, in one line.
func TestRunScriptTorchCheck(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	if _, err := exec.LookPath("timeout"); err != nil {
		t.Skip("no timeout(1)")
	}
	root, _ := filepath.Abs("../..")
	for _, c := range []struct {
		name, python, want string
	}{
		{"available", "echo torch 2.9.0 CUDA 13.0 available: NVIDIA H200", "gpu-check: torch 2.9.0 CUDA 13.0 available: NVIDIA H200\n"},
		{"no GPU", "echo torch 2.9.0 CUDA None available: NOT available", "torch sees no GPU, the PyTorch anchor stage will not run"},
		{"no torch", "echo \"ModuleNotFoundError: No module named 'torch'\" >&2; exit 1", "cannot import torch (the PyTorch anchor stage will not run): ModuleNotFoundError"},
		{"hung", "exec sleep 60", "did not import torch within 6s"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, body := range map[string]string{
				"hilbert":   "#!/bin/sh\nexit 0\n",
				"cuda.test": "#!/bin/sh\necho 'no CUDA device: stand-in'\n",
				"python3":   "#!/bin/sh\n" + c.python + "\n",
			} {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			cmd := exec.Command("bash", filepath.Join(root, "scripts", "gpu", "run.sh"), dir)
			cmd.Env = append(os.Environ(), "GPU_CHECK_DEADLINE=60", "OUT="+dir, "PATH="+dir+":/usr/bin:/bin")
			b, err := cmd.CombinedOutput()
			if err != nil {
				t.Errorf("run.sh without a GPU: %v", err)
			}
			if !strings.Contains(string(b), c.want) || !strings.Contains(string(b), "no usable GPU") {
				t.Errorf("output lacks %q (or the no-GPU line):\n%s", c.want, b)
			}
		})
	}
}

// TestSummaryScript checks scripts/gpu/summary.awk, the run's last line,
// on logs as hilbert bench model and bench_torch.py write them: both
// figures and their ratio, Hilbert's stderr line when its JSON is
// missing, and a failure naming the log when a figure is absent.
func TestSummaryScript(t *testing.T) {
	if _, err := exec.LookPath("awk"); err != nil {
		t.Skip("no awk")
	}
	root, _ := filepath.Abs("../..")
	script := filepath.Join(root, "scripts", "gpu", "summary.awk")
	const (
		hilbertJSON = `{"attention_share":0.42,"autocast":"bf16","batch":8,"device":"cuda:0","ms_per_step":400,"preset":"190m","seq":2048,"tokens_per_s":40960}`
		share       = "attention (forward and backward): 168.0 ms of the 400.0 ms profiled, 42.0%"
		torchJSON   = `{"target": "model", "impl": "pytorch-eager-bf16-autocast", "attention": "sdpa", "preset": "190m", "batch": 8, "seq": 2048, "steps": 5, "ms_per_step": 200.0, "tokens_per_s": 81920.0}`
	)
	for _, c := range []struct {
		name, hilbert, torch string
		fail                 bool
		want                 string
	}{
		{"both", "profile...\n" + share + "\n" + hilbertJSON + "\n", torchJSON + "\n", false,
			"=== gpu-check: summary 190m (batch 8, seq 2048): hilbert 40960 tokens/s, pytorch 81920 tokens/s, hilbert/pytorch 0.500; attention 42.0% of the profiled step"},
		{"hilbert stderr line only", "bench model: 20480 tokens/s (800.0 ms a step)\nerror: profile step failed\n", torchJSON + "\n", false,
			"hilbert 20480 tokens/s, pytorch 81920 tokens/s, hilbert/pytorch 0.250; attention share not found"},
		{"no pytorch", hilbertJSON + "\n", "Traceback ...\n", true, "pytorch missing (see "},
		{"no hilbert", "", torchJSON + "\n", true, "hilbert missing (see "},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			h, p := filepath.Join(dir, "h.log"), filepath.Join(dir, "p.log")
			if err := os.WriteFile(h, []byte(c.hilbert), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(c.torch), 0o644); err != nil {
				t.Fatal(err)
			}
			b, err := exec.Command("awk", "-v", "hilbert="+h, "-v", "torch="+p, "-f", script).CombinedOutput()
			if (err != nil) != c.fail {
				t.Errorf("err %v, want failure %v; output %q", err, c.fail, b)
			}
			if !strings.Contains(string(b), c.want) {
				t.Errorf("output %q lacks %q", b, c.want)
			}
		})
	}
}

func atoi(s string) int { n, _ := strconv.Atoi(s); return n }

// torchPython returns a python3 that imports torch, or skips.
func torchPython(t *testing.T) string {
	t.Helper()
	for _, py := range []string{"python3", "/usr/bin/python3"} {
		if p, err := exec.LookPath(py); err == nil && exec.Command(p, "-c", "import torch").Run() == nil {
			return p
		}
	}
	t.Skip("no python3 with torch")
	return ""
}

// TestBenchTorchScript runs scripts/gpu/bench_torch.py, the PyTorch
// anchor, on the CPU at a small shape, and its SDPA check: the SDPA
// attention block must give model.py's loss and gradients, and a wrong
// attention (not causal) must make the check fail. Where torch is older
// than 2.0 (no F.scaled_dot_product_attention) the SDPA function is a
// stand-in written from the definition, so the block's plumbing (layouts,
// scale, mask) is still what is checked.
func TestBenchTorchScript(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts python with torch")
	}
	py := torchPython(t)
	root, _ := filepath.Abs("../..")
	gpu, parity := filepath.Join(root, "scripts", "gpu"), filepath.Join(root, "scripts", "parity")
	cmd := exec.Command(py, filepath.Join(gpu, "bench_torch.py"), "cpu-128", "1", "32", "1", "--device", "cpu", "--attention", "naive")
	cmd.Env = append(os.Environ(), "PYTHONPATH="+parity)
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("bench_torch.py: %v\n%s", err, b)
	}
	var res struct {
		TokensPerS float64 `json:"tokens_per_s"`
		Attention  string  `json:"attention"`
		Seq        int     `json:"seq"`
	}
	if err := json.Unmarshal(b, &res); err != nil || res.TokensPerS <= 0 || res.Attention != "naive" || res.Seq != 32 {
		t.Errorf("bench_torch.py printed %q (%+v, %v)", b, res, err)
	}
	const check = `
import math, sys, torch
sys.path[:0] = [sys.argv[1], sys.argv[2]]
import bench_torch
F = bench_torch.F
def reference(q, k, v, is_causal=False):
    t = q.shape[-2]
    s = torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(q.shape[-1])
    if is_causal:
        s = s + torch.full((t, t), float("-inf")).triu(1)
    return torch.einsum("bhqk,bhkd->bhqd", s.softmax(-1), v)
if sys.argv[3] == "wrong":
    F.scaled_dot_product_attention = lambda q, k, v, is_causal=False: reference(q, k, v, False)
elif not hasattr(F, "scaled_dot_product_attention"):
    F.scaled_dot_product_attention = reference
print(bench_torch.check_sdpa(torch.device("cpu")))
`
	for _, c := range []struct {
		mode string
		fail bool
	}{{"right", false}, {"wrong", true}} {
		b, err := exec.Command(py, "-c", check, gpu, parity, c.mode).CombinedOutput()
		if (err != nil) != c.fail {
			t.Errorf("SDPA check with the %s attention: err %v, want failure %v; output %q", c.mode, err, c.fail, b)
		}
		if c.fail && !strings.Contains(string(b), "SDPA attention disagrees") {
			t.Errorf("the failing check does not say why: %q", b)
		}
	}
}

// namedCPU is the CPU backend naming its attention kernel as the CUDA
// backend does, for the profile rows attention_share.awk reads.
type namedCPU struct{ *cpu.Device }

func (namedCPU) AttentionKernel(device.AttentionShape) string { return "mma.sync bf16" }

// TestAttentionShareScript runs scripts/gpu/attention_share.awk (the
// gpu-check stage after the 190M profile) on tables that device/profile
// wrote for real CPU work, and checks its figures against the profile's
// own op times, kernel names and rates; without a table the script must
// fail.
func TestAttentionShareScript(t *testing.T) {
	if _, err := exec.LookPath("awk"); err != nil {
		t.Skip("no awk")
	}
	root, _ := filepath.Abs("../..")
	script := filepath.Join(root, "scripts", "gpu", "attention_share.awk")
	for _, c := range []struct {
		name   string
		dev    device.Device
		kernel string
	}{{"cpu", cpu.New(), "not named"}, {"named", namedCPU{cpu.New()}, "mma.sync bf16"}} {
		t.Run(c.name, func(t *testing.T) { attentionShareCase(t, script, profile.Wrap(c.dev), c.kernel) })
	}
	cmd := exec.Command("awk", "-f", script)
	cmd.Stdin = strings.NewReader("no table here\n")
	if b, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(b), "no profile table") {
		t.Errorf("without a table: err %v, output %q; want a failure saying so", err, b)
	}
}

// attentionShareCase profiles attention and a GEMM on p, then checks the
// script's line against the profile (kernel: the name it must print).
func attentionShareCase(t *testing.T, script string, p *profile.Device, kernel string) {
	s := device.AttentionShape{Batch: 1, Seq: 256, Heads: 2, HeadDim: 64}
	n := s.Batch * s.Seq * s.Heads * s.HeadDim
	buf := func(n int) device.Buffer { b, _ := p.Alloc(device.Float32, n); return b }
	q, k, v, o, dout, dq, dk, dv := buf(n), buf(n), buf(n), buf(n), buf(n), buf(n), buf(n), buf(n)
	lse, x := buf(s.Batch*s.Heads*s.Seq), buf(256*256)
	p.Record(true)
	p.Attention(o, lse, q, k, v, s, 0.125)
	p.AttentionBackward(dq, dk, dv, dout, q, k, v, o, lse, s, 0.125)
	p.Gemm(device.GemmArgs{M: 256, N: 256, K: 256, Alpha: 1, A: x, LDA: 256, B: x, LDB: 256, C: x, LDC: 256})
	p.Record(false)
	var fwd, bwd, total, frate, brate float64
	for _, op := range p.Ops() {
		ms := float64(op.Time) / 1e6
		total += ms
		switch op.Name {
		case "Attention":
			fwd, frate = fwd+ms, op.GFlops()
		case "AttentionBackward":
			bwd, brate = bwd+ms, op.GFlops()
		}
	}
	var table strings.Builder
	if err := p.WriteTable(&table, 0); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("awk", "-f", script)
	cmd.Stdin = strings.NewReader("profile of one step:\n" + table.String())
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("attention_share.awk: %v\n%s", err, b)
	}
	var share, att, tot, f, fs, bw, bs, fr, br float64
	if _, err := fmt.Sscanf(string(b), "attention share of the profiled step: %f%% (%f ms of %f ms; forward %f ms = %f%%, backward %f ms = %f%%)",
		&share, &att, &tot, &f, &fs, &bw, &bs); err != nil {
		t.Fatalf("output %q: %v\ntable:\n%s", b, err, table.String())
	}
	tail := "; kernel " + kernel + "; forward "
	i := strings.Index(string(b), tail)
	if i < 0 {
		t.Fatalf("output %q lacks %q\ntable:\n%s", b, tail, table.String())
	}
	if _, err := fmt.Sscanf(string(b)[i+len(tail):], "%f GFLOP/s, backward %f GFLOP/s", &fr, &br); err != nil {
		t.Fatalf("output %q: rates: %v", b, err)
	}
	for _, c := range []struct {
		what      string
		got, want float64
		tol       float64
	}{
		{"forward ms", f, fwd, 1e-3}, {"backward ms", bw, bwd, 1e-3}, {"total ms", tot, total, 1e-3},
		// The table rounds each op to 1 us and the script prints one
		// decimal: its share is its own figures' to 0.05, and the exact
		// one's to the rounding of a few ms-sized entries.
		{"share % of the printed figures", share, 100 * (f + bw) / tot, 0.051},
		{"share %", share, 100 * (fwd + bwd) / total, 0.3},
		// The table prints GFLOP/s to 0.1.
		{"forward GFLOP/s", fr, frate, 0.051}, {"backward GFLOP/s", br, brate, 0.051},
	} {
		if math.Abs(c.got-c.want) > c.tol {
			t.Errorf("%s = %v, want %v (output %q)", c.what, c.got, c.want, b)
		}
	}
}
