package models

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/hilbert-ml/hilbert/autograd"
	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/compose"
	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/device/profile"
	"github.com/hilbert-ml/hilbert/optim"
	"github.com/hilbert-ml/hilbert/tensor"
)

// trainSteps trains the model of cfg on dev for steps optimizer steps of
// the paper's recipe (Muon blocks, AdamW embedding, RowNorm head, global
// clipping at 1), every step on one fixed random batch, and returns the
// loss of each step (before its update) and the parameters after the
// last. On one batch the loss must fall from the first step on, so even
// two steps say whether the updates descend.
func trainSteps(t *testing.T, dev device.Device, cfg Config, batch, seq, steps, blockRows int) (losses []float64, params [][]float32) {
	t.Helper()
	m, err := New(dev, cfg, 7)
	if err != nil {
		t.Fatal(err)
	}
	set, err := optim.NewSet(optim.PaperRecipe(optim.PaperOptions{Width: cfg.Dim}), m.Parameters())
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(11, 12))
	ids := func() *tensor.Tensor {
		v := make([]int32, batch*seq)
		for i := range v {
			v[i] = int32(rng.IntN(cfg.Vocab))
		}
		x, err := tensor.FromInt32(dev, v, batch, seq)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	inputs, targets := ids(), ids()
	g := autograd.New(dev)
	for range steps {
		g.Reset()
		set.ZeroGrad()
		loss, _ := m.Forward(g, inputs, targets, ForwardOptions{BlockRows: blockRows})
		if err := g.Err(); err != nil {
			t.Fatal(err)
		}
		if err := g.Backward(loss); err != nil {
			t.Fatal(err)
		}
		losses = append(losses, float64(loss.Float32s()[0]))
		if _, err := optim.ClipGradNorm(m.Parameters(), 1); err != nil {
			t.Fatal(err)
		}
		if err := set.Step(1); err != nil {
			t.Fatal(err)
		}
	}
	if err := dev.Synchronize(); err != nil {
		t.Fatal(err)
	}
	for _, p := range m.Parameters() {
		params = append(params, p.Float32s())
	}
	return losses, params
}

// TestCoreOnlyBackendTrains trains the paper's small preset (cpu-128: 4
// layers, d 128, the full 50257 vocabulary) with the paper's optimizer
// groups on the CPU backend and on the same backend seen through its Core
// alone, where every fused kernel (RMSNorm, RoPE, SwiGLU, attention, the
// cross-entropies, AdamW, RowScale and the older elementwise ones) runs as
// its composition from device/compose. The losses of every step and the
// parameters after the last must agree within float32 tolerance. The
// head runs in blocks of rows smaller than the batch (the training path's
// CrossEntropyWithGrad) in one case and whole in the other.
func TestCoreOnlyBackendTrains(t *testing.T) {
	cfg, err := Preset("cpu-128")
	if err != nil {
		t.Fatal(err)
	}
	steps := 3
	if testing.Short() {
		steps = 2
	}
	for _, blockRows := range []int{0, 24} {
		fused := cpu.New()
		wantLoss, wantParams := trainSteps(t, fused, cfg, 2, 32, steps, blockRows)
		// The Core-only backend under the profiler, which records each
		// capability it composes as "Name/composed".
		prof := profile.Wrap(compose.CoreOnly(cpu.New()))
		prof.Record(true)
		gotLoss, gotParams := trainSteps(t, prof, cfg, 2, 32, steps, blockRows)
		composedOps := map[string]bool{}
		for _, o := range prof.Ops() {
			if name, ok := strings.CutSuffix(o.Name, "/composed"); ok {
				composedOps[strings.Split(name, "/")[0]] = true
			}
		}
		for _, op := range []string{"RMSNorm", "RMSNormBackward", "RoPE", "SwiGLU", "SwiGLUBackward", "Attention",
			"AttentionBackward", "CrossEntropyWithGrad", "AdamWStep", "RowScale", "Gather", "ScatterAdd"} {
			if !composedOps[op] {
				t.Errorf("blockRows %d: %s did not run as its composition (composed: %v)", blockRows, op, composedOps)
			}
		}
		for i := range wantLoss {
			if d := math.Abs(gotLoss[i] - wantLoss[i]); d > 1e-4*math.Abs(wantLoss[i]) {
				t.Errorf("blockRows %d: step %d: core-only loss %.7f, fused %.7f", blockRows, i, gotLoss[i], wantLoss[i])
			}
		}
		// Every update on the one batch lowers its loss, by a margin well
		// past the float32 tolerance of the comparison above.
		for i := 1; i < steps; i++ {
			if wantLoss[i] > wantLoss[i-1]-1e-3 {
				t.Errorf("blockRows %d: the loss did not fall at step %d: %v", blockRows, i, wantLoss)
			}
		}
		worst := 0.0
		for k := range wantParams {
			var diff, norm float64
			for j := range wantParams[k] {
				d := float64(gotParams[k][j] - wantParams[k][j])
				diff += d * d
				norm += float64(wantParams[k][j]) * float64(wantParams[k][j])
			}
			worst = max(worst, math.Sqrt(diff/norm))
		}
		if worst > 1e-4 {
			t.Errorf("blockRows %d: parameters differ by %.2g (relative L2 of the worst tensor)", blockRows, worst)
		}
		t.Logf("blockRows %d: losses %v (fused) %v (core only); worst parameter difference %.2g", blockRows, wantLoss, gotLoss, worst)
	}
}
