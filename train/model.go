package train

import (
	"encoding/json"
	"fmt"

	"github.com/hilbert-ml/hilbert/autograd"
	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/models"
	"github.com/hilbert-ml/hilbert/models/registry"
	"github.com/hilbert-ml/hilbert/optim"
	"github.com/hilbert-ml/hilbert/tensor"
)

// PanelModel is a LanguageModel whose loss pass can also return the
// final hidden states [B*T, d] its head reads: the trainer takes the
// Hilbert-RMS panel from them. models.Transformer, models.GPT2 and
// models.Llama are PanelModels; a LanguageModel that is not one trains
// and validates, without the Hilbert RMS.
type PanelModel interface {
	LanguageModel
	LossHidden(g *autograd.Graph, inputs, targets *tensor.Tensor) (loss, hidden *tensor.Tensor)
}

// runModel is the model a Trainer trains, as the run layer sees it.
type runModel struct {
	model registry.Model
	lm    LanguageModel  // its loss (the paper's with the run's block rows)
	roles registry.Roles // every parameter's role
	head  *tensor.Tensor // the untied head's weight [vocab, dim]; nil when tied
	vocab int            // the vocabulary (the head's or the tied embedding's rows)
	dim   int            // the width the head reads
}

// Parameters returns the model's parameters.
func (r *runModel) Parameters() []*tensor.Tensor { return r.model.Parameters() }

// buildModel builds the run's model through the registry (the paper's
// family, or any other) and finds its head.
func buildModel(dev device.Device, cfg Config) (*runModel, error) {
	fam, err := registry.Lookup(cfg.FamilyName())
	if err != nil {
		return nil, err
	}
	arch := cfg.Arch
	if cfg.IsPaper() {
		arch = cfg.Model
	}
	m, err := fam.Build(dev, arch, registry.BuildOptions{Seed: cfg.Seed, UntieHead: cfg.UntieHead})
	if err != nil {
		return nil, err
	}
	r := &runModel{model: m}
	if r.roles, err = fam.Roles(m); err != nil {
		return nil, err
	}
	if err := r.roles.Check(m.Parameters()); err != nil {
		return nil, err
	}
	lm, ok := m.(LanguageModel)
	if !ok {
		return nil, fmt.Errorf("model %q: %T has no Loss(g, inputs, targets) method (train.LanguageModel): the trainer needs the mean next-token loss", fam.Name, m)
	}
	r.lm = WithBlockRows(lm, cfg.BlockRows)
	headName := r.roles.TiedTo
	for _, p := range m.Parameters() {
		if r.roles.Of[p.Name] == registry.Head {
			r.head, headName = p, p.Name
		}
	}
	for _, p := range m.Parameters() {
		if p.Name == headName {
			if p.Rank() != 2 {
				return nil, fmt.Errorf("model %q: head %s %v: want a [vocab, dim] matrix", fam.Name, p.Name, p.Shape())
			}
			r.vocab, r.dim = p.Dim(0), p.Dim(1)
		}
	}
	if want := cfg.Sizes().Vocab; r.vocab != want {
		return nil, fmt.Errorf("model %q: the head %s has %d rows, the config's vocabulary is %d", fam.Name, headName, r.vocab, want)
	}
	return r, nil
}

// recipe returns the run's optimizer recipe from the parameters' roles:
// Muon on block matrices, AdamW on embeddings, gains and biases, RowNorm
// or AdamW on the head (registry.Recipe).
func (r *runModel) recipe(cfg Config) (optim.Recipe, error) {
	head, err := cfg.HeadOptimizer()
	if err != nil {
		return optim.Recipe{}, err
	}
	return registry.Recipe(r.roles, r.model.Parameters(), registry.RecipeOptions{
		Head: head, Width: r.dim, HeadLR: cfg.HeadLR, Projected: cfg.Projected,
		MuonLR: cfg.MuonLR, EmbedLR: cfg.EmbedLR,
	})
}

// WithBlockRows returns m with the fused head's row blocks bounded by rows
// (the run's block_rows) where m is the paper's transformer, whose Forward
// takes that option; any other model is returned as it is.
func WithBlockRows(m LanguageModel, rows int) LanguageModel {
	if t, ok := m.(*models.Transformer); ok {
		return blockRowsLM{t, rows}
	}
	return m
}

// blockRowsLM is the paper's transformer as a PanelModel, with the run's
// bound on the fused head's row blocks.
type blockRowsLM struct {
	m         *models.Transformer
	blockRows int
}

func (a blockRowsLM) Parameters() []*tensor.Tensor { return a.m.Parameters() }

func (a blockRowsLM) Loss(g *autograd.Graph, inputs, targets *tensor.Tensor) *tensor.Tensor {
	loss, _ := a.m.Forward(g, inputs, targets, models.ForwardOptions{BlockRows: a.blockRows})
	return loss
}

func (a blockRowsLM) LossHidden(g *autograd.Graph, inputs, targets *tensor.Tensor) (loss, hidden *tensor.Tensor) {
	return a.m.Forward(g, inputs, targets, models.ForwardOptions{Hidden: true, BlockRows: a.blockRows})
}

// archJSON is the model's configuration as state.json records it for a
// family other than the paper's (whose configuration is the model field).
func archJSON(cfg Config) (json.RawMessage, error) {
	if cfg.IsPaper() {
		return nil, nil
	}
	b, err := json.Marshal(cfg.Arch)
	if err != nil {
		return nil, fmt.Errorf("model %q: config %T: %w", cfg.Family, cfg.Arch, err)
	}
	return b, nil
}
