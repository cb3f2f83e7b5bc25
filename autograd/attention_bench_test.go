package autograd

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/tensor"
)

// BenchmarkAttentionPrefix times the attention of generation with a KV
// cache, new queries after a cached prefix (no recording, float32): the
// fused op (Attention over the longer keys) against the composition from
// Graph ops that nn and models used before it took such keys (permutes, a
// batched MatMul, a causal mask, Softmax, MatMul, permute back).
func BenchmarkAttentionPrefix(b *testing.B) {
	const B, H, D, Tk = 1, 12, 64, 512
	dev := cpu.New()
	rng := rand.New(rand.NewPCG(3, 3))
	for _, tq := range []int{1, 64} {
		mk := func(t int) *tensor.Tensor {
			x, err := tensor.RandN(dev, rng, 0, 1, B, t, H, D)
			if err != nil {
				b.Fatal(err)
			}
			return x
		}
		q, k, v := mk(tq), mk(Tk), mk(Tk)
		pos := Tk - tq
		mask := make([]float32, tq*Tk)
		for i := range tq {
			for j := pos + i + 1; j < Tk; j++ {
				mask[i*Tk+j] = float32(math.Inf(-1))
			}
		}
		m, _ := tensor.FromFloat32(dev, mask, tq, Tk)
		scale := float32(1 / math.Sqrt(D))
		composed := func(g *Graph) *tensor.Tensor {
			qh, kh, vh := g.Permute(q, 0, 2, 1, 3), g.Permute(k, 0, 2, 1, 3), g.Permute(v, 0, 2, 1, 3)
			s := g.Mul(g.MatMul(qh, kh, false, true), g.Constant(float64(scale), q.DType()))
			if tq > 1 {
				s = g.Add(s, m)
			}
			return g.Permute(g.MatMul(g.Softmax(s, 3), vh, false, false), 0, 2, 1, 3)
		}
		fused := func(g *Graph) *tensor.Tensor { return g.Attention(q, k, v, float64(scale)) }
		for _, c := range []struct {
			name string
			f    func(*Graph) *tensor.Tensor
		}{{"fused", fused}, {"composed", composed}} {
			b.Run(fmt.Sprintf("Tq%d/Tk%d/%s", tq, Tk, c.name), func(b *testing.B) {
				g := New(dev)
				g.SetNoGrad(true)
				for b.Loop() {
					g.Reset()
					if c.f(g) == nil {
						b.Fatal(g.Err())
					}
				}
			})
		}
	}
}
