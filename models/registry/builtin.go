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

// paperFamily is models.Transformer with the paper's presets
// (models.PresetNames); its head is never tied.
func paperFamily() Family {
	presets := map[string]any{}
	for _, n := range models.PresetNames() {
		c, _ := models.Preset(n)
		presets[n] = c
	}
	return Family{
		Name:    "paper",
		Presets: presets,
		Build: func(dev device.Device, cfg any, o BuildOptions) (Model, error) {
			c, err := configOf[models.Config]("paper", cfg)
			if err != nil {
				return nil, err
			}
			if o.UntieHead {
				return nil, fmt.Errorf("registry: model \"paper\": the head is already untied")
			}
			return models.New(dev, c, o.Seed)
		},
		Roles: func(m Model) (Roles, error) {
			return RolesByName(m.Parameters(), []string{"embed.weight"}, "head.weight", nn.Tied(m))
		},
	}
}

// gpt2Family is models.GPT2 with GPT-2's shapes (gpt2, gpt2-medium,
// gpt2-large, gpt2-xl) and gpt2-tiny; its head is tied to the token
// embedding unless BuildOptions.UntieHead.
func gpt2Family() Family {
	presets := map[string]any{}
	for _, n := range []string{"gpt2-tiny", "gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl"} {
		c, err := models.GPT2Preset(n)
		if err != nil {
			panic(err)
		}
		presets[n] = c
	}
	return Family{
		Name:    "gpt2",
		Presets: presets,
		Build: func(dev device.Device, cfg any, o BuildOptions) (Model, error) {
			c, err := configOf[models.GPT2Config]("gpt2", cfg)
			if err != nil {
				return nil, err
			}
			m, err := models.NewGPT2(dev, c, o.Seed)
			if err != nil {
				return nil, err
			}
			if o.UntieHead {
				if err := m.UntieHead(); err != nil {
					return nil, err
				}
			}
			return m, nil
		},
		Roles: func(m Model) (Roles, error) {
			return RolesByName(m.Parameters(), []string{"tok.weight", "pos.weight"}, "head.weight", nn.Tied(m))
		},
		TiedHead: func(any) bool { return true },
	}
}

// llamaFamily is models.Llama (the layout of Hugging Face's Llama, Mistral
// and Qwen2) with llama-tiny and the shapes of smollm-135m, smollm-360m,
// llama-3.2-1b and qwen2-0.5b; a tied head is untied by
// BuildOptions.UntieHead.
func llamaFamily() Family {
	presets := map[string]any{}
	for _, n := range models.LlamaPresetNames() {
		c, _ := models.LlamaPreset(n)
		presets[n] = c
	}
	return Family{
		Name:    "llama",
		Presets: presets,
		Build: func(dev device.Device, cfg any, o BuildOptions) (Model, error) {
			c, err := configOf[models.LlamaConfig]("llama", cfg)
			if err != nil {
				return nil, err
			}
			m, err := models.NewLlama(dev, c, o.Seed)
			if err == nil && o.UntieHead {
				err = m.UntieHead()
			}
			if err != nil {
				return nil, err
			}
			return m, nil
		},
		Roles: func(m Model) (Roles, error) {
			return RolesByName(m.Parameters(), []string{"embed.weight"}, "head.weight", nn.Tied(m))
		},
		TiedHead: func(cfg any) bool {
			c, ok := cfg.(models.LlamaConfig)
			return ok && c.TieEmbeddings
		},
	}
}
