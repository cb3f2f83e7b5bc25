// Package train is Hilbert's training loop for the paper's transformer:
// micro-batches with gradient accumulation, the paper's update order
// (backward, global clip, schedule, step each optimizer group), validation
// on a fixed prefix, the LM-head geometry diagnostics (exact D(S_t) and
// Hilbert RMS), JSON-lines metrics, atomic resumable checkpoints and plots.
//
// It is a library: cmd/hilbert/cli's train and compare subcommands are thin
// front ends over Trainer, and user code can drive it the same way, with a
// Hook to watch or extend each update.
//
// This package sits on top: it depends on models, optim, data and
// the layers below them, and nothing depends on it but commands, examples
// and the run dashboard (package view, which reads what it writes), and
// the studies under study/ (which train and measure).
package train

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/models"
	"github.com/hilbert-ml/hilbert/models/registry"
	"github.com/hilbert-ml/hilbert/optim"
)

// Config is everything a run needs. Zero fields take the defaults named in
// their comments (see WithDefaults). The YAML keys are those of the hilbert
// CLI's flags (with _ for -).
type Config struct {
	// Name names the run; its files go to RunsDir/Name. Default "run".
	Name string `yaml:"name"`
	// RunsDir holds one folder per run. Default "runs".
	RunsDir string `yaml:"runs"`

	// Family names the model family the run builds, as registered in
	// models/registry: "paper" (the default) for the paper's transformer,
	// "gpt2", "llama", or one a program registered (flag and key: model).
	Family string `yaml:"model"`
	// Preset names a configuration of the family (registry presets; for
	// the paper's, models.Preset). Model (the paper's family) or Arch
	// (any other), when set, is used instead.
	Preset string        `yaml:"preset"`
	Model  models.Config `yaml:"-"`
	// Arch is the configuration of a family other than the paper's: a
	// value of the family's config type (models.GPT2Config, say); nil
	// means the Preset's.
	Arch any `yaml:"-"`
	// DType is the model's dtype: "float32" (the default, or "") or
	// "float64", a reference run on the CPU whose parameters, activations,
	// gradients, clipping and optimizer state are all float64 (with
	// autocast off). It sets the DType of the model's configuration.
	DType string `yaml:"dtype"`
	// UntieHead gives a model whose head is tied to its embedding (GPT-2's)
	// a separate head, a copy of the embedding at initialisation, so that
	// RowNorm can take it and D(S_t) be measured.
	UntieHead bool `yaml:"untie_head"`
	// InitHF names a Hugging Face model directory (config.json and
	// safetensors, as models/hf reads them) that the run starts from: its
	// config sets Family and Arch (a preset may not be given), and a fresh
	// run's model is its weights (a resumed one's, the checkpoint's). The
	// run records the directory's fingerprint as the setting init_hf.
	InitHF string `yaml:"init_hf"`

	// Head is the LM head's optimizer: "rownorm" (the paper's method) or
	// "adamw" (the baseline). Default "rownorm".
	Head string `yaml:"head"`
	// Projected selects RowNorm's exact projected form P RN(P .).
	Projected bool `yaml:"projected"`
	// MuonLR, EmbedLR and HeadLR override the paper's peak learning rates
	// when positive (0: the paper's).
	MuonLR  float64 `yaml:"muon_lr"`
	EmbedLR float64 `yaml:"embed_lr"`
	HeadLR  float64 `yaml:"head_lr"`

	// Seed initialises the model; DataSeed orders the training data.
	Seed     uint64 `yaml:"seed"`
	DataSeed uint64 `yaml:"data_seed"`

	// TrainShards are llm.c shard files; ValShard is the validation shard.
	TrainShards []string `yaml:"train"`
	ValShard    string   `yaml:"val"`

	// SeqLen is T. Default: the model's context.
	SeqLen int `yaml:"seq_len"`
	// MicroBatch is the number of sequences per forward pass. Default 8.
	MicroBatch int `yaml:"micro_batch"`
	// BatchSeqs is the number of sequences per update (the global batch),
	// a multiple of MicroBatch. Default MicroBatch.
	BatchSeqs int `yaml:"batch_seqs"`

	// Steps is the number of updates to train to. Required.
	Steps int `yaml:"steps"`
	// ScheduleSteps is the horizon T of the learning-rate schedule: linear
	// warmup, then cosine decay to 0.1 of the peak at update T. Updates
	// past it run at 0.1 of the peak. Default: Steps. (A run extended on
	// resume keeps the horizon it started with; see Resume.)
	ScheduleSteps int `yaml:"schedule_steps"`
	// Warmup is W, the number of linear-warmup updates: 0 means the paper's
	// floor(0.1 T) of the schedule's horizon, NoWarmup (-1) none.
	Warmup int `yaml:"warmup"`
	// ClipNorm is the global gradient-norm threshold. Default 1.0.
	ClipNorm float64 `yaml:"clip"`

	// ValEvery runs validation every so many updates (and always before
	// the first update and at the end). ValTokens is the validation prefix
	// length in tokens, cut to what the shard holds. Defaults: 500 updates
	// and 5,242,880 tokens (the paper's).
	ValEvery  int `yaml:"val_every"`
	ValTokens int `yaml:"val_tokens"`
	// DiagEvery computes the exact D(S_t) of the head step every so many
	// updates (and at the last). Default 10.
	DiagEvery int `yaml:"diag_every"`
	// PanelSeqs x PanelPositions is the Hilbert-RMS panel: the first
	// PanelPositions positions of the first PanelSeqs validation
	// sequences. Default 8 x 1024 (cut to SeqLen).
	PanelSeqs      int `yaml:"panel_seqs"`
	PanelPositions int `yaml:"panel_positions"`

	// CheckpointEvery writes a checkpoint every so many updates (and at the
	// end and on interrupt); 0 means only then.
	CheckpointEvery int `yaml:"checkpoint_every"`
	// KeepCheckpoints is how many of the newest checkpoints a run keeps
	// (older step folders are removed once a newer one is in force):
	// 0 means DefaultKeepCheckpoints, KeepAllCheckpoints (or any negative
	// number) every one.
	KeepCheckpoints int `yaml:"keep_checkpoints"`
	// LogEvery writes a metrics line every so many updates (and at every
	// validation and diagnostic). Default 1.
	LogEvery int `yaml:"log_every"`
	// Autocast is "bf16" to run the blocks' matrix products in bfloat16
	// with float32 accumulation (the paper's GPU precision: parameters,
	// optimizer state, norms and logits stay float32), or "" / "off".
	Autocast string `yaml:"autocast"`
	// BlockRows bounds the logits rows the fused head holds at once
	// (0: equal blocks of at most 64M logits).
	BlockRows int `yaml:"block_rows"`
}

// NoWarmup as Config.Warmup asks for no warmup at all.
const NoWarmup = -1

// WithDefaults returns c with zero fields set to their defaults and the
// model resolved from Preset. It is idempotent.
func (c Config) WithDefaults() (Config, error) {
	c.Name = cmp.Or(c.Name, "run")
	c.RunsDir = cmp.Or(c.RunsDir, "runs")
	if err := c.resolveModel(); err != nil {
		return c, err
	}
	if err := c.applyDType(); err != nil {
		return c, err
	}
	c.Head = cmp.Or(c.Head, "rownorm")
	if c.SeqLen == 0 {
		c.SeqLen = c.Sizes().Context
	}
	c.MicroBatch = cmp.Or(c.MicroBatch, 8)
	c.BatchSeqs = cmp.Or(c.BatchSeqs, c.MicroBatch)
	c.ScheduleSteps = cmp.Or(c.ScheduleSteps, c.Steps)
	if c.Warmup == 0 {
		c.Warmup = cmp.Or(c.ScheduleSteps/10, NoWarmup) // NoWarmup keeps WithDefaults idempotent
	}
	c.ClipNorm = cmp.Or(c.ClipNorm, 1)
	c.ValEvery = cmp.Or(c.ValEvery, 500)
	c.ValTokens = cmp.Or(c.ValTokens, 5_242_880)
	c.DiagEvery = cmp.Or(c.DiagEvery, 10)
	c.PanelSeqs = cmp.Or(c.PanelSeqs, 8)
	c.PanelPositions = cmp.Or(c.PanelPositions, 1024)
	if c.PanelPositions > 0 {
		c.PanelPositions = min(c.PanelPositions, c.SeqLen)
	}
	c.LogEvery = cmp.Or(c.LogEvery, 1)
	return c, c.Validate()
}

// PaperFamily is the registry name of the paper's transformer, the family
// of a Config whose Family is empty.
const PaperFamily = "paper"

// FamilyName returns the run's model family: Family, or PaperFamily when
// it is empty.
func (c Config) FamilyName() string {
	if c.Family == "" {
		return PaperFamily
	}
	return c.Family
}

// IsPaper reports whether the run trains the paper's transformer (whose
// configuration is Model; any other family's is Arch).
func (c Config) IsPaper() bool { return c.FamilyName() == PaperFamily }

// resolveModel sets the model's configuration from Preset where it is
// not given: Model for the paper's family, Arch for any other.
func (c *Config) resolveModel() error {
	if c.InitHF != "" {
		if err := c.resolveInitHF(); err != nil { // init_hf.go
			return err
		}
	}
	if c.IsPaper() {
		if c.Arch != nil {
			return fmt.Errorf("train: config: arch is set (%T) for the paper's model, whose configuration is Model", c.Arch)
		}
		if c.Model.Layers != 0 {
			return nil
		}
		if c.Preset == "" {
			return errors.New("train: config: no model: set preset or model")
		}
		m, err := models.Preset(c.Preset)
		if err != nil {
			return fmt.Errorf("train: config: %w", err)
		}
		c.Model = m
		return nil
	}
	fam, err := registry.Lookup(c.Family)
	if err != nil {
		return fmt.Errorf("train: config: model: %w", err)
	}
	if c.Model != (models.Config{}) {
		return fmt.Errorf("train: config: model %q takes its configuration in Arch; Model (the paper's) is set", c.Family)
	}
	if c.Arch != nil {
		return nil
	}
	if c.Preset == "" {
		return fmt.Errorf("train: config: no configuration for model %q: set preset (%s) or arch", c.Family, strings.Join(fam.PresetNames(), ", "))
	}
	if c.Arch, err = fam.Preset(c.Preset); err != nil {
		return fmt.Errorf("train: config: %w", err)
	}
	return nil
}

// validateModel checks the model's configuration.
func (c Config) validateModel() error {
	if c.IsPaper() {
		return c.Model.Validate()
	}
	fam, err := registry.Lookup(c.Family)
	if err != nil {
		return err
	}
	if err := fam.CheckConfig(c.Arch); err != nil {
		return err
	}
	if s := c.Sizes(); s.Vocab < 1 || s.Context < 1 {
		return fmt.Errorf("%T has vocab %d and context %d: the trainer needs a language model's Vocab and Context fields", c.Arch, s.Vocab, s.Context)
	}
	return nil
}

// checkTiedHead refuses a head recipe that a head tied to the embedding
// cannot take (RowNorm, a head LR), before the model is built.
func (c Config) checkTiedHead() error {
	if c.IsPaper() {
		return nil
	}
	fam, err := registry.Lookup(c.Family)
	if err != nil || !fam.Tied(c.Arch, registry.BuildOptions{UntieHead: c.UntieHead}) {
		return nil // an unknown family is validateModel's to name
	}
	head, _ := c.HeadOptimizer()
	return registry.CheckTiedRecipe("the embedding", registry.RecipeOptions{Head: head, HeadLR: c.HeadLR})
}

// Sizes returns the model's size fields (vocabulary, context, width,
// layers, heads) whatever its family.
func (c Config) Sizes() registry.Sizes {
	if c.IsPaper() {
		m := c.Model
		heads := 0
		if m.HeadDim > 0 {
			heads = m.Dim / m.HeadDim
		}
		return registry.Sizes{Layers: m.Layers, Dim: m.Dim, Heads: heads, Context: m.Context, Vocab: m.Vocab}
	}
	return registry.SizesOf(c.Arch)
}

// WarmupSteps is the number of warmup updates of a config with defaults
// applied (NoWarmup counts 0).
func (c Config) WarmupSteps() int { return max(c.Warmup, 0) }

// Validate reports every inconsistent field, by its name.
func (c Config) Validate() error {
	var errs []string
	bad := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	if err := c.validateModel(); err != nil {
		bad("model: %v", err)
	} else if err := c.checkTiedHead(); err != nil {
		bad("%v", err)
	}
	if _, err := c.HeadOptimizer(); err != nil {
		bad("%v", err)
	}
	if c.Steps < 1 {
		bad("steps = %d: want at least 1", c.Steps)
	}
	if c.ScheduleSteps < 1 {
		bad("schedule_steps = %d: want at least 1", c.ScheduleSteps)
	}
	if c.Warmup < NoWarmup {
		bad("warmup = %d: want a count of updates (or NoWarmup)", c.Warmup)
	}
	if c.Warmup >= c.ScheduleSteps && c.ScheduleSteps > 0 {
		bad("warmup = %d: want fewer than the schedule's %d updates", c.Warmup, c.ScheduleSteps)
	}
	if ctx := c.Sizes().Context; c.SeqLen < 1 || c.SeqLen > ctx {
		bad("seq_len = %d: want 1..%d (the model's context)", c.SeqLen, ctx)
	}
	if c.MicroBatch < 1 || c.BatchSeqs < c.MicroBatch || c.BatchSeqs%c.MicroBatch != 0 {
		bad("batch_seqs = %d, micro_batch = %d: want batch_seqs a positive multiple of micro_batch", c.BatchSeqs, c.MicroBatch)
	}
	if len(c.TrainShards) == 0 {
		bad("train: no training shards given")
	}
	if c.ValShard == "" {
		bad("val: no validation shard given")
	}
	for _, lr := range []struct {
		name string
		v    float64
	}{{"muon_lr", c.MuonLR}, {"embed_lr", c.EmbedLR}, {"head_lr", c.HeadLR}} {
		if !(lr.v >= 0) || math.IsInf(lr.v, 0) {
			bad("%s = %g: want a finite learning rate >= 0 (0: the paper's)", lr.name, lr.v)
		}
	}
	if !(c.ClipNorm > 0) || math.IsInf(c.ClipNorm, 0) {
		bad("clip = %g: want a finite norm > 0", c.ClipNorm)
	}
	if c.ValTokens < c.SeqLen+1 {
		bad("val_tokens = %d: want at least seq_len+1 = %d", c.ValTokens, c.SeqLen+1)
	}
	for _, iv := range []struct {
		name string
		v    int
	}{{"val_every", c.ValEvery}, {"diag_every", c.DiagEvery}, {"log_every", c.LogEvery},
		{"panel_seqs", c.PanelSeqs}, {"panel_positions", c.PanelPositions}} {
		if iv.v < 1 {
			bad("%s = %d: want at least 1", iv.name, iv.v)
		}
	}
	if c.CheckpointEvery < 0 {
		bad("checkpoint_every = %d: want >= 0 (0: only at the end and on interrupt)", c.CheckpointEvery)
	}
	if c.BlockRows < 0 {
		bad("block_rows = %d: want >= 0 (0: automatic)", c.BlockRows)
	}
	if ac, err := c.AutocastDType(); err != nil {
		bad("%v", err)
	} else if dt, err := c.ModelDType(); err != nil {
		bad("%v", err)
	} else if dt == device.Float64 && ac != 0 {
		bad("dtype = float64 with autocast = %s: a float64 run keeps every product in float64; set autocast off", c.Autocast)
	}
	if strings.ContainsAny(c.Name, `/\`) || c.Name == "." || c.Name == ".." {
		bad("name %q: want a plain folder name", c.Name)
	}
	if len(errs) > 0 {
		return fmt.Errorf("train: config: %s", strings.Join(errs, "; "))
	}
	return nil
}

// HeadOptimizer parses Head.
func (c Config) HeadOptimizer() (optim.HeadOptimizer, error) {
	switch strings.ToLower(c.Head) {
	case "rownorm", "":
		return optim.HeadRowNorm, nil
	case "adamw":
		return optim.HeadAdamW, nil
	}
	return 0, fmt.Errorf("head = %q: want rownorm or adamw", c.Head)
}

// ModelDType parses DType: device.Float32 or device.Float64.
func (c Config) ModelDType() (device.DType, error) {
	switch strings.ToLower(c.DType) {
	case "", "float32", "f32", "fp32":
		return device.Float32, nil
	case "float64", "f64", "fp64":
		return device.Float64, nil
	}
	return 0, fmt.Errorf("dtype = %q: want float32 or float64", c.DType)
}

// applyDType sets the model configuration's DType from DType (float64
// only: float32 is every configuration's zero value).
func (c *Config) applyDType() error {
	dt, err := c.ModelDType()
	if err != nil || dt != device.Float64 {
		return nil // Validate names a bad dtype
	}
	if c.IsPaper() {
		c.Model.DType = dt
		return nil
	}
	arch, err := registry.WithDType(c.Arch, dt)
	if err != nil {
		return fmt.Errorf("train: config: dtype = float64: %w", err)
	}
	c.Arch = arch
	return nil
}

// AutocastDType parses Autocast: 0 for off.
func (c Config) AutocastDType() (device.DType, error) {
	switch strings.ToLower(c.Autocast) {
	case "", "off", "none", "fp32", "float32":
		return 0, nil
	case "bf16", "bfloat16":
		return device.BFloat16, nil
	}
	return 0, fmt.Errorf("autocast = %q: want bf16 or off", c.Autocast)
}
