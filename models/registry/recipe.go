package registry

import (
	"fmt"

	"github.com/hilbert-ml/hilbert/optim"
	"github.com/hilbert-ml/hilbert/tensor"
)

// RecipeOptions configure Recipe; zero values mean the paper's (as in
// optim.PaperOptions, which Recipe builds on).
type RecipeOptions struct {
	// Head selects RowNorm (default) or AdamW for the head.
	Head optim.HeadOptimizer
	// Width is d_model, which sets the head's default LR (0: 512).
	Width int
	// MuonLR, EmbedLR and HeadLR override the peak learning rates when
	// positive. EmbedLR is also the gains' and biases' LR.
	MuonLR, EmbedLR, HeadLR float64
	// Projected selects RowNorm's projected form.
	Projected bool
	// KeepBlockSteps keeps the Muon, embedding and gain groups' last steps.
	KeepBlockSteps bool
}

// Recipe returns the optimizer recipe of a model from its parameters'
// roles: Muon on block matrices (group "blocks"), AdamW on embeddings
// ("embed"), RowNorm or AdamW on the head ("head"), and AdamW without
// weight decay at the embedding's LR on gains and biases ("gains",
// absent when the model has none). The LRs and configs are
// optim.PaperRecipe's, so for the paper's model the groups and every
// update are the paper recipe's. A tied head (Roles.TiedTo) trains as
// the embedding it is: with RowNorm asked for, or a head LR given, Recipe
// refuses it, naming the tie and the ways out (-head adamw, or untie the
// head at build time).
func Recipe(r Roles, params []*tensor.Tensor, o RecipeOptions) (optim.Recipe, error) {
	if err := r.Check(params); err != nil {
		return optim.Recipe{}, err
	}
	if r.TiedTo != "" {
		if err := CheckTiedRecipe(r.TiedTo, o); err != nil {
			return optim.Recipe{}, err
		}
	}
	paper := optim.PaperRecipe(optim.PaperOptions{Head: o.Head, Width: o.Width, HeadLR: o.HeadLR, MuonLR: o.MuonLR,
		EmbedLR: o.EmbedLR, Projected: o.Projected, KeepBlockSteps: o.KeepBlockSteps})
	byName := map[string]optim.GroupSpec{}
	for _, g := range paper.Groups {
		byName[g.Name] = g
	}
	blocks, embed, head := byName["blocks"], byName["embed"], byName["head"]
	if blocks.Config == nil || embed.Config == nil || head.Config == nil {
		return optim.Recipe{}, fmt.Errorf("registry: optim.PaperRecipe no longer has the groups blocks, embed and head")
	}
	blocks.Match = optim.Exact(r.Names(params, Matrix)...)
	embed.Match = optim.Exact(r.Names(params, Embedding)...)
	head.Match = optim.Exact(r.Names(params, Head)...)
	out := optim.Recipe{Groups: []optim.GroupSpec{blocks, embed}}
	if r.TiedTo == "" {
		out.Groups = append(out.Groups, head)
	}
	if gains := append(r.Names(params, Gain), r.Names(params, Bias)...); len(gains) > 0 {
		c, ok := embed.Config.(optim.AdamWConfig)
		if !ok {
			return optim.Recipe{}, fmt.Errorf("registry: the embedding's optimizer is %T, want AdamW", embed.Config)
		}
		c.WeightDecay = 0
		out.Groups = append(out.Groups, optim.GroupSpec{Name: "gains", Match: optim.Exact(gains...), Config: c})
	}
	return out, nil
}

// CheckTiedRecipe reports what a head tied to the embedding named tiedTo
// cannot take: RowNorm (its step would be the embedding's) or a head LR
// of its own. Recipe checks it; a run layer calls it before building the
// model (Family.Tied says whether the head will be tied).
func CheckTiedRecipe(tiedTo string, o RecipeOptions) error {
	switch {
	case o.Head == optim.HeadRowNorm:
		return fmt.Errorf("registry: the head is tied to %s: RowNorm cannot take a tied head (its step would be the embedding's); use the AdamW head (hilbert train -head adamw), or untie the head at build time (-untie-head: a copy of the embedding at initialisation)", tiedTo)
	case o.HeadLR > 0:
		return fmt.Errorf("registry: a head LR of %g for a head tied to %s, which trains at the embedding's LR; untie the head (-untie-head) to give it its own", o.HeadLR, tiedTo)
	}
	return nil
}
