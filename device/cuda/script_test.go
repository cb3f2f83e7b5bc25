package cuda

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
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
