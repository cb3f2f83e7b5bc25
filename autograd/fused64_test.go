package autograd

import (
	"math"
	"testing"

	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/tensor"
)

// ropeTables64 returns float64 rotary tables [seq, half].
func ropeTables64(t *testing.T, seq, half int) (cos, sin *tensor.Tensor) {
	t.Helper()
	c, s := make([]float64, seq*half), make([]float64, seq*half)
	for p := range seq {
		for j := range half {
			a := float64(p) * math.Pow(10000, -float64(j)/float64(half))
			c[p*half+j], s[p*half+j] = math.Cos(a), math.Sin(a)
		}
	}
	dev := cpu.New()
	cos, err := tensor.FromFloat64(dev, c, seq, half)
	if err != nil {
		t.Fatal(err)
	}
	sin, _ = tensor.FromFloat64(dev, s, seq, half)
	return cos, sin
}

// TestGradCheckFusedOps checks in float64 the gradients of the ops that
// the backends fuse in float32: in float64 they run as their compositions
// from the core (device/compose), forward and backward, so finite
// differences check the composed backward formulas that a backend without
// the fused kernels trains with, and that devicetest holds every fused
// kernel to. (Attention's composition is built on Gemm, float32 on the
// CPU: devicetest compares it with the fused kernels instead.)
func TestGradCheckFusedOps(t *testing.T) {
	x := func(seed uint64, shape ...int) *tensor.Tensor { return input64(t, seed, shape, 1, 0, 0) }
	targets, _ := tensor.FromInt32(cpu.New(), []int32{3, 0, 6, 6, 1}, 5)
	ids, _ := tensor.FromInt32(cpu.New(), []int32{2, 0, 2, 3}, 2, 2)
	cases := []check64{
		{"RMSNorm", func(t *testing.T) []*tensor.Tensor { return []*tensor.Tensor{x(100, 3, 7)} },
			func(g *Graph, in []*tensor.Tensor) *tensor.Tensor { return g.RMSNorm(in[0], 1e-5) }},
		{"SwiGLU", func(t *testing.T) []*tensor.Tensor { return []*tensor.Tensor{x(101, 4, 5), x(102, 4, 5)} },
			func(g *Graph, in []*tensor.Tensor) *tensor.Tensor { return g.SwiGLU(in[0], in[1]) }},
		{"RoPE", func(t *testing.T) []*tensor.Tensor { return []*tensor.Tensor{x(103, 2, 5, 2, 6)} },
			func(g *Graph, in []*tensor.Tensor) *tensor.Tensor {
				cos, sin := ropeTables64(t, 7, 3)
				return g.RoPE(in[0], cos, sin)
			}},
		{"CrossEntropy", func(t *testing.T) []*tensor.Tensor { return []*tensor.Tensor{x(107, 5, 7)} },
			func(g *Graph, in []*tensor.Tensor) *tensor.Tensor { return g.CrossEntropy(in[0], targets) }},
		{"Embedding", func(t *testing.T) []*tensor.Tensor { return []*tensor.Tensor{x(108, 4, 3)} },
			func(g *Graph, in []*tensor.Tensor) *tensor.Tensor { return g.Embedding(in[0], ids) }},
		{"block", func(t *testing.T) []*tensor.Tensor {
			return []*tensor.Tensor{x(109, 1, 4, 2, 4), x(110, 1, 4, 2, 4)}
		}, func(g *Graph, in []*tensor.Tensor) *tensor.Tensor {
			cos, sin := ropeTables64(t, 4, 2)
			h := g.Reshape(g.RMSNorm(g.Reshape(in[0], 4, 8), 1e-6), 1, 4, 2, 4)
			q := g.RoPE(h, cos, sin)
			return g.SwiGLU(q, g.RoPE(in[1], cos, sin))
		}},
	}
	runChecks64(t, cases)
}
