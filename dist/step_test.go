package dist

import (
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hilbert-ml/hilbert/autograd"
	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/models"
	"github.com/hilbert-ml/hilbert/tensor"
)

// benchStep times a data-parallel training step's forward and backward
// pass of the cpu-128 preset (d 128, 4 layers, vocabulary 50257; 14M
// parameters) on each rank's micro-batch of 4 x 128 tokens: without any
// gradient communication, with the Reducer started by the OnGradReady hook
// (the all-reduces overlapping the backward pass) and Wait, and with Wait
// alone after the backward pass. Medians of 5 after a warm-up, each after a
// barrier; rank 0 prints them and the communication's share of the step.
func benchStep(c Communicator, w io.Writer) error {
	cfg, err := models.Preset("cpu-128")
	if err != nil {
		return err
	}
	dev := cpu.New()
	m, err := models.New(dev, cfg, 1)
	if err != nil {
		return err
	}
	const b, t, reps = 4, 128, 5
	rng := rand.New(rand.NewPCG(uint64(c.Rank()), 9))
	ids := make([]int32, b*t)
	for i := range ids {
		ids[i] = int32(rng.IntN(cfg.Vocab))
	}
	inputs, err := tensor.FromInt32(dev, ids, b, t)
	if err != nil {
		return err
	}
	targets, _ := tensor.FromInt32(dev, ids, b, t)
	params := m.Parameters()
	r, err := NewReducer(c, params, ReducerOptions{})
	if err != nil {
		return err
	}
	defer r.Close()
	g := autograd.New(dev)
	n := 0
	for _, p := range params {
		n += p.Len()
	}
	var results []string
	for _, mode := range []string{"no communication", "hook + Wait", "Wait after backward"} {
		if mode == "hook + Wait" {
			g.OnGradReady(r.Ready)
		} else {
			g.OnGradReady(nil)
		}
		times := make([]time.Duration, reps+1)
		for k := range times {
			tensor.ZeroGrad(params)
			if err := c.Barrier(); err != nil {
				return err
			}
			start := time.Now()
			g.Reset()
			loss, _ := m.Forward(g, inputs, targets, models.ForwardOptions{})
			if err := g.Backward(loss); err != nil {
				return err
			}
			if mode != "no communication" {
				if err := r.Wait(); err != nil {
					return err
				}
			}
			times[k] = time.Since(start)
		}
		times = times[1:]
		slices.Sort(times)
		results = append(results, fmt.Sprintf("%s %.0f ms", mode, times[reps/2].Seconds()*1e3))
	}
	if c.Rank() == 0 {
		fmt.Fprintf(w, "training step (cpu-128, %.1fM parameters, %d buckets, %d x %d tokens per rank, %d ranks, %d kernel threads): %s\n",
			float64(n)/1e6, r.Buckets(), b, t, c.Size(), cpu.Threads(), strings.Join(results, ", "))
	}
	return nil
}

// TestMPIStepTime prints benchStep's times on 2 ranks; it runs only with
// HILBERT_DIST_BENCH=1. Measured on the project's loaded 2-core machine
// (mpirun binds each rank to one core): no communication 555-660 ms, Wait
// after the backward pass 593-667 ms (communication 2-6% of the step), the
// hook 3792 ms, or 702 ms with OMPI_MCA_mpi_yield_when_idle=1: a rank
// waiting in MPI_Allreduce for its peer spins on the core its own backward
// pass needs, so on CPU ranks overlapping costs more than it hides.
func TestMPIStepTime(t *testing.T) {
	if os.Getenv("HILBERT_DIST_BENCH") != "1" {
		t.Skip("set HILBERT_DIST_BENCH=1 to time a data-parallel step")
	}
	out, err, _ := mpirun(t, 2, "stepbench", 5*time.Minute)
	if err != nil || !strings.Contains(out, "ok rank 0 of 2") {
		t.Fatalf("mpirun: %v\n%s", err, out)
	}
	t.Log("\n" + out)
}
