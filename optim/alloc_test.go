package optim

import (
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/tensor"
)

// TestWarmStepAllocations holds the paper recipe's update (clip, then Muon,
// embedding AdamW and RowNorm head) to bookkeeping once its state exists:
// a warm update of a model 40 times larger must not allocate more than a
// few times as much, and never as much as one of its block matrices.
func TestWarmStepAllocations(t *testing.T) {
	perStep := func(d, vocab int) (bytes uint64, paramBytes int) {
		rng := rand.New(rand.NewPCG(1, uint64(d)))
		shapes := []struct {
			name       string
			rows, cols int
		}{
			{"embed.weight", vocab, d},
			{"blocks.0.attn.q.weight", d, d},
			{"blocks.0.mlp.up.weight", 4 * d, d},
			{"blocks.0.mlp.down.weight", d, 4 * d},
			{"head.weight", vocab, d},
		}
		var params []*tensor.Tensor
		for _, s := range shapes {
			p := param(t, s.name, randn(rng, s.rows*s.cols, 0.02), s.rows, s.cols)
			setGrad(t, p, randn(rng, s.rows*s.cols, 0.01))
			params = append(params, p)
		}
		set, err := NewSet(PaperRecipe(PaperOptions{Width: d}), params)
		if err != nil {
			t.Fatal(err)
		}
		update := func() {
			if _, err := ClipGradNorm(params, 1); err != nil {
				t.Fatal(err)
			}
			if err := set.Step(0.5); err != nil {
				t.Fatal(err)
			}
		}
		for range 5 { // the state, the pool, the kernels' scratch
			update()
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		const steps = 5
		for range steps {
			update()
		}
		runtime.ReadMemStats(&after)
		bytes = (after.TotalAlloc - before.TotalAlloc) / steps
		t.Logf("d %d, vocab %d: %d bytes, %d allocations per warm update", d, vocab, bytes, (after.Mallocs-before.Mallocs)/steps)
		return bytes, 4 * d * d
	}
	if cpu.GemmName() == "go" {
		t.Skip("gonum's GEMM allocates its packing buffers on every call; the bound holds for the native GEMM and OpenBLAS")
	}
	small, _ := perStep(32, 128)
	large, oneParam := perStep(128, 2048)
	if large > 4*small+16<<10 {
		t.Errorf("warm-update allocations grow with the model: %d bytes at d 32, %d at d 128 (40x the parameters)", small, large)
	}
	if large >= uint64(oneParam) {
		t.Errorf("a warm update allocates %d bytes, as much as a %d-byte block matrix", large, oneParam)
	}
}
