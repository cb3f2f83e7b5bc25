package cuda

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/device/profile"
)

// TestCheckScriptHostSide runs scripts/gpu-check.sh build and run on
// this machine: the cross-compiled test binary must build with
// CGO_ENABLED=0 and, without a GPU, the run must pass with the GPU tests
// skipped and say why.
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
	out := t.TempDir()
	build := exec.Command("bash", filepath.Join(root, "scripts", "gpu-check.sh"), "build", out)
	build.Dir = root
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("gpu-check.sh build: %v\n%s", err, b)
	}
	for _, f := range []string{"cuda.test", "run.sh"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := New(0); err == nil {
		t.Skip("a GPU is present: run the script itself")
	}
	run := exec.Command("bash", filepath.Join(root, "scripts", "gpu-check.sh"), "run", out)
	run.Dir = t.TempDir() // the binary needs nothing from the checkout
	run.Env = append(os.Environ(), "HILBERT_GPU_CHECK_INNER=1", "OUT="+out)
	b, err := run.CombinedOutput()
	if err != nil {
		t.Fatalf("gpu-check.sh run: %v\n%s", err, b)
	}
	for _, want := range []string{"gpu-check: parity", "no CUDA device", "gpu-check: bench-gemm", "status 0"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("run output lacks %q:\n%s", want, b)
		}
	}
}

// TestAttentionShareScript runs scripts/gpu/attention_share.awk (the
// gpu-check stage after the 190M profile) on a table that device/profile
// wrote for real CPU work, and checks its figures against the profile's
// own op times; without a table the script must fail.
func TestAttentionShareScript(t *testing.T) {
	if _, err := exec.LookPath("awk"); err != nil {
		t.Skip("no awk")
	}
	root, _ := filepath.Abs("../..")
	script := filepath.Join(root, "scripts", "gpu", "attention_share.awk")
	p := profile.Wrap(cpu.New())
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
	var fwd, bwd, total float64
	for _, op := range p.Ops() {
		ms := float64(op.Time) / 1e6
		total += ms
		switch op.Name {
		case "Attention":
			fwd += ms
		case "AttentionBackward":
			bwd += ms
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
	var share, att, tot, f, fs, bw, bs float64
	if _, err := fmt.Sscanf(string(b), "attention share of the profiled step: %f%% (%f ms of %f ms; forward %f ms = %f%%, backward %f ms = %f%%)",
		&share, &att, &tot, &f, &fs, &bw, &bs); err != nil {
		t.Fatalf("output %q: %v\ntable:\n%s", b, err, table.String())
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
	} {
		if math.Abs(c.got-c.want) > c.tol {
			t.Errorf("%s = %v, want %v (output %q)", c.what, c.got, c.want, b)
		}
	}
	cmd = exec.Command("awk", "-f", script)
	cmd.Stdin = strings.NewReader("no table here\n")
	if b, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(b), "no profile table") {
		t.Errorf("without a table: err %v, output %q; want a failure saying so", err, b)
	}
}
