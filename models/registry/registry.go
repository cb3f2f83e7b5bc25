// Package registry is the table of model families a run layer builds
// from: a family registers a name, its presets, a builder from a config
// and the parameter roles an optimizer recipe needs (embedding, head,
// block matrices, gains and biases), as database/sql drivers and image
// formats register themselves. Recipe builds the optimizer recipe from the
// roles alone, so -head, -muon-lr, -embed-lr and -head-lr mean the same
// for every family. Built in: "paper" (models.Transformer with the
// paper's presets), "gpt2" (models.GPT2, gpt2-tiny ... gpt2-xl) and
// "llama" (models.Llama, llama-tiny and the shapes of SmolLM, Llama 3.2
// and Qwen2 small models); a user's program registers its own family with
// Register.
//
// This package builds on models, optim, nn, tensor and device. It must not
// import train, data or cmd: they import it.
package registry

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/models"
	"github.com/hilbert-ml/hilbert/tensor"
)

// Model is a built model as the run layer sees it: a language model
// Generate samples from, with named parameters.
type Model interface {
	models.LM
	// Parameters returns the model's parameters, named, each once.
	Parameters() []*tensor.Tensor
}

// BuildOptions are the options of a build that are not the family's
// config.
type BuildOptions struct {
	// Seed keys the initialisation.
	Seed uint64
	// UntieHead gives a model whose head is tied to its embedding a
	// separate head, a copy of the embedding at initialisation (so that
	// RowNorm can take it); an error for a family that cannot untie.
	UntieHead bool
}

// Family is one registered model family.
type Family struct {
	// Name is the family's name ("paper", "gpt2").
	Name string
	// Presets are its named configurations (each a value of the family's
	// config type).
	Presets map[string]any
	// Build builds a model of config cfg (the family's config type) on dev.
	Build func(dev device.Device, cfg any, o BuildOptions) (Model, error)
	// Roles gives every parameter of a model the family built its role.
	Roles func(m Model) (Roles, error)
	// TiedHead, when set, reports whether a model of config cfg has its
	// head tied to its embedding (before BuildOptions.UntieHead), so that
	// a run layer can refuse a recipe a tied head cannot take before it
	// builds anything; nil means never tied.
	TiedHead func(cfg any) bool
}

// Tied reports whether the family's model of config cfg would have a head
// tied to its embedding, given the build options.
func (f *Family) Tied(cfg any, o BuildOptions) bool {
	return f.TiedHead != nil && !o.UntieHead && f.TiedHead(cfg)
}

var (
	mu       sync.RWMutex
	families = map[string]*Family{}
)

// Register adds a family; a name registered twice, an empty name, or a
// family without Build or Roles is an error.
func Register(f Family) error {
	if f.Name == "" || f.Build == nil || f.Roles == nil {
		return fmt.Errorf("registry: family %q: want a name, Build and Roles", f.Name)
	}
	mu.Lock()
	defer mu.Unlock()
	if _, dup := families[f.Name]; dup {
		return fmt.Errorf("registry: model family %q is already registered", f.Name)
	}
	families[f.Name] = &f
	return nil
}

// Lookup returns the family registered as name; an unknown name is an
// error that lists the registered ones.
func Lookup(name string) (*Family, error) {
	mu.RLock()
	defer mu.RUnlock()
	f, ok := families[name]
	if !ok {
		return nil, fmt.Errorf("registry: unknown model %q (have %s)", name, strings.Join(namesLocked(), ", "))
	}
	return f, nil
}

// Names returns the registered family names, sorted.
func Names() []string {
	mu.RLock()
	defer mu.RUnlock()
	return namesLocked()
}

func namesLocked() []string {
	return slices.Sorted(maps.Keys(families))
}

// PresetNames returns the family's preset names, sorted.
func (f *Family) PresetNames() []string {
	return slices.Sorted(maps.Keys(f.Presets))
}

// Preset returns the named configuration; an unknown name is an error
// that names the family and lists its presets.
func (f *Family) Preset(name string) (any, error) {
	c, ok := f.Presets[name]
	if !ok {
		return nil, fmt.Errorf("registry: model %q has no preset %q (have %s)", f.Name, name, strings.Join(f.PresetNames(), ", "))
	}
	return c, nil
}

// BuildPreset builds the named preset of the family on dev.
func (f *Family) BuildPreset(dev device.Device, preset string, o BuildOptions) (Model, error) {
	cfg, err := f.Preset(preset)
	if err != nil {
		return nil, err
	}
	return f.Build(dev, cfg, o)
}

// configOf returns cfg as the family's config type C, or an error naming
// both types.
func configOf[C any](family string, cfg any) (C, error) {
	c, ok := cfg.(C)
	if !ok {
		var want C
		return want, fmt.Errorf("registry: model %q takes a %T config, got %T", family, want, cfg)
	}
	return c, nil
}
