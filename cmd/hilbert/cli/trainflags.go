package cli

// The train and compare command line: the flags, the config file over
// them and the job they resolve to, checked before any data is read.

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/models"
	"github.com/hilbert-ml/hilbert/models/registry"
	"github.com/hilbert-ml/hilbert/tokenizer"
	"github.com/hilbert-ml/hilbert/train"
)

// trainFile is a training job: train.Config plus the CLI's own settings.
type trainFile struct {
	train.Config
	Text          []string
	TextValTokens int
	Device        string
	Threads       int
}

// defaultJob is the embedded default: a small model on Opticks that
// finishes in a few minutes on 2 cores.
func defaultJob() trainFile {
	return trainFile{
		Config: train.Config{
			Name: "opticks", RunsDir: "runs", Head: "rownorm",
			Model:      models.Config{Layers: 2, Dim: 128, HeadDim: 64, MLPHidden: 512, Vocab: models.PaperVocab, Context: 128, RoPEBase: 10000, InitStd: 0.02},
			MicroBatch: 8, BatchSeqs: 16,
			Steps: 120, ValEvery: 40, ValTokens: 16_384, DiagEvery: 20,
			PanelSeqs: 8, PanelPositions: 128, CheckpointEvery: 40, LogEvery: 1, ClipNorm: 1,
			KeepCheckpoints: train.DefaultKeepCheckpoints,
			// A short run on a tiny corpus needs larger steps than the
			// paper's 20-tokens-per-parameter horizon.
			MuonLR: 0.02, EmbedLR: 0.02, HeadLR: 0.01,
			Autocast: "auto",
		},
		TextValTokens: 16_385,
		Device:        "cpu",
	}
}

// trainSetup is a parsed train (or compare) command line.
type trainSetup struct {
	job                                 trainFile
	resume, overwrite, quiet, breakLock bool
	dev                                 device.Device
	// set holds the flags given, on the command line or in the config.
	set map[string]bool
	// command is recorded in the run's lock file.
	command string
}

// parseTrainFlags parses the flags shared by train and compare (and the
// config file); extra adds a command's own flags. It returns nil, nil
// when help was asked for.
func parseTrainFlags(name, usage string, args []string, stderr io.Writer, extra func(fs *flag.FlagSet)) (*trainSetup, error) {
	fs := newFlagSet(name, usage, stderr)
	job := defaultJob()
	var f commandFlags
	f.define(fs, &job)
	if extra != nil {
		extra(fs)
	}
	if stop, err := parseCommand(fs, args); stop {
		return nil, err
	}
	st, err := setupTrain(fs, name, args, &job, &f)
	if err != nil {
		return nil, usageErr(name, err)
	}
	st.resume, st.overwrite, st.quiet, st.breakLock = f.resume, f.overwrite, f.quiet, f.breakLock
	if f.resume && f.overwrite {
		return nil, usageErr(name, errors.New("-resume and -overwrite: pick one (continue the checkpoint, or start over)"))
	}
	if job.Threads > 0 {
		cpu.SetThreads(job.Threads)
	}
	c := &st.job.Config
	if st.dev, err = openDevice(st.job.Device); err != nil {
		return nil, err
	}
	if c.Autocast == "auto" || c.Autocast == "" {
		c.Autocast = "off"
		if st.dev.Name() != "cpu" {
			c.Autocast = "bf16"
		}
	}
	return st, nil
}

// commandFlags are the flags of train and compare that are not settings of
// the job: the config file, the training shards' globs, the model's
// overrides and how the command treats the run.
type commandFlags struct {
	configPath                          string
	trainGlobs                          []string
	layers, dim, context                int
	resume, overwrite, quiet, breakLock bool
}

// define adds the flags shared by train and compare to fs: f's, and the
// job's settings, which it sets.
func (f *commandFlags) define(fs *flag.FlagSet, job *trainFile) {
	c := &job.Config
	fs.StringVar(&f.configPath, "config", "", "YAML config file: keys are the flag names with _ for - (flags override it)")
	fs.StringVar(&c.Name, "name", c.Name, "run name: output goes to RUNS/NAME")
	fs.StringVar(&c.RunsDir, "runs", c.RunsDir, "folder holding the runs")
	fs.StringVar(&c.Family, "model", "", "model family: "+strings.Join(registry.Names(), ", ")+" (default paper, the paper's transformer), or one a program registered")
	fs.StringVar(&c.Preset, "preset", "", "model preset: "+presetsUsage()+" (default: the default job's d 128, 2 layers, context 128; another -model needs one)")
	fs.StringVar(&c.DType, "dtype", "", "the model's dtype: float32 (default) or float64, a reference run on the CPU with every step in float64")
	fs.StringVar(&c.InitHF, "init-hf", "", "start from the Hugging Face model `directory` DIR (config.json and safetensors: GPT-2, Llama, Mistral, Qwen2): it sets -model and the configuration (no -preset), and a fresh run's weights; the data must be the model's token ids (-text tokenizes with GPT-2's tokenizer)")
	fs.BoolVar(&c.UntieHead, "untie-head", false, "give a model whose head is tied to its embedding (gpt2) a separate head, a copy of the embedding at initialisation, so that RowNorm can take it")
	positive(fs, &f.layers, "layers", 0, "override the model's number of blocks")
	positive(fs, &f.dim, "dim", 0, "override the model width d (and the MLP to 4d)")
	positive(fs, &f.context, "context", 0, "override the model's context length")
	fs.StringVar(&c.Head, "head", c.Head, "LM-head optimizer: rownorm or adamw")
	fs.BoolVar(&c.Projected, "projected", false, "use RowNorm's exact projected form P RN(P .)")
	floatFlag(fs, &c.MuonLR, "muon-lr", c.MuonLR, false, "Muon peak LR (0: the paper's 8e-3)")
	floatFlag(fs, &c.EmbedLR, "embed-lr", c.EmbedLR, false, "embedding AdamW peak LR (0: the paper's 4e-3)")
	floatFlag(fs, &c.HeadLR, "head-lr", c.HeadLR, false, "head peak LR (0: the paper's value for the width)")
	fs.Uint64Var(&c.Seed, "seed", 0, "model initialisation seed")
	fs.Uint64Var(&c.DataSeed, "data-seed", 0, "training data order seed")
	fs.Var(listValue{&f.trainGlobs}, "train", "training shards: comma-separated `files` or globs, e.g. 'fineweb10B/fineweb_train_*.bin'")
	fs.StringVar(&c.ValShard, "val", "", "validation shard (with -train)")
	fs.Var(listValue{&job.Text}, "text", "comma-separated text `files` to tokenize on the fly instead of shards")
	positive(fs, &job.TextValTokens, "text-val-tokens", job.TextValTokens, "with -text: tokens sent to the validation shard")
	nonNegative(fs, &c.SeqLen, "seq-len", 0, "sequence length T (0: the model's context)")
	positive(fs, &c.MicroBatch, "micro-batch", c.MicroBatch, "sequences per forward pass")
	positive(fs, &c.BatchSeqs, "batch-seqs", c.BatchSeqs, "sequences per update (a multiple of -micro-batch; gradient accumulation)")
	positive(fs, &c.Steps, "steps", c.Steps, "number of updates")
	nonNegative(fs, &c.ScheduleSteps, "schedule-steps", 0, "horizon T of the LR schedule: warmup, cosine decay to 0.1 of the peak at T, then 0.1 (0: -steps; on resume: the checkpoint's)")
	fs.Var(warmupValue{&c.Warmup}, "warmup", "`N` warmup updates, 0 for none (default floor(0.1 T))")
	floatFlag(fs, &c.ClipNorm, "clip", c.ClipNorm, true, "global gradient-norm clip")
	positive(fs, &c.ValEvery, "val-every", c.ValEvery, "validate every N updates (and before the first and after the last)")
	positive(fs, &c.ValTokens, "val-tokens", c.ValTokens, "validation prefix length in tokens (cut to the shard)")
	positive(fs, &c.DiagEvery, "diag-every", c.DiagEvery, "exact D(S_t) every N updates (and at the end)")
	positive(fs, &c.PanelSeqs, "panel-seqs", c.PanelSeqs, "Hilbert-RMS panel: validation sequences")
	positive(fs, &c.PanelPositions, "panel-positions", c.PanelPositions, "Hilbert-RMS panel: positions per sequence (cut to -seq-len)")
	nonNegative(fs, &c.CheckpointEvery, "checkpoint-every", c.CheckpointEvery, "checkpoint every N updates, 0 for only at the end and on a signal")
	fs.Var(keepValue{&c.KeepCheckpoints}, "keep-checkpoints", "keep the newest `N` checkpoints, removing older step folders once a newer one is in force (0: all)")
	positive(fs, &c.LogEvery, "log-every", c.LogEvery, "metrics line every N updates (and at every validation and diagnostic)")
	nonNegative(fs, &c.BlockRows, "block-rows", 0, "rows of logits the fused head holds at once (0: equal blocks of at most 64M logits)")
	fs.BoolVar(&f.resume, "resume", false, "continue the run's latest checkpoint")
	fs.BoolVar(&f.overwrite, "overwrite", false, "start over even if the run has a checkpoint")
	fs.BoolVar(&f.breakLock, "break-lock", false, "take over a stale run lock (left by a process that died); a live holder's lock is never broken")
	fs.StringVar(&job.Device, "device", job.Device, "cpu or cuda[:N]")
	positive(fs, &job.Threads, "threads", 0, "CPU threads for kernels and OpenBLAS (default GOMAXPROCS)")
	fs.StringVar(&c.Autocast, "autocast", c.Autocast, "bf16 (block matrix products in bfloat16, the paper's GPU precision), off, or auto (bf16 on cuda, off on cpu)")
	fs.BoolVar(&f.quiet, "quiet", false, "no progress bar, progress or validation lines")
}

// setupTrain is parseTrainFlags after the flags are parsed: the config
// file, the model, the data, and every check of the settings (before any
// data is tokenized). Its errors are usage errors. The config file sets
// f's fields and the job's settings too.
func setupTrain(fs *flag.FlagSet, name string, args []string, job *trainFile, f *commandFlags) (*trainSetup, error) {
	c := &job.Config
	cmdSet := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { cmdSet[f.Name] = true })
	set := map[string]bool{}
	for k := range cmdSet {
		set[k] = true
	}
	modelSec, err := applyConfigFile(fs, f.configPath, cmdSet, set)
	if err != nil {
		return nil, err
	}
	// An empty name or runs folder would put the run's data and lock in
	// the runs folder itself or in the working directory.
	for _, f := range []struct{ flag, value, want string }{
		{"name", c.Name, "a folder name for the run (output goes to RUNS/NAME)"},
		{"runs", c.RunsDir, "the folder that holds the runs"},
	} {
		if set[f.flag] && strings.TrimSpace(f.value) == "" {
			return nil, fmt.Errorf("-%s is empty: want %s", f.flag, f.want)
		}
	}
	if err := resolveModel(c, set, modelSec, f.layers, f.dim, f.context); err != nil {
		return nil, err
	}
	if set["train"] {
		m, err := expandGlobs(f.trainGlobs)
		if err != nil {
			return nil, err
		}
		c.TrainShards = m
	}
	switch {
	case set["train"] && set["text"]:
		return nil, errors.New("-train and -text: give shards or text files, not both")
	case set["train"] && c.ValShard == "":
		return nil, errors.New("-train needs -val, the validation shard")
	case set["val"] && !set["train"]:
		return nil, errors.New("-val needs -train (with -text, the validation split is the first -text-val-tokens tokens)")
	}
	// Every setting is checked before any data is tokenized.
	check := *c
	if len(check.TrainShards) == 0 {
		check.TrainShards, check.ValShard = []string{"text"}, "text"
	}
	if check.Autocast == "auto" {
		check.Autocast = ""
	}
	resolved, err := check.WithDefaults()
	if err != nil {
		return nil, err
	}
	if c.InitHF != "" {
		// The directory's model, as train.New will resolve it.
		c.Family, c.Arch, c.UntieHead = resolved.Family, resolved.Arch, resolved.UntieHead
		if v := resolved.Sizes().Vocab; !set["train"] && v < tokenizer.VocabSize {
			return nil, fmt.Errorf("-init-hf %s: the model's vocabulary of %d is smaller than GPT-2's %d, whose token ids -text (or the default job) trains on: give -train and -val shards of the model's token ids", c.InitHF, v, tokenizer.VocabSize)
		}
	}
	return &trainSetup{job: *job, set: set, command: strings.TrimSpace("hilbert " + name + " " + strings.Join(args, " "))}, nil
}

// applyConfigFile sets the flags of fs that the config file at path (none
// when empty) gives and the command line (cmdSet) does not, adding them to
// set, and returns its model section, unless -preset replaces it.
func applyConfigFile(fs *flag.FlagSet, path string, cmdSet, set map[string]bool) (*modelSection, error) {
	if path == "" {
		return nil, nil
	}
	cf, err := readConfigFile(path)
	if err != nil {
		return nil, err
	}
	fileSet, err := cf.apply(fs, cmdSet)
	if err != nil {
		return nil, err
	}
	for k := range fileSet {
		set[k] = true
	}
	if cf.model == nil {
		return nil, nil
	}
	for _, k := range []string{"layers", "dim", "context"} {
		if cf.model.keys[k] && fileSet[k] {
			return nil, fmt.Errorf("config %s: %s is set both at the top and in the model section", path, k)
		}
	}
	switch {
	case fileSet["preset"]:
		return nil, fmt.Errorf("config %s: set preset or a model section, not both", path)
	case cmdSet["preset"]: // -preset replaces the file's model
		return nil, nil
	}
	return cf.model, nil
}

// resolveModel sets c.Model: the default job's model, or the preset, or
// the config file's model section over the default job's; then -layers,
// -dim (with the MLP at 4d unless the section gives mlp_hidden) and
// -context.
func resolveModel(c *train.Config, set map[string]bool, sec *modelSection, layers, dim, context_ int) error {
	if c.InitHF != "" {
		return resolveInitHF(c, set, sec)
	}
	if !c.IsPaper() {
		return resolveFamily(c, set, sec, layers, dim, context_)
	}
	m := c.Model
	if set["preset"] && c.Preset != "" {
		p, err := models.Preset(c.Preset)
		if err != nil {
			return fmt.Errorf("-preset: %w", err)
		}
		m = p
	}
	if sec != nil {
		for _, f := range []struct {
			p *int
			v *int
		}{{&m.Layers, sec.Layers}, {&m.Dim, sec.Dim}, {&m.HeadDim, sec.HeadDim}, {&m.Vocab, sec.Vocab}, {&m.Context, sec.Context}} {
			if f.v != nil {
				*f.p = *f.v
			}
		}
		if sec.Dim != nil {
			m.MLPHidden = 4 * m.Dim
		}
		if sec.RoPEBase != nil {
			m.RoPEBase = *sec.RoPEBase
		}
		if sec.InitStd != nil {
			m.InitStd = *sec.InitStd
		}
	}
	if set["layers"] {
		m.Layers = layers
	}
	if set["dim"] {
		m.Dim, m.MLPHidden = dim, 4*dim
	}
	if sec != nil && sec.MLPHidden != nil {
		m.MLPHidden = *sec.MLPHidden
	}
	if set["context"] {
		m.Context = context_
	}
	c.Model = m
	return nil
}

// resolveFamily sets c.Arch for a family other than the paper's: its
// -preset, with the vocabulary of the data the CLI trains on (GPT-2's
// tokens) and -layers, -dim and -context set on the config's fields of
// those names, an error naming the flag where the family has none.
func resolveFamily(c *train.Config, set map[string]bool, sec *modelSection, layers, dim, context_ int) error {
	fam, err := registry.Lookup(c.Family)
	if err != nil {
		return fmt.Errorf("-model: %w", err)
	}
	if sec != nil {
		return fmt.Errorf("-model %s: a config file's model section sets the paper model's fields; for another model give preset and the layers, dim and context keys", c.Family)
	}
	if c.Preset == "" {
		return fmt.Errorf("-model %s needs -preset (%s)", c.Family, strings.Join(fam.PresetNames(), ", "))
	}
	arch, err := fam.Preset(c.Preset)
	if err != nil {
		return fmt.Errorf("-preset: %w", err)
	}
	sizes := []struct {
		flag  string
		field registry.Size
		v     int
		set   bool
	}{
		{"vocab", registry.Vocab, models.PaperVocab, true}, // the data's
		{"layers", registry.Layers, layers, set["layers"]},
		{"dim", registry.Dim, dim, set["dim"]},
		{"context", registry.Context, context_, set["context"]},
	}
	for _, z := range sizes {
		if !z.set {
			continue
		}
		next, err := registry.WithSize(arch, z.field, z.v)
		if err != nil {
			if z.flag == "vocab" {
				return fmt.Errorf("-model %s: its config %T has no Vocab field to take the data's vocabulary of %d (GPT-2's tokens)", c.Family, arch, z.v)
			}
			return fmt.Errorf("-%s: model %s has no such size (its config %T has no %s field)", z.flag, c.Family, arch, z.field)
		}
		arch = next
	}
	c.Model, c.Arch = models.Config{}, arch
	if !set["head-lr"] {
		// The default job's head LR is the paper model's; another model's
		// head takes the paper's rule for its width (and a tied head,
		// which trains as the embedding, none of its own).
		c.HeadLR = 0
	}
	return nil
}

// resolveInitHF prepares the model of a run started from a Hugging
// Face directory, whose config.json gives the family and configuration
// (train.Config.InitHF; setupTrain resolves it): the flags that would
// change the model are refused.
func resolveInitHF(c *train.Config, set map[string]bool, sec *modelSection) error {
	for _, f := range []string{"preset", "layers", "dim", "context"} {
		if set[f] {
			return fmt.Errorf("-init-hf %s: the model is the directory's (its config.json); -%s cannot change it", c.InitHF, f)
		}
	}
	if sec != nil {
		return fmt.Errorf("-init-hf %s: the model is the directory's (its config.json); a config file's model section cannot change it", c.InitHF)
	}
	c.Model, c.Arch, c.Preset = models.Config{}, nil, ""
	if !set["model"] {
		c.Family = "" // the directory's
	}
	if !set["head-lr"] {
		c.HeadLR = 0 // the paper's rule for the width, as for -model
	}
	return nil
}

// presetsUsage lists every family's presets for -preset's usage.
func presetsUsage() string {
	var parts []string
	for _, name := range registry.Names() {
		if fam, err := registry.Lookup(name); err == nil {
			parts = append(parts, name+": "+strings.Join(fam.PresetNames(), ", "))
		}
	}
	return strings.Join(parts, "; ")
}

// expandGlobs expands each of -train's globs (a plain file name is a glob
// of itself), in order.
func expandGlobs(globs []string) ([]string, error) {
	var out []string
	for _, g := range globs {
		m, err := filepath.Glob(g)
		if err != nil {
			return nil, fmt.Errorf("-train %q: %w", g, err)
		}
		if len(m) == 0 {
			return nil, fmt.Errorf("-train %q matches no file", g)
		}
		out = append(out, m...)
	}
	return out, nil
}
