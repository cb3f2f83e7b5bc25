package autograd

import (
	"math/rand/v2"
	"testing"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/tensor"
)

// tinyBlock is a one-block transformer written directly against the
// graph, used to measure what a training step allocates on the Go heap
// once the pool is warm.
type tinyBlock struct {
	embed, q, k, v, o, gate, up, down, head *tensor.Tensor
	cos, sin                                *tensor.Tensor
	ids, targets                            *tensor.Tensor
	b, t, h, d                              int
}

func newTinyBlock(tb testing.TB, b, t, d, vocab int) *tinyBlock {
	dev := cpu.New()
	rng := rand.New(rand.NewPCG(7, 7))
	param := func(shape ...int) *tensor.Tensor {
		p, err := tensor.RandN(dev, rng, 0, 0.02, shape...)
		if err != nil {
			tb.Fatal(err)
		}
		p.SetRequiresGrad(true)
		return p
	}
	m := &tinyBlock{b: b, t: t, h: d / 64, d: d}
	m.embed, m.head = param(vocab, d), param(vocab, d)
	m.q, m.k, m.v, m.o = param(d, d), param(d, d), param(d, d), param(d, d)
	m.gate, m.up, m.down = param(4*d, d), param(4*d, d), param(d, 4*d)
	var err error
	if m.cos, m.sin, err = RoPETables(dev, device.Float32, t, 64, 10000); err != nil {
		tb.Fatal(err)
	}
	ids := make([]int32, b*t)
	for i := range ids {
		ids[i] = int32(rng.IntN(vocab))
	}
	m.ids, _ = tensor.FromInt32(dev, ids, b, t)
	m.targets, _ = tensor.FromInt32(dev, ids, b*t)
	return m
}

func (m *tinyBlock) params() []*tensor.Tensor {
	return []*tensor.Tensor{m.embed, m.q, m.k, m.v, m.o, m.gate, m.up, m.down, m.head}
}

func (m *tinyBlock) loss(g *Graph) *tensor.Tensor {
	x := g.Reshape(g.Embedding(m.embed, m.ids), m.b*m.t, m.d)
	n := g.RMSNorm(x, nil, 1e-6)
	heads := func(w *tensor.Tensor) *tensor.Tensor {
		return g.Reshape(g.MatMul(n, w, false, true), m.b, m.t, m.h, 64)
	}
	q := g.RoPE(g.RMSNorm(heads(m.q), nil, 1e-6), m.cos, m.sin)
	k := g.RoPE(g.RMSNorm(heads(m.k), nil, 1e-6), m.cos, m.sin)
	a := g.Reshape(g.Attention(q, k, heads(m.v), 0.125), m.b*m.t, m.d)
	x = g.Add(x, g.MatMul(a, m.o, false, true))
	n = g.RMSNorm(x, nil, 1e-6)
	mlp := g.SwiGLU(g.MatMul(n, m.gate, false, true), g.MatMul(n, m.up, false, true))
	x = g.Add(x, g.MatMul(mlp, m.down, false, true))
	return g.LinearCrossEntropy(g.RMSNorm(x, nil, 1e-6), m.head, m.targets, 0)
}

// BenchmarkTrainingStep runs forward and backward of one block at d 128,
// T 256, batch 8, vocab 50257 (the paper's small CPU configuration with
// one layer). -benchmem shows the Go heap allocations of a warm step.
func BenchmarkTrainingStep(b *testing.B) {
	m := newTinyBlock(b, 8, 256, 128, 50257)
	g := New(cpu.New())
	step := func() {
		g.Reset()
		tensor.ZeroGrad(m.params())
		if err := g.Backward(m.loss(g)); err != nil {
			b.Fatal(err)
		}
	}
	step() // warm the pool and the gradients
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		step()
	}
	b.ReportMetric(float64(b.N*m.b*m.t)/b.Elapsed().Seconds(), "tokens/s")
}

// TestWarmStepAllocations checks that a warm training step allocates only
// small bookkeeping on the Go heap (tensor headers, goroutine closures),
// never buffers: the bytes per step do not grow with the batch and stay far
// below the size of one activation.
func TestWarmStepAllocations(t *testing.T) {
	perStep := func(b, seq int) uint64 {
		m := newTinyBlock(t, b, seq, 64, 97)
		g := New(cpu.New())
		step := func() {
			g.Reset()
			tensor.ZeroGrad(m.params())
			if err := g.Backward(m.loss(g)); err != nil {
				t.Fatal(err)
			}
		}
		// Warm up: the pool, the gradients, and the CPU kernels' scratch
		// (one set per worker, and under load the most workers at once
		// can take a few steps to show up).
		for range 10 {
			step()
		}
		var before, after runtimeMem
		before.read()
		const steps = 5
		for range steps {
			step()
		}
		after.read()
		t.Logf("batch %d seq %d: %d bytes, %d allocations per warm step", b, seq,
			(after.bytes-before.bytes)/steps, (after.allocs-before.allocs)/steps)
		return (after.bytes - before.bytes) / steps
	}
	small, large := perStep(1, 8), perStep(8, 64)
	// The large run's activations are 64 times the small run's: a step that
	// allocated buffers would grow about as much. Bookkeeping grows a
	// little (kernels split more rows across goroutines, up to GOMAXPROCS;
	// gonum's GEMM allocates its own packing buffers per call).
	if large > 8*small {
		t.Errorf("warm-step allocations grow with the batch: %d bytes at batch 1 x 8, %d at 8 x 64", small, large)
	}
	// With the native GEMM or OpenBLAS nothing but bookkeeping is left (gonum
	// packs per call): less than half of one
	// activation of the large run (8*64*64*4 = 128 KiB).
	const activation = 8 * 64 * 64 * 4
	if cpu.GemmName() != "go" && large > activation/2 {
		t.Errorf("a warm step allocates %d bytes, more than half of one activation (%d)", large, activation)
	}
}
