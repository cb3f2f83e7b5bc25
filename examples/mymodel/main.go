// Command mymodel is the whole hilbert command (train, sample, eval,
// compare, bench, mpirun) for a model defined here: a program registers its
// own model family with models/registry and hands its main to cli.Main, as
// a database/sql driver registers itself for sql.Open.
//
//	go run ./examples/mymodel train -model mine -preset mine-tiny -steps 40
//	go run ./examples/mymodel sample -run runs/opticks -prompt "Light" -temperature 0
//	go run ./examples/mymodel eval -run runs/opticks -val runs/opticks/data/text_val_000000.bin
//
// The model, "mine", is a next-token MLP: each position's embedding
// through a residual MLP block, a norm and an untied head. It has no
// attention, so each prediction sees only the current token (a bigram
// model); that keeps it short, and every subcommand, the optimizer recipe
// by role (Muon on the block's matrices, AdamW on the embedding, RowNorm
// on the head) and the head's D(S_t) and Hilbert RMS work on it as on the
// built-in families.
package main

import (
	"fmt"

	"github.com/hilbert-ml/hilbert/autograd"
	"github.com/hilbert-ml/hilbert/cmd/hilbert/cli"
	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/models/registry"
	"github.com/hilbert-ml/hilbert/nn"
	"github.com/hilbert-ml/hilbert/tensor"
)

// Config is the model's configuration. Its Dim, Vocab and Context fields
// are the sizes hilbert train sets (-dim, -context, and the data's
// vocabulary); it has no Layers, so -layers is refused, naming it.
type Config struct {
	Dim, Vocab, Context int
	InitStd             float64
}

// Validate reports a configuration the model cannot take.
func (c Config) Validate() error {
	if c.Dim < 1 || c.Vocab < 2 || c.Context < 1 || !(c.InitStd > 0) {
		return fmt.Errorf("mine: dim %d, vocab %d, context %d, init_std %g: want positive sizes, vocab >= 2", c.Dim, c.Vocab, c.Context, c.InitStd)
	}
	return nil
}

// Block is the residual MLP block.
type Block struct {
	Norm nn.RMSNorm
	FC   nn.Linear
	Proj nn.Linear
}

// Mine is the model. Its parameters are named by their paths (embed.weight,
// blocks.0.fc.weight, ..., head.weight), which the recipe's roles follow.
type Mine struct {
	Config Config `nn:"-"`
	Embed  nn.Embedding
	Blocks []Block
	Norm   nn.RMSNorm
	Head   nn.Linear

	params []*tensor.Tensor
}

// New builds the model on dev, initialised from seed.
func New(dev device.Device, c Config, seed uint64) (*Mine, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	init := nn.NewInit(dev, seed, c.InitStd)
	m := &Mine{Config: c, Embed: nn.NewEmbedding(init, c.Vocab, c.Dim), Norm: nn.NewRMSNorm(init, c.Dim), Head: nn.NewLinear(init, c.Dim, c.Vocab)}
	m.Blocks = []Block{{Norm: nn.NewRMSNorm(init, c.Dim), FC: nn.NewLinear(init, c.Dim, 4*c.Dim), Proj: nn.NewLinear(init, 4*c.Dim, c.Dim)}}
	if err := init.Err(); err != nil {
		return nil, err
	}
	m.params = nn.Parameters(m)
	return m, nil
}

// Parameters returns the model's parameters.
func (m *Mine) Parameters() []*tensor.Tensor { return m.params }

// hidden returns the final hidden states [B*T, Dim] of inputs [B, T].
func (m *Mine) hidden(g *autograd.Graph, inputs *tensor.Tensor) *tensor.Tensor {
	x := m.Embed.Forward(g, inputs)
	for i := range m.Blocks {
		b := &m.Blocks[i]
		x = g.Add(x, b.Proj.Forward(g, nn.GELU.Forward(g, b.FC.Forward(g, b.Norm.Forward(g, x)))))
	}
	return g.Reshape(m.Norm.Forward(g, x), inputs.Len(), m.Config.Dim)
}

// Loss is the mean next-token cross-entropy of inputs [B, T] against
// targets [B, T], the head fused with the loss (train.LanguageModel).
func (m *Mine) Loss(g *autograd.Graph, inputs, targets *tensor.Tensor) *tensor.Tensor {
	loss, _ := m.LossHidden(g, inputs, targets)
	return loss
}

// LossHidden is Loss with the hidden states the head reads, for the
// trainer's Hilbert-RMS panel (train.PanelModel).
func (m *Mine) LossHidden(g *autograd.Graph, inputs, targets *tensor.Tensor) (loss, hidden *tensor.Tensor) {
	h := m.hidden(g, inputs)
	return g.LinearCrossEntropy(h, m.Head.Weight, targets, 0), h
}

// ForwardCached returns the logits [B, T, Vocab] of inputs [B, T]
// (models.LM, for Generate). Each position sees only its own token, so
// there is nothing to cache.
func (m *Mine) ForwardCached(g *autograd.Graph, inputs *tensor.Tensor, _ *nn.KVCache) *tensor.Tensor {
	return g.Reshape(m.Head.Forward(g, m.hidden(g, inputs)), inputs.Dim(0), inputs.Dim(1), m.Config.Vocab)
}

// Layers is the number of attention layers: none.
func (m *Mine) Layers() int { return 0 }

// ContextLen is the longest sequence the model takes.
func (m *Mine) ContextLen() int { return m.Config.Context }

func init() {
	err := registry.Register(registry.Family{
		Name: "mine",
		Presets: map[string]any{
			"mine-tiny":  Config{Dim: 32, Vocab: 50257, Context: 64, InitStd: 0.02},
			"mine-small": Config{Dim: 128, Vocab: 50257, Context: 128, InitStd: 0.02},
		},
		Build: func(dev device.Device, cfg any, o registry.BuildOptions) (registry.Model, error) {
			c, ok := cfg.(Config)
			if !ok {
				return nil, fmt.Errorf("mine: config %T, want main.Config", cfg)
			}
			if o.UntieHead {
				return nil, fmt.Errorf("mine: the head is already untied")
			}
			return New(dev, c, o.Seed)
		},
		Roles: func(m registry.Model) (registry.Roles, error) {
			return registry.RolesByName(m.Parameters(), []string{"embed.weight"}, "head.weight", nil)
		},
	})
	if err != nil {
		panic(err)
	}
}

func main() { cli.Main() }
