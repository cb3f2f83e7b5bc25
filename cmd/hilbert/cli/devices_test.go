package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/hilbert-ml/hilbert/device/cuda"
	"github.com/hilbert-ml/hilbert/internal/cudaemu"
)

// TestDevicesWithoutCUDA: no CUDA is reported, with what was searched, and
// is not an error.
func TestDevicesWithoutCUDA(t *testing.T) {
	t.Setenv(cuda.LibDirEnv, t.TempDir())
	t.Setenv("HILBERT_CUDA_NO_PYTHON", "1")
	if _, err := cuda.Count(); err == nil {
		t.Skip("this machine has a CUDA driver")
	}
	var stdout, stderr bytes.Buffer
	if code := Run([]string{"devices"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{"cpu      GEMM: ", "cuda     not available: ", "searched"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestDevicesOnEmulator opens the emulated GPU in full, kernels included.
func TestDevicesOnEmulator(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds the CUDA emulator")
	}
	cudaemu.Setenv(t)
	var stdout, stderr bytes.Buffer
	if code := Run([]string{"devices"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{"cpu      GEMM: ", "cuda:0 CPU emulator (sm_90, 4 SMs)", "kernel cache"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if code := Run([]string{"devices", "extra"}, &stdout, &stderr); code == 0 {
		t.Error("devices accepted an argument")
	}
}
