package cli

import (
	"flag"
	"fmt"

	"github.com/hilbert-ml/hilbert/models"
	"github.com/hilbert-ml/hilbert/models/registry"
)

// benchSizes are the -layers, -dim and -heads flags of the model benches:
// a preset's shape changed without a preset of its own (the paper model
// at d 256 with 4 layers, GPT-2 at d 256 with 4 heads).
type benchSizes struct {
	layers, dim, heads int
}

func (z *benchSizes) flags(fs *flag.FlagSet) {
	fs.IntVar(&z.layers, "layers", 0, "blocks (0: the preset's)")
	fs.IntVar(&z.dim, "dim", 0, "model width (0: the preset's; the paper model's MLP follows at 4 dim)")
	fs.IntVar(&z.heads, "heads", 0, "attention heads, for a family with a Heads size (0: the preset's)")
}

// apply returns cfg with the sizes set, an error naming a flag the
// family's config has no field for.
func (z benchSizes) apply(cfg any) (any, error) {
	for _, s := range []struct {
		flag  string
		field registry.Size
		v     int
	}{{"layers", registry.Layers, z.layers}, {"dim", registry.Dim, z.dim}, {"heads", registry.Heads, z.heads}} {
		if s.v == 0 {
			continue
		}
		if s.v < 0 {
			return nil, fmt.Errorf("-%s %d: want a positive size (0: the preset's)", s.flag, s.v)
		}
		next, err := registry.WithSize(cfg, s.field, s.v)
		if err != nil {
			return nil, fmt.Errorf("-%s: %w", s.flag, err)
		}
		cfg = next
	}
	if c, ok := cfg.(models.Config); ok && z.dim > 0 {
		c.MLPHidden = 4 * z.dim
		cfg = c
	}
	return cfg, nil
}
