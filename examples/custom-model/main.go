// Command custom-model defines a custom language model from Hilbert's nn
// parts (an embedding, residual pre-norm GELU MLP layers built from
// nn.Linear with biases and nn.LayerNorm, and an untied head), trains it
// with AdamW from optim under a warmup-cosine schedule with gradient
// clipping on a synthetic sequence, and saves it as a safetensors
// checkpoint.
//
//	go run ./examples/custom-model -steps 100 -out /tmp/mlplm.safetensors
package main

import (
	"flag"
	"fmt"
	"log"
	"math/rand/v2"

	"github.com/hilbert-ml/hilbert/autograd"
	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/nn"
	"github.com/hilbert-ml/hilbert/optim"
	"github.com/hilbert-ml/hilbert/tensor"
)

// Layer is one residual MLP layer: x + Down(GELU(Up(LN x))).
type Layer struct {
	LN   nn.LayerNorm
	Up   nn.Linear
	Down nn.Linear
}

// MLPLM is the custom model: a plain struct of nn modules. nn.Parameters
// names its weights embed.weight, layers.N.ln.{weight,bias},
// layers.N.{up,down}.{weight,bias}, norm.{weight,bias} and head.weight.
type MLPLM struct {
	Embed  nn.Embedding
	Layers []Layer
	Norm   nn.LayerNorm
	Head   nn.Linear
}

func newMLPLM(init *nn.Init, vocab, dim, layers int) *MLPLM {
	m := &MLPLM{Embed: nn.NewEmbedding(init, vocab, dim), Norm: nn.NewLayerNorm(init, dim, true), Head: nn.NewLinear(init, dim, vocab)}
	for range layers {
		m.Layers = append(m.Layers, Layer{
			LN: nn.NewLayerNorm(init, dim, true),
			Up: nn.NewLinearBias(init, dim, 4*dim), Down: nn.NewLinearBias(init, 4*dim, dim),
		})
	}
	return m
}

// Loss returns the mean next-token cross-entropy for ids and targets
// [batch, seq].
func (m *MLPLM) Loss(g *autograd.Graph, ids, targets *tensor.Tensor) *tensor.Tensor {
	x := m.Embed.Forward(g, ids)
	for i := range m.Layers {
		l := &m.Layers[i]
		x = g.Add(x, l.Down.Forward(g, nn.GELU.Forward(g, l.Up.Forward(g, l.LN.Forward(g, x)))))
	}
	// Fused head and loss: the [batch*seq, vocab] logits are never stored whole.
	return g.LinearCrossEntropy(m.Norm.Forward(g, x), m.Head.Weight, targets, 0)
}

// options are the example's flags.
type options struct {
	vocab, dim, layers, batch, seq, steps int
	lr                                    float64
	seed                                  uint64
	out                                   string
}

func main() {
	var o options
	flag.IntVar(&o.vocab, "vocab", 64, "vocabulary size")
	flag.IntVar(&o.dim, "dim", 64, "model width")
	flag.IntVar(&o.layers, "layers", 2, "MLP layers")
	flag.IntVar(&o.batch, "batch", 8, "sequences per step")
	flag.IntVar(&o.seq, "seq", 32, "tokens per sequence")
	flag.IntVar(&o.steps, "steps", 100, "training steps")
	flag.Float64Var(&o.lr, "lr", 1e-2, "AdamW peak learning rate")
	flag.Uint64Var(&o.seed, "seed", 1, "init and data seed")
	flag.StringVar(&o.out, "out", "", "save the trained model to this safetensors file")
	flag.Parse()
	if _, _, err := run(cpu.New(), o); err != nil {
		log.Fatal(err)
	}
}

// syntheticBatch fills in and tg with batch sequences of seq tokens of
// the synthetic data: token t is followed by (3t + 1) mod vocab, from
// random starting tokens; tg is in shifted by one.
func syntheticBatch(rng *rand.Rand, in, tg []int32, batch, seq, vocab int) {
	for b := range batch {
		tok := int32(rng.IntN(vocab))
		for t := range seq {
			in[b*seq+t] = tok
			tok = (3*tok + 1) % int32(vocab)
			tg[b*seq+t] = tok
		}
	}
}

// run trains the model and returns the losses of the first and last
// steps.
func run(dev device.Device, o options) (first, last float64, err error) {
	if o.vocab < 2 || o.dim <= 0 || o.layers < 0 || o.batch <= 0 || o.seq <= 0 || o.steps < 2 || !(o.lr > 0) {
		return 0, 0, fmt.Errorf("custom-model: vocab %d, dim %d, layers %d, batch %d, seq %d, steps %d, lr %g: want vocab >= 2, steps >= 2 and positive sizes",
			o.vocab, o.dim, o.layers, o.batch, o.seq, o.steps, o.lr)
	}
	init := nn.NewInit(dev, o.seed, 0.02)
	model := newMLPLM(init, o.vocab, o.dim, o.layers)
	if err := init.Err(); err != nil {
		return 0, 0, err
	}
	params := nn.Parameters(model)
	fmt.Printf("%d parameters in %d tensors\n", nn.NumParams(params), len(params))
	cfg := optim.PaperAdamW(o.lr)
	cfg.WeightDecay = 0
	opt, err := optim.NewAdamW(cfg, params)
	if err != nil {
		return 0, 0, err
	}
	sched, err := optim.NewCosine(o.steps, o.steps/10)
	if err != nil {
		return 0, 0, err
	}

	rng := rand.New(rand.NewPCG(o.seed, 2))
	in, tg := make([]int32, o.batch*o.seq), make([]int32, o.batch*o.seq)
	ids, err := tensor.FromInt32(dev, in, o.batch, o.seq)
	if err != nil {
		return 0, 0, err
	}
	targets, err := tensor.FromInt32(dev, tg, o.batch, o.seq)
	if err != nil {
		return 0, 0, err
	}
	g := autograd.New(dev)
	defer g.Reset()
	for step := range o.steps {
		syntheticBatch(rng, in, tg, o.batch, o.seq, o.vocab)
		ids.SetInt32(in)
		targets.SetInt32(tg)

		g.Reset()
		tensor.ZeroGrad(params)
		loss := model.Loss(g, ids, targets)
		if err := g.Err(); err != nil {
			return 0, 0, err
		}
		l := float64(loss.Item())
		if err := g.Backward(loss); err != nil {
			return 0, 0, err
		}
		if _, err := optim.ClipGradNorm(params, 1); err != nil {
			return 0, 0, err
		}
		if err := opt.Step(sched.Scale(step)); err != nil {
			return 0, 0, err
		}
		if step == 0 {
			first = l
		}
		last = l
		if step%10 == 0 || step == o.steps-1 {
			fmt.Printf("step %3d  loss %.4f\n", step, l)
		}
	}
	if o.out != "" {
		if err := nn.Save(o.out, model, map[string]string{"model": "MLPLM"}); err != nil {
			return 0, 0, err
		}
		fmt.Println("saved", o.out)
	}
	return first, last, nil
}
