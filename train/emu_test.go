package train

import (
	"context"
	"math"
	"testing"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/device/cuda"
	"github.com/hilbert-ml/hilbert/internal/cudaemu"
)

// TestEmulatedCUDATrainingMatchesCPU trains the tiny model with both heads
// and both precisions on the CPU backend and on the CUDA backend over the
// CPU emulation of CUDA (internal/cudaemu: the real host code, cuBLAS calls
// and the kernels' CUDA C source), and requires the same losses, row
// diameters and Hilbert RMS up to float32 reordering.
func TestEmulatedCUDATrainingMatchesCPU(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds and runs the CUDA emulator")
	}
	cudaemu.Setenv(t)
	t.Setenv(cuda.TF32Env, "0")
	g, err := cuda.New(0)
	if err != nil {
		t.Fatalf("CUDA emulator: %v", err)
	}
	defer g.Close()
	shards, val := writeTinyShards(t, t.TempDir())
	run := func(dev device.Device, head, autocast string) []Record {
		cfg := tinyConfig(t, t.TempDir(), shards, val)
		cfg.Head, cfg.Autocast = head, autocast
		cfg.Steps, cfg.ValEvery, cfg.DiagEvery, cfg.CheckpointEvery = 6, 3, 3, 0
		tr, err := New(dev, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer tr.Close()
		var hist []Record
		if err := tr.Run(context.Background(), func(_ *Trainer, r Record) error {
			hist = append(hist, r)
			return nil
		}); err != nil {
			t.Fatalf("%s %s on %s: %v", head, autocast, dev.Name(), err)
		}
		return hist
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
