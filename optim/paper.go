package optim

// HeadOptimizer selects the LM head's optimizer in the paper's recipe.
type HeadOptimizer int

const (
	// HeadRowNorm is the paper's method (practical form unless
	// PaperOptions.Projected).
	HeadRowNorm HeadOptimizer = iota
	// HeadAdamW is the baseline.
	HeadAdamW
)

// String names the head optimizer as the CLI and logs do.
func (h HeadOptimizer) String() string {
	if h == HeadAdamW {
		return "adamw"
	}
	return "rownorm"
}

// PaperOptions configures PaperRecipe. The zero value is the paper's
// RowNorm run at width 512 with the model's default parameter names.
type PaperOptions struct {
	// Head selects RowNorm (default) or AdamW for the LM head.
	Head HeadOptimizer
	// Width is d_model; it sets the head's peak LR (see PaperHeadLR); 0
	// means 512.
	Width int
	// HeadLR overrides the head's peak LR when positive.
	HeadLR float64
	// MuonLR overrides the blocks' Muon peak LR (PaperMuonLR) when
	// positive.
	MuonLR float64
	// EmbedLR overrides the embedding's AdamW peak LR (PaperEmbedLR) when
	// positive.
	EmbedLR float64
	// Projected selects RowNorm's exact projected form P RN(P .).
	Projected bool
	// BlockPrefixes claim the Muon parameters (default "blocks.").
	BlockPrefixes []string
	// EmbedNames claim the embedding (default "embed.weight", "embedding").
	EmbedNames []string
	// HeadNames claim the LM head (default "head.weight").
	HeadNames []string
	// KeepBlockSteps keeps Muon's and the embedding's last steps too (the
	// head's is always kept); off by default, as it costs a parameter-sized
	// buffer each.
	KeepBlockSteps bool
}

// Paper's peak learning rates.
const (
	PaperMuonLR  = 8e-3
	PaperEmbedLR = 4e-3
)

// PaperHeadLR returns the paper's peak LR of the head optimizer at width d:
// the d = 512 value (AdamW 4e-3, RowNorm 3.2e-3) scaled by 512/d, the rule
// behind the paper's table: AdamW 4e-3 / 2.667e-3 / 2e-3 and RowNorm
// 3.2e-3 / 2.1333e-3 / 1.6e-3 at d = 512 / 768 / 1024, where 2.667e-3 and
// 2.1333e-3 are 8/3000 and 6.4/3000 rounded for print. d <= 0 means 512.
func PaperHeadLR(head HeadOptimizer, d int) float64 {
	if d <= 0 {
		d = 512
	}
	lr := 3.2e-3
	if head == HeadAdamW {
		lr = 4e-3
	}
	return lr * 512 / float64(d)
}

// PaperRecipe returns the paper's routing: every weight inside the blocks
// to Muon (peak 8e-3), the input embedding to AdamW (peak 4e-3), the LM
// head to RowNorm or AdamW. The three groups, named "blocks", "embed" and
// "head", are stepped in that order; the embedding and head groups are
// required, so a tied head (no separate head parameter, or one sharing the
// embedding's buffer) is refused by NewSet. The head keeps its last step
// (S_t) for the diagnostics.
func PaperRecipe(o PaperOptions) Recipe {
	blocks := o.BlockPrefixes
	if len(blocks) == 0 {
		blocks = []string{"blocks."}
	}
	embed := o.EmbedNames
	if len(embed) == 0 {
		embed = []string{"embed.weight", "embedding"}
	}
	head := o.HeadNames
	if len(head) == 0 {
		head = []string{"head.weight"}
	}
	headLR := o.HeadLR
	if headLR <= 0 {
		headLR = PaperHeadLR(o.Head, o.Width)
	}
	muonLR, embedLR := PaperMuonLR, PaperEmbedLR
	if o.MuonLR > 0 {
		muonLR = o.MuonLR
	}
	if o.EmbedLR > 0 {
		embedLR = o.EmbedLR
	}
	muon := PaperMuon(muonLR)
	muon.KeepStep = o.KeepBlockSteps
	emb := PaperAdamW(embedLR)
	emb.KeepStep = o.KeepBlockSteps
	var headCfg Config
	if o.Head == HeadAdamW {
		c := PaperAdamW(headLR)
		c.KeepStep = true
		headCfg = c
	} else {
		c := PaperRowNorm(headLR)
		c.Projected = o.Projected
		c.KeepStep = true
		headCfg = c
	}
	return Recipe{Groups: []GroupSpec{
		{Name: "blocks", Match: Prefix(blocks...), Config: muon},
		{Name: "embed", Match: Exact(embed...), Config: emb, Required: true},
		{Name: "head", Match: Exact(head...), Config: headCfg, Required: true},
	}}
}
