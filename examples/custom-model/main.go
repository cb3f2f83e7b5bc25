// Command custom-model defines a custom language model with Hilbert's nn
// modules (an embedding, residual SwiGLU MLP layers and an untied head),
// trains it for a few steps with plain SGD on a synthetic sequence, and
// saves it as a safetensors checkpoint.
//
//	go run ./examples/custom-model -steps 50 -out /tmp/mlplm.safetensors
package main

import (
	"flag"
	"fmt"
	"log"
	"math/rand/v2"

	"github.com/hilbert-ml/hilbert/autograd"
	"github.com/hilbert-ml/hilbert/device/compose"
	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/nn"
	"github.com/hilbert-ml/hilbert/tensor"
)

// MLPLM is the custom model: a plain struct of nn modules. nn.Parameters
// names its weights embed.weight, layers.N.{gate,up,down}.weight and
// head.weight.
type MLPLM struct {
	Embed  nn.Embedding
	Layers []nn.MLP
	Norm   nn.RMSNorm
	Head   nn.Linear
}

func newMLPLM(init *nn.Init, vocab, dim, layers int) *MLPLM {
	m := &MLPLM{Embed: nn.NewEmbedding(init, vocab, dim), Head: nn.NewLinear(init, dim, vocab)}
	for range layers {
		m.Layers = append(m.Layers, nn.NewMLP(init, dim, 4*dim))
	}
	return m
}

// Loss returns the mean next-token cross-entropy for ids and targets
// [batch, seq].
func (m *MLPLM) Loss(g *autograd.Graph, ids, targets *tensor.Tensor) *tensor.Tensor {
	x := m.Embed.Forward(g, ids)
	for i := range m.Layers {
		x = g.Add(x, m.Layers[i].Forward(g, m.Norm.Forward(g, x)))
	}
	// Fused head and loss: the [batch*seq, vocab] logits are never stored whole.
	return g.LinearCrossEntropy(m.Norm.Forward(g, x), m.Head.Weight, targets, 0)
}

func main() {
	var (
		vocab  = flag.Int("vocab", 64, "vocabulary size")
		dim    = flag.Int("dim", 64, "model width")
		layers = flag.Int("layers", 2, "MLP layers")
		batch  = flag.Int("batch", 8, "sequences per step")
		seq    = flag.Int("seq", 32, "tokens per sequence")
		steps  = flag.Int("steps", 50, "training steps")
		lr     = flag.Float64("lr", 0.5, "SGD learning rate")
		seed   = flag.Uint64("seed", 1, "init and data seed")
		out    = flag.String("out", "", "save the trained model to this safetensors file")
	)
	flag.Parse()
	if err := run(*vocab, *dim, *layers, *batch, *seq, *steps, float32(*lr), *seed, *out); err != nil {
		log.Fatal(err)
	}
}

func run(vocab, dim, layers, batch, seq, steps int, lr float32, seed uint64, out string) error {
	dev := cpu.New()
	init := nn.NewInit(dev, seed, 0.02)
	model := newMLPLM(init, vocab, dim, layers)
	if err := init.Err(); err != nil {
		return err
	}
	params := nn.Parameters(model)
	fmt.Printf("%d parameters in %d tensors\n", nn.NumParams(params), len(params))

	// Synthetic data: token t is followed by (3t + 1) mod vocab, from
	// random starting tokens.
	rng := rand.New(rand.NewPCG(seed, 2))
	in, tg := make([]int32, batch*seq), make([]int32, batch*seq)
	ids, err := tensor.FromInt32(dev, in, batch, seq)
	if err != nil {
		return err
	}
	targets, err := tensor.FromInt32(dev, tg, batch, seq)
	if err != nil {
		return err
	}
	g := autograd.New(dev)
	for step := range steps {
		for b := range batch {
			tok := int32(rng.IntN(vocab))
			for t := range seq {
				in[b*seq+t] = tok
				tok = (3*tok + 1) % int32(vocab)
				tg[b*seq+t] = tok
			}
		}
		ids.SetInt32(in)
		targets.SetInt32(tg)

		g.Reset()
		autograd.ZeroGrad(params)
		loss := model.Loss(g, ids, targets)
		if err := g.Err(); err != nil {
			return err
		}
		l := loss.Item()
		if err := g.Backward(loss); err != nil {
			return err
		}
		for _, p := range params {
			compose.Axpby(dev, p.Buffer(), p.Grad().Buffer(), -lr, 1)
		}
		if step%10 == 0 || step == steps-1 {
			fmt.Printf("step %3d  loss %.4f\n", step, l)
		}
	}
	if out != "" {
		if err := nn.Save(out, model, map[string]string{"model": "MLPLM"}); err != nil {
			return err
		}
		fmt.Println("saved", out)
	}
	return nil
}
