package train

import (
	"math"
	"testing"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/device/cuda"
	"github.com/hilbert-ml/hilbert/internal/cudaemu"
)

// emulatedCUDA opens the CUDA backend on the CPU emulation of CUDA, with
// float32 products, or skips (-short, or no g++ to build the emulator).
func emulatedCUDA(t *testing.T) *cuda.Device {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: builds and runs the CUDA emulator")
	}
	cudaemu.Setenv(t)
	t.Setenv(cuda.TF32Env, "0")
	g, err := cuda.New(0)
	if err != nil {
		t.Fatalf("CUDA emulator: %v", err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

// TestEmulatedCUDATrainingMatchesCPU trains the tiny model with both heads
// and both precisions on the CPU backend and on the CUDA backend over the
// CPU emulation of CUDA (internal/cudaemu: the real host code, cuBLAS calls
// and the kernels' CUDA C source), and requires the same losses, row
// diameters and Hilbert RMS up to float32 reordering.
func TestEmulatedCUDATrainingMatchesCPU(t *testing.T) {
	g := emulatedCUDA(t)
	shards, val := writeTinyShards(t, t.TempDir())
	run := func(dev device.Device, head, autocast string) []Record {
		cfg := tinyConfig(t, t.TempDir(), shards, val)
		cfg.Head, cfg.Autocast = head, autocast
		cfg.Steps, cfg.ValEvery, cfg.DiagEvery, cfg.CheckpointEvery = 6, 3, 3, 0
		tr, err := runToEndOn(t, dev, cfg, false, 0)
		if err != nil {
			t.Fatalf("%s %s on %s: %v", head, autocast, dev.Name(), err)
		}
		return tr.History()
	}
	close := func(what string, step int, got, want, tol float64) {
		t.Helper()
		if math.IsNaN(got) || math.Abs(got-want) > tol*math.Max(1, math.Abs(want)) {
			t.Errorf("%s at step %d: CUDA %.7g, CPU %.7g (tol %.0e)", what, step, got, want, tol)
		}
	}
	for _, head := range []string{"rownorm", "adamw"} {
		for _, autocast := range []string{"off", "bf16"} {
			t.Run(head+"/"+autocast, func(t *testing.T) {
				want, got := run(cpu.New(), head, autocast), run(g, head, autocast)
				if len(got) != len(want) || len(got) == 0 {
					t.Fatalf("%d records on CUDA, %d on CPU", len(got), len(want))
				}
				// bf16 rounding of operands computed in another order can
				// flip, so autocast gets a looser tolerance.
				tol := 2e-4
				if autocast == "bf16" {
					tol = 2e-2
				}
				diags := 0
				for i, w := range want {
					r := got[i]
					close("loss", w.Step, r.Loss, w.Loss, tol)
					if w.ValLoss != nil && r.ValLoss != nil {
						close("val loss", w.Step, *r.ValLoss, *w.ValLoss, tol)
					} else if (w.ValLoss == nil) != (r.ValLoss == nil) {
						t.Errorf("step %d: validation on one backend only", w.Step)
					}
					if w.Diameter != nil && r.Diameter != nil {
						diags++
						close("D(S_t)", w.Step, *r.Diameter, *w.Diameter, 10*tol)
						close("Hilbert RMS", w.Step, *r.HilbertRMS, *w.HilbertRMS, 10*tol)
					}
				}
				if diags == 0 {
					t.Error("no head diagnostics were logged")
				}
			})
		}
	}
}

// TestEmulatedCUDAResume interrupts a run on the emulated CUDA backend
// after a checkpoint, resumes it, and requires the uninterrupted run's
// records bit for bit: the checkpoint carries the device's parameters and
// optimizer state through host copies. (The emulator runs kernels in a
// fixed order; on a GPU, ScatterAdd's atomics may reorder sums.)
func TestEmulatedCUDAResume(t *testing.T) {
	g := emulatedCUDA(t)
	shards, val := writeTinyShards(t, t.TempDir())
	run := func(cfg Config, resume bool, stopAfter int) ([]Record, error) {
		tr, err := runToEndOn(t, g, cfg, resume, stopAfter)
		return tr.History(), err
	}
	config := func() Config {
		cfg := tinyConfig(t, t.TempDir(), shards, val)
		cfg.Steps, cfg.ValEvery, cfg.DiagEvery, cfg.CheckpointEvery = 8, 4, 4, 4
		return cfg
	}
	straight, err := run(config(), false, 0)
	if err != nil {
		t.Fatal(err)
	}
	cfg := config()
	if _, err := run(cfg, false, 6); err == nil {
		t.Fatal("the interrupted run did not report the interrupt")
	}
	resumed, err := run(cfg, true, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(resumed) != len(straight) {
		t.Fatalf("%d records resumed, %d uninterrupted", len(resumed), len(straight))
	}
	for i, a := range straight {
		b := resumed[i]
		if !sameRecord(a, b) {
			t.Errorf("update %d differs: uninterrupted loss %v grad norm %v, resumed %v %v", a.Step, a.Loss, a.GradNorm, b.Loss, b.GradNorm)
		}
	}
}
