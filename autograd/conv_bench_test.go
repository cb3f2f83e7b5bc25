package autograd

import (
	"math/rand/v2"
	"testing"

	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/tensor"
)

// BenchmarkConv2D times a training step of one 3x3 convolution layer of a
// small CNN (N 32, 16 -> 32 channels, 28x28, padding 1) and of a 2x2 max
// pooling after it, float32 on the CPU: forward and backward of the
// composition (im2col by GatherAxis, a batched MatMul, ScatterAddAxis
// back). -cpuprofile shows the share of the products against the
// gathers, scatters and copies, which is what a fused kernel would save.
func BenchmarkConv2D(b *testing.B) {
	dev := cpu.New()
	rng := rand.New(rand.NewPCG(5, 5))
	mk := func(shape ...int) *tensor.Tensor {
		x, err := tensor.RandN(dev, rng, 0, 1, shape...)
		if err != nil {
			b.Fatal(err)
		}
		x.SetRequiresGrad(true)
		return x
	}
	x, w, bias := mk(32, 16, 28, 28), mk(32, 16, 3, 3), mk(32)
	// 2 * N * OC * OH * OW * C * KH * KW flops per product; forward one,
	// backward two (dx's columns and dw).
	flops := 3 * 2.0 * 32 * 32 * 28 * 28 * 16 * 9
	for _, c := range []struct {
		name string
		f    func(g *Graph) *tensor.Tensor
	}{
		{"conv", func(g *Graph) *tensor.Tensor {
			return g.Conv2D(x, w, bias, ConvOptions{Padding: []int{1}})
		}},
		{"conv+maxpool", func(g *Graph) *tensor.Tensor {
			return g.MaxPool2D(g.Conv2D(x, w, bias, ConvOptions{Padding: []int{1}}), PoolOptions{Kernel: []int{2}})
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			g := New(dev)
			for b.Loop() {
				g.Reset()
				tensor.ZeroGrad([]*tensor.Tensor{x, w, bias})
				if err := g.Backward(g.Sum(c.f(g))); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}
