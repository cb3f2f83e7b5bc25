package cli

import (
	"flag"
	"fmt"
	"strings"

	"github.com/hilbert-ml/hilbert/models"
	"github.com/hilbert-ml/hilbert/models/registry"
)

// benchModelChoice is the model the model benches build: the -model and
// -preset flags, and the -layers, -dim and -heads flags that change a
// preset's shape without a preset of its own (the paper model at d 256
// with 4 layers, GPT-2 at d 256 with 4 heads).
type benchModelChoice struct {
	family, preset     string
	layers, dim, heads int
}

// flags declares the choice's flags with the bench's default family and
// preset.
func (c *benchModelChoice) flags(fs *flag.FlagSet, family, preset string) {
	fs.StringVar(&c.family, "model", family, "model family: "+strings.Join(registry.Names(), ", "))
	fs.StringVar(&c.preset, "preset", preset, "model preset of the family ("+presetsUsage()+")")
	fs.IntVar(&c.layers, "layers", 0, "blocks (0: the preset's)")
	fs.IntVar(&c.dim, "dim", 0, "model width (0: the preset's; the paper model's MLP follows at 4 dim)")
	fs.IntVar(&c.heads, "heads", 0, "attention heads, for a family with a Heads size (0: the preset's)")
}

// config looks up the family and returns it with its preset's config, the
// sizes set; errors are cmd's usage errors naming the flag (a size flag
// the family's config has no field for among them).
func (c benchModelChoice) config(cmd string) (*registry.Family, any, error) {
	fam, err := registry.Lookup(c.family)
	if err != nil {
		return nil, nil, usageErr(cmd, fmt.Errorf("-model: %w", err))
	}
	cfg, err := fam.Preset(c.preset)
	if err != nil {
		return nil, nil, usageErr(cmd, fmt.Errorf("-preset: %w", err))
	}
	for _, s := range []struct {
		flag  string
		field registry.Size
		v     int
	}{{"layers", registry.Layers, c.layers}, {"dim", registry.Dim, c.dim}, {"heads", registry.Heads, c.heads}} {
		if s.v == 0 {
			continue
		}
		if s.v < 0 {
			return nil, nil, usageErr(cmd, fmt.Errorf("-%s %d: want a positive size (0: the preset's)", s.flag, s.v))
		}
		if cfg, err = registry.WithSize(cfg, s.field, s.v); err != nil {
			return nil, nil, usageErr(cmd, fmt.Errorf("-%s: %w", s.flag, err))
		}
	}
	if mc, ok := cfg.(models.Config); ok && c.dim > 0 {
		mc.MLPHidden = 4 * c.dim
		cfg = mc
	}
	return fam, cfg, nil
}
