package optim_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/optim"
	"github.com/hilbert-ml/hilbert/tensor"
)

// BenchmarkPaperStep times one update of the paper's recipe over the
// default job's parameter shapes (d 128, 2 blocks, GPT-2's vocabulary):
// AdamW on the embedding, Muon on the blocks, RowNorm or AdamW on the
// head, each taking its kernels.
func BenchmarkPaperStep(b *testing.B) {
	const vocab, d, layers = 50257, 128, 2
	for _, head := range []optim.HeadOptimizer{optim.HeadRowNorm, optim.HeadAdamW} {
		b.Run(head.String(), func(b *testing.B) {
			dev, rng := cpu.New(), rand.New(rand.NewPCG(1, 2))
			param := func(name string, rows, cols int) *tensor.Tensor {
				p, _ := tensor.RandN(dev, rng, 0, 0.02, rows, cols)
				p.Name = name
				g, _ := tensor.RandN(dev, rng, 0, 1e-3, rows, cols)
				p.SetGrad(g)
				return p
			}
			params := []*tensor.Tensor{param("embed.weight", vocab, d), param("head.weight", vocab, d)}
			for l := range layers {
				for _, m := range []string{"q", "k", "v", "o"} {
					params = append(params, param(fmt.Sprintf("blocks.%d", l)+".attn."+m+".weight", d, d))
				}
				params = append(params, param(fmt.Sprintf("blocks.%d", l)+".mlp.up.weight", 4*d, d),
					param(fmt.Sprintf("blocks.%d", l)+".mlp.down.weight", d, 4*d))
			}
			set, err := optim.NewSet(optim.PaperRecipe(optim.PaperOptions{Head: head, Width: d}), params)
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if err := set.Step(1); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
