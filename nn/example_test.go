package nn_test

import (
	"fmt"
	"math"

	"github.com/hilbert-ml/hilbert/autograd"
	"github.com/hilbert-ml/hilbert/device/compose"
	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/nn"
	"github.com/hilbert-ml/hilbert/tensor"
)

// SwiGLU is a sub-module the user defines: the feed-forward layer
// Down(SiLU(Gate x) * Up x) of three bias-free Linears.
type SwiGLU struct {
	Gate, Up, Down nn.Linear
}

// NewSwiGLU returns a SwiGLU from dim features through hidden and back.
func NewSwiGLU(init *nn.Init, dim, hidden int) SwiGLU {
	return SwiGLU{Gate: nn.NewLinear(init, dim, hidden), Up: nn.NewLinear(init, dim, hidden), Down: nn.NewLinear(init, hidden, dim)}
}

// Forward maps x [..., dim] to [..., dim] (autograd's fused SwiGLU op).
func (s *SwiGLU) Forward(g *autograd.Graph, x *tensor.Tensor) *tensor.Tensor {
	return s.Down.Forward(g, g.SwiGLU(s.Gate.Forward(g, x), s.Up.Forward(g, x)))
}

// MLPLM is a custom model: a token embedding, two residual SwiGLU MLP
// layers and an untied head. It is a plain struct; nn.Parameters names
// its weights from the field names, its own SwiGLU's included.
type MLPLM struct {
	Embed  nn.Embedding
	Layers []SwiGLU
	Norm   nn.RMSNorm
	Head   nn.Linear
}

// NewMLPLM returns an MLPLM with its weights drawn by init.
func NewMLPLM(init *nn.Init, vocab, dim, layers int) *MLPLM {
	m := &MLPLM{Embed: nn.NewEmbedding(init, vocab, dim), Head: nn.NewLinear(init, dim, vocab)}
	for range layers {
		m.Layers = append(m.Layers, NewSwiGLU(init, dim, 4*dim))
	}
	return m
}

// Loss returns the mean next-token cross-entropy of ids [B, T] against
// targets [B, T].
func (m *MLPLM) Loss(g *autograd.Graph, ids, targets *tensor.Tensor) *tensor.Tensor {
	x := m.Embed.Forward(g, ids)
	for i := range m.Layers {
		x = g.Add(x, m.Layers[i].Forward(g, m.Norm.Forward(g, x)))
	}
	logits := m.Head.Forward(g, m.Norm.Forward(g, x)) // [B, T, vocab]
	return g.CrossEntropy(g.Reshape(logits, -1, m.Head.Weight.Dim(0)), targets)
}

// Example defines a custom two-layer MLP language model with nn's modules,
// lists its named parameters and trains it with plain SGD on a sequence
// where each token is followed by the next one modulo the vocabulary.
func Example() {
	dev := cpu.New()
	const vocab, dim, batch, seq = 16, 32, 4, 8
	init := nn.NewInit(dev, 1, 0.02)
	model := NewMLPLM(init, vocab, dim, 2)
	if err := init.Err(); err != nil {
		panic(err)
	}
	params := nn.Parameters(model)
	for _, p := range params {
		fmt.Println(p.Name, p.Shape())
	}

	in, tg := make([]int32, batch*seq), make([]int32, batch*seq)
	for i := range in {
		in[i] = int32(i % vocab)
		tg[i] = int32((i + 1) % vocab)
	}
	ids, _ := tensor.FromInt32(dev, in, batch, seq)
	targets, _ := tensor.FromInt32(dev, tg, batch, seq)

	g := autograd.New(dev)
	var first, last float32
	for step := range 30 {
		g.Reset()
		tensor.ZeroGrad(params)
		loss := model.Loss(g, ids, targets)
		if err := g.Err(); err != nil {
			panic(err)
		}
		last = loss.Item()
		if step == 0 {
			first = last
		}
		if err := g.Backward(loss); err != nil {
			panic(err)
		}
		for _, p := range params { // SGD: p -= lr * grad
			compose.Axpby(dev, p.Buffer(), p.Grad().Buffer(), -1.0, 1)
		}
	}
	fmt.Println("initial loss within 0.1 of ln 16:", math.Abs(float64(first)-math.Log(vocab)) < 0.1)
	fmt.Println("loss after 30 steps below 0.05:", last < 0.05)
	// Output:
	// embed.weight [16 32]
	// layers.0.gate.weight [128 32]
	// layers.0.up.weight [128 32]
	// layers.0.down.weight [32 128]
	// layers.1.gate.weight [128 32]
	// layers.1.up.weight [128 32]
	// layers.1.down.weight [32 128]
	// head.weight [16 32]
	// initial loss within 0.1 of ln 16: true
	// loss after 30 steps below 0.05: true
}
