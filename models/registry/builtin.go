package registry

import (
	"fmt"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/models"
	"github.com/hilbert-ml/hilbert/nn"
)

func init() {
	for _, f := range []Family{paperFamily(), gpt2Family(), llamaFamily()} {
		if err := Register(f); err != nil {
			panic(err)
		}
	}
}

// builtin is the Family name of the models build makes from configs C:
// its presets those of names, looked up by preset; untie, when set, gives
// a built model a head of its own (BuildOptions.UntieHead; unset, the head
// is already untied and asking is an error); Roles names the embedding
// parameters embeds; tied is the family's TiedHead.
func builtin[C any, M Model](name string, names []string, preset func(string) (C, error),
	build func(device.Device, C, uint64) (M, error), untie func(M) error, embeds []string, tied func(any) bool) Family {
	presets := map[string]any{}
	for _, n := range names {
		c, err := preset(n)
		if err != nil {
			panic(err)
		}
		presets[n] = c
	}
	return Family{
		Name:    name,
		Presets: presets,
		Build: func(dev device.Device, cfg any, o BuildOptions) (Model, error) {
			c, err := configOf[C](name, cfg)
			if err != nil {
				return nil, err
			}
			if o.UntieHead && untie == nil {
				return nil, fmt.Errorf("registry: model %q: the head is already untied", name)
			}
			m, err := build(dev, c, o.Seed)
			if err == nil && o.UntieHead {
				err = untie(m)
			}
			if err != nil {
				return nil, err
			}
			return m, nil
		},
		Roles: func(m Model) (Roles, error) {
			return RolesByName(m.Parameters(), embeds, "head.weight", nn.Tied(m))
		},
		TiedHead: tied,
	}
}

// paperFamily is models.Transformer with the paper's presets
// (models.PresetNames); its head is never tied.
func paperFamily() Family {
	return builtin("paper", models.PresetNames(), models.Preset, models.New, nil, []string{"embed.weight"}, nil)
}

// gpt2Family is models.GPT2 with GPT-2's shapes (gpt2, gpt2-medium,
// gpt2-large, gpt2-xl) and gpt2-tiny; its head is tied to the token
// embedding unless BuildOptions.UntieHead.
func gpt2Family() Family {
	return builtin("gpt2", []string{"gpt2-tiny", "gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl"}, models.GPT2Preset,
		models.NewGPT2, (*models.GPT2).UntieHead, []string{"tok.weight", "pos.weight"}, func(any) bool { return true })
}

// llamaFamily is models.Llama (the layout of Hugging Face's Llama, Mistral
// and Qwen2) with llama-tiny and the shapes of smollm-135m, smollm-360m,
// llama-3.2-1b and qwen2-0.5b; a tied head is untied by
// BuildOptions.UntieHead.
func llamaFamily() Family {
	tied := func(cfg any) bool {
		c, ok := cfg.(models.LlamaConfig)
		return ok && c.TieEmbeddings
	}
	return builtin("llama", models.LlamaPresetNames(), models.LlamaPreset, models.NewLlama, (*models.Llama).UntieHead,
		[]string{"embed.weight"}, tied)
}
