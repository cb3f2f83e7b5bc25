package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/hilbert-ml/hilbert/data/fineweb"
	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/device/cuda"
	"github.com/hilbert-ml/hilbert/dist"
	"github.com/hilbert-ml/hilbert/dist/nccl"
	"github.com/hilbert-ml/hilbert/models"
	"github.com/hilbert-ml/hilbert/models/registry"
	"github.com/hilbert-ml/hilbert/tokenizer"
	"github.com/hilbert-ml/hilbert/train"
)

func init() {
	register(subcommand{
		name:    "train",
		summary: "train the paper's transformer (no flags: a small model on Newton's Opticks)",
		run:     runTrain,
	})
}

const trainUsage = `usage: hilbert train [flags]

Trains the paper's decoder-only transformer with Muon on the blocks, AdamW on
the embedding and AdamW or RowNorm on the LM head, logging the head step's
exact row diameter D(S_t) and Hilbert RMS. Output goes to RUNS/NAME:
metrics.jsonl, checkpoints/, loss.png, diameter.png, hilbert_rms.png and
summary.md. One process at a time uses a run (RUNS/NAME/run.lock).

Ctrl-C, SIGTERM or SIGHUP stops after the current update, writes a
checkpoint and exits with status 130; -resume continues it exactly. A
resumed run must keep every setting that changes the numbers (it lists
any that differ); -steps may grow (updates past the original schedule run
at 0.1 of the peak rate), and the intervals, -quiet and -device ordinal
may change.

Data: -train and -val name llm.c shards (from hilbert prepare); or -text
names plain-text files tokenized on the fly (the first -text-val-tokens
tokens become the validation shard). With neither, the embedded default
job trains on $(go env GOROOT)/src/testdata/Isaac.Newton-Opticks.txt.

Settings come from -config, a YAML file whose keys are the flag names with
_ for - (text and train may be lists; a model section sets head_dim,
mlp_hidden, vocab, rope_base, init_std too), and then from flags, which
win; what neither sets keeps the defaults below.

flags:
`

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
	c := &job.Config
	var (
		configPath                          string
		trainGlobs                          []string
		layers, dim, context_               int
		resume, overwrite, quiet, breakLock bool
	)
	fs.StringVar(&configPath, "config", "", "YAML config file: keys are the flag names with _ for - (flags override it)")
	fs.StringVar(&c.Name, "name", c.Name, "run name: output goes to RUNS/NAME")
	fs.StringVar(&c.RunsDir, "runs", c.RunsDir, "folder holding the runs")
	fs.StringVar(&c.Family, "model", "", "model family: "+strings.Join(registry.Names(), ", ")+" (default paper, the paper's transformer), or one a program registered")
	fs.StringVar(&c.Preset, "preset", "", "model preset: "+presetsUsage()+" (default: the default job's d 128, 2 layers, context 128; another -model needs one)")
	fs.StringVar(&c.DType, "dtype", "", "the model's dtype: float32 (default) or float64, a reference run on the CPU with every step in float64")
	fs.StringVar(&c.InitHF, "init-hf", "", "start from the Hugging Face model `directory` DIR (config.json and safetensors: GPT-2, Llama, Mistral, Qwen2): it sets -model and the configuration (no -preset), and a fresh run's weights; the data must be the model's token ids (-text tokenizes with GPT-2's tokenizer)")
	fs.BoolVar(&c.UntieHead, "untie-head", false, "give a model whose head is tied to its embedding (gpt2) a separate head, a copy of the embedding at initialisation, so that RowNorm can take it")
	positive(fs, &layers, "layers", 0, "override the model's number of blocks")
	positive(fs, &dim, "dim", 0, "override the model width d (and the MLP to 4d)")
	positive(fs, &context_, "context", 0, "override the model's context length")
	fs.StringVar(&c.Head, "head", c.Head, "LM-head optimizer: rownorm or adamw")
	fs.BoolVar(&c.Projected, "projected", false, "use RowNorm's exact projected form P RN(P .)")
	floatFlag(fs, &c.MuonLR, "muon-lr", c.MuonLR, false, "Muon peak LR (0: the paper's 8e-3)")
	floatFlag(fs, &c.EmbedLR, "embed-lr", c.EmbedLR, false, "embedding AdamW peak LR (0: the paper's 4e-3)")
	floatFlag(fs, &c.HeadLR, "head-lr", c.HeadLR, false, "head peak LR (0: the paper's value for the width)")
	fs.Uint64Var(&c.Seed, "seed", 0, "model initialisation seed")
	fs.Uint64Var(&c.DataSeed, "data-seed", 0, "training data order seed")
	fs.Var(listValue{&trainGlobs}, "train", "training shards: comma-separated `files` or globs, e.g. 'fineweb10B/fineweb_train_*.bin'")
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
	fs.BoolVar(&resume, "resume", false, "continue the run's latest checkpoint")
	fs.BoolVar(&overwrite, "overwrite", false, "start over even if the run has a checkpoint")
	fs.BoolVar(&breakLock, "break-lock", false, "take over a stale run lock (left by a process that died); a live holder's lock is never broken")
	fs.StringVar(&job.Device, "device", job.Device, "cpu or cuda[:N]")
	positive(fs, &job.Threads, "threads", 0, "CPU threads for kernels and OpenBLAS (default GOMAXPROCS)")
	fs.StringVar(&c.Autocast, "autocast", c.Autocast, "bf16 (block matrix products in bfloat16, the paper's GPU precision), off, or auto (bf16 on cuda, off on cpu)")
	fs.BoolVar(&quiet, "quiet", false, "no progress bar, progress or validation lines")
	if extra != nil {
		extra(fs)
	}
	if stop, err := parseCommand(fs, args); stop {
		return nil, err
	}
	st, err := setupTrain(fs, name, args, &job, configPath, &trainGlobs, &layers, &dim, &context_)
	if err != nil {
		return nil, usageErr(name, err)
	}
	st.resume, st.overwrite, st.quiet, st.breakLock = resume, overwrite, quiet, breakLock
	if resume && overwrite {
		return nil, usageErr(name, errors.New("-resume and -overwrite: pick one (continue the checkpoint, or start over)"))
	}
	if job.Threads > 0 {
		cpu.SetThreads(job.Threads)
	}
	c = &st.job.Config
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

// setupTrain is parseTrainFlags after the flags are parsed: the config
// file, the model, the data, and every check of the settings (before any
// data is tokenized). Its errors are usage errors. The flags' variables
// come as pointers: the config file sets them.
func setupTrain(fs *flag.FlagSet, name string, args []string, job *trainFile, configPath string, trainGlobs *[]string, layers, dim, context_ *int) (*trainSetup, error) {
	c := &job.Config
	cmdSet := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { cmdSet[f.Name] = true })
	set := map[string]bool{}
	for k := range cmdSet {
		set[k] = true
	}
	var modelSec *modelSection
	if configPath != "" {
		cf, err := readConfigFile(configPath)
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
		if cf.model != nil {
			for _, k := range []string{"layers", "dim", "context"} {
				if cf.model.keys[k] && fileSet[k] {
					return nil, fmt.Errorf("config %s: %s is set both at the top and in the model section", configPath, k)
				}
			}
			switch {
			case fileSet["preset"]:
				return nil, fmt.Errorf("config %s: set preset or a model section, not both", configPath)
			case !cmdSet["preset"]: // -preset replaces the file's model
				modelSec = cf.model
			}
		}
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
	if err := resolveModel(c, set, modelSec, *layers, *dim, *context_); err != nil {
		return nil, err
	}
	if set["train"] {
		m, err := expandGlobs(*trainGlobs)
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
// nothingToTrain is the message of a resume whose checkpoint is already at
// -steps: the run's validation at that update, as logged or (a checkpoint
// written on a signal, say) computed now as hilbert eval would.
func nothingToTrain(tr *train.Trainer, dev device.Device, comm dist.Communicator) (string, error) {
	cfg, step := tr.Config(), tr.Step()
	msg := fmt.Sprintf("run %s is already at update %d of -steps %d: nothing to train (raise -steps to continue it)", cfg.Name, step, cfg.Steps)
	if comm != nil && comm.Rank() != 0 {
		return msg, nil
	}
	hist := tr.History()
	if n := len(hist); n > 0 && hist[n-1].Step == step && hist[n-1].ValLoss != nil {
		r := hist[n-1]
		msg += fmt.Sprintf("; its validation at update %d: val loss %.4f", step, *r.ValLoss)
		if r.Diameter != nil {
			msg += fmt.Sprintf(", D(S_T) %.4g", *r.Diameter)
		}
		return msg, nil
	}
	autocast, err := cfg.AutocastDType()
	if err != nil {
		return "", err
	}
	loss, tokens, err := validationLoss(dev, tr.Model(), cfg.Sizes().Vocab, cfg.ValShard, cfg.ValTokens, cfg.SeqLen, cfg.MicroBatch, cfg.BlockRows, autocast)
	if err != nil {
		return "", err
	}
	return msg + fmt.Sprintf("; the checkpoint's validation, computed now: val loss %.4f over %d tokens", loss, tokens), nil
}

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

// exitInterrupted is the exit status of a run stopped by a signal (after
// writing its checkpoint): 128 + SIGINT, as shells report Ctrl-C.
const exitInterrupted = 130

// interruptedError is a run stopped by a signal; runMain prints it and
// exits with exitInterrupted.
type interruptedError struct {
	msg  string // what happened
	hint string // how to continue, if the checkpoint was written
}

func (e *interruptedError) Error() string {
	if e.hint == "" {
		return e.msg
	}
	return e.msg + ". " + e.hint
}

// trainSignals returns a context cancelled by SIGINT, SIGTERM or SIGHUP
// (a closed terminal or ssh session; not when SIGHUP was ignored at start,
// as nohup does): the run stops after its current update and writes a
// checkpoint. SIGPIPE is ignored, so that a closed
// pipe on stdout or stderr (| tee killed by the same Ctrl-C) fails writes,
// which are not checked, instead of killing the process. stop undoes it.
//
// A rank of mpirun also stops on SIGCONT: Open MPI's mpirun, told to stop
// (Ctrl-C or SIGTERM reach only it, the ranks being in their own process
// groups), sends each rank SIGCONT, then SIGTERM odls_base_sigkill_timeout
// seconds later (default 1) and SIGKILL as long again after that; the
// SIGCONT is the first word of it, and stopping on it doubles the time
// left to write the checkpoint.
func trainSignals(stderr io.Writer, mpiRank bool) (ctx context.Context, stop func()) {
	signal.Ignore(syscall.SIGPIPE)
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan os.Signal, 4)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	// Under nohup (SIGHUP ignored from the start) a hangup stays ignored.
	if !signal.Ignored(syscall.SIGHUP) {
		signal.Notify(ch, syscall.SIGHUP)
	}
	if mpiRank {
		signal.Notify(ch, syscall.SIGCONT)
	}
	done := make(chan struct{})
	go func() {
		first := true
		for {
			select {
			case s := <-ch:
				if first && s == syscall.SIGCONT {
					fmt.Fprintf(stderr, "\nhilbert: %v: mpirun is stopping the job; stopping after the current update to write a checkpoint\n", s)
					cancel()
					first = false
				} else if first {
					fmt.Fprintf(stderr, "\nhilbert: %v: stopping after the current update to write a checkpoint\n", s)
					cancel()
					first = false
				} else {
					fmt.Fprintf(stderr, "\nhilbert: %v: already stopping; the checkpoint is being written\n", s)
				}
			case <-done:
				return
			}
		}
	}()
	return ctx, func() {
		signal.Stop(ch)
		close(done)
		cancel()
	}
}

func runTrain(args []string, stdout, stderr io.Writer) error {
	commTimeout := 5 * time.Minute
	st, err := parseTrainFlags("train", trainUsage, args, stderr, func(fs *flag.FlagSet) { rankFlags(fs, &commTimeout) })
	if st == nil || err != nil {
		return err
	}
	comm, err := launchRanks(st.dev, commTimeout)
	if err != nil {
		return err
	}
	defer comm.Close()
	if comm.Size() > 1 {
		return trainRanks(st, comm, stdout, stderr)
	}
	ctx, stop := trainSignals(stderr, false)
	defer stop()
	c := st.job.Config
	// The lock comes first: before -overwrite deletes anything and before
	// -text is tokenized into the run's folder.
	lock, err := lockRun(st, c, stderr)
	if err != nil {
		return err
	}
	defer lock.Unlock()
	if err := startRun(st, c, st.resume); err != nil {
		return err
	}
	pd, err := prepareData(ctx, &st.job, st.resume, stderr)
	defer pd.cleanup()
	if err != nil {
		return err
	}
	s, err := trainOne(ctx, st, st.job.Config, lock, st.resume, nil, stdout, stderr)
	if err == nil && pd.mismatch {
		// Resume refuses other data; this is only a second guard.
		err = pd.mismatchError()
	}
	if err != nil {
		return err
	}
	printRun(stdout, s)
	return nil
}

// rankFlags adds train's own flags (those of data-parallel runs) to the
// shared ones.
func rankFlags(fs *flag.FlagSet, commTimeout *time.Duration) {
	fs.Var(positiveDuration{commTimeout}, "comm-timeout", "under mpirun: the longest one collective may wait for the other ranks before this rank stops with an error naming it; a `duration` > 0")
}

// printRun prints a finished run's one-line summary.
func printRun(stdout io.Writer, s *runSummary) {
	if s.note != "" {
		fmt.Fprintln(stdout, s.note)
		return
	}
	fmt.Fprintf(stdout, "run %s: %d updates, %d tokens, train loss %.4f, val loss %.4f (from %.4f), D(S_T) %.4g, Hilbert RMS %.4g, %.0f tokens/s, %.0f s\n",
		s.Name, s.Steps, s.Tokens, s.FinalLoss, s.ValLoss, s.StartValLoss, s.Diameter, s.HilbertRMS, s.TokensPerS, s.ElapsedS)
	fmt.Fprintf(stdout, "report: %s\n", filepath.Join(s.Dir, "summary.md"))
}

// trainRanks is one rank of a data-parallel run started by mpirun: rank 0
// takes the run's lock and prepares the data as a plain run does; the
// others wait for it, find the same shards, and train beside it without
// writing anything.
func trainRanks(st *trainSetup, comm dist.Communicator, stdout, stderr io.Writer) error {
	_, mpi := comm.(*dist.MPIComm)
	if g, ok := comm.(*gpuRanks); ok {
		_, mpi = g.launcher.(*dist.MPIComm)
	}
	ctx, stop := trainSignals(stderr, mpi)
	defer stop()
	c := st.job.Config
	var lock *train.RunLock
	var prepErr error
	if comm.Rank() == 0 {
		fmt.Fprintf(stderr, "hilbert: data-parallel over %d ranks\n", comm.Size())
		lock, prepErr = lockRun(st, c, stderr)
		if prepErr == nil {
			defer lock.Unlock()
			if prepErr = startRun(st, c, st.resume); prepErr == nil {
				var pd preparedData
				pd, prepErr = prepareData(ctx, &st.job, st.resume, stderr)
				defer pd.cleanup()
				if prepErr == nil && pd.mismatch {
					// The other ranks read the run's data folder, which
					// this text did not replace.
					prepErr = pd.mismatchError()
				}
			}
		}
	} else {
		st.quiet = true
	}
	// Every rank waits for rank 0's data; a failure there stops them all.
	failed, err := anyFailed(comm, st.dev, prepErr != nil)
	if err != nil {
		return err
	}
	if prepErr != nil {
		return prepErr
	}
	if failed {
		return fmt.Errorf("rank %d: rank 0 could not prepare the run (its error is above)", comm.Rank())
	}
	if comm.Rank() != 0 && len(st.job.Config.TrainShards) == 0 {
		if err := findTextShards(&st.job); err != nil {
			return err
		}
	}
	s, err := trainOne(ctx, st, st.job.Config, lock, st.resume, comm, stdout, stderr)
	if err != nil {
		return fmt.Errorf("rank %d: %w", comm.Rank(), err)
	}
	if comm.Rank() == 0 {
		printRun(stdout, s)
	}
	return nil
}

// launchRanks returns the communicator of the job this process was
// started in, for buffers of dev: one rank outside a launcher; under
// mpirun, MPI on a CPU device and NCCL on a GPU (its id shared through
// MPI); under torchrun's variables, NCCL (its id shared through
// MASTER_ADDR:MASTER_PORT), which needs a GPU.
func launchRanks(dev device.Device, timeout time.Duration) (dist.Communicator, error) {
	comm, err := dist.Launch(dist.MPIOptions{Timeout: timeout})
	if err != nil {
		return nil, err
	}
	gpu, onGPU := dev.(*cuda.Device)
	env, torchrun, err := dist.Torchrun()
	if err != nil {
		comm.Close()
		return nil, err
	}
	switch {
	case comm.Size() > 1 && !onGPU:
		return comm, nil
	case comm.Size() == 1 && (!torchrun || env.WorldSize == 1):
		return comm, nil
	case comm.Size() == 1 && !onGPU:
		comm.Close()
		return nil, fmt.Errorf("a torchrun-style launch (RANK=%d, WORLD_SIZE=%d) trains through NCCL, which needs -device cuda; on CPUs start the ranks with mpirun", env.Rank, env.WorldSize)
	}
	lib, err := nccl.Open("")
	if err != nil {
		comm.Close()
		return nil, fmt.Errorf("data-parallel on GPUs: %w", err)
	}
	var id nccl.UniqueID
	rank, size := env.Rank, env.WorldSize
	if mpi, ok := comm.(*dist.MPIComm); ok {
		rank, size = comm.Rank(), comm.Size()
		id, err = lib.ShareID(mpi)
	} else {
		id, err = lib.ShareIDTCP(env, timeout)
	}
	if err == nil {
		var nc *nccl.Communicator
		if nc, err = nccl.NewCommunicator(lib, gpu, size, id, rank); err == nil {
			return &gpuRanks{Communicator: nc, launcher: comm}, nil
		}
	}
	comm.Close()
	return nil, fmt.Errorf("data-parallel on GPUs: rank %d: NCCL: %w", rank, err)
}

// gpuRanks is NCCL's communicator, closing the launcher's (MPI's) with it.
type gpuRanks struct {
	*nccl.Communicator
	launcher dist.Communicator
}

func (g *gpuRanks) Close() error {
	err := g.Communicator.Close()
	if e := g.launcher.Close(); err == nil {
		err = e
	}
	return err
}

// anyFailed reports whether failed holds on any rank, through buffers of
// dev (the communicator's device).
func anyFailed(comm dist.Communicator, buf device.Device, failed bool) (bool, error) {
	b, err := buf.Alloc(device.Float32, 1)
	if err != nil {
		return false, err
	}
	defer buf.Free(b)
	v := float32(0)
	if failed {
		v = 1
	}
	buf.CopyFromHost(b, []float32{v})
	if err := comm.AllReduce(b, dist.Sum); err != nil {
		return false, err
	}
	out := make([]float32, 1)
	buf.CopyToHost(out, b)
	return out[0] > 0, nil
}

// findTextShards finds the shards rank 0 tokenized from the job's text
// into the run's data folder (the names shardsFromText gets).
func findTextShards(job *trainFile) error {
	dir := filepath.Join(job.Config.RunsDir, job.Config.Name, "data")
	train, _ := filepath.Glob(filepath.Join(dir, "text_train_*.bin"))
	val, _ := filepath.Glob(filepath.Join(dir, "text_val_*.bin"))
	if len(train) == 0 || len(val) == 0 {
		return fmt.Errorf("the shards rank 0 tokenized are not in %s (do the ranks share a file system?)", dir)
	}
	sort.Strings(train)
	sort.Strings(val)
	job.Config.TrainShards, job.Config.ValShard = train, val[0]
	return nil
}

// lockRun takes the lock of c's run folder.
func lockRun(st *trainSetup, c train.Config, stderr io.Writer) (*train.RunLock, error) {
	lock, err := train.LockRun(filepath.Join(c.RunsDir, c.Name), train.LockOptions{BreakStale: st.breakLock, Command: st.command})
	if err != nil {
		return nil, err
	}
	if lock.Broken != nil {
		fmt.Fprintf(stderr, "hilbert: -break-lock: took over the stale lock of %s\n", lock.Broken)
	}
	return lock, nil
}

// startRun checks that the run may start as asked (a checkpoint needs
// -resume or -overwrite; -resume needs a checkpoint) and, for
// -overwrite, removes the run's checkpoints and metrics. The run's lock
// must be held.
func startRun(st *trainSetup, c train.Config, resume bool) error {
	dir := filepath.Join(c.RunsDir, c.Name)
	has := train.HasCheckpoint(c)
	switch {
	case resume && !has:
		return fmt.Errorf("run %q has no checkpoint in %s to resume: run without -resume to start it", c.Name, dir)
	case !resume && !st.overwrite && has:
		return fmt.Errorf("run %q already has a checkpoint in %s: pass -resume to continue it or -overwrite to start over", c.Name, dir)
	case st.overwrite && !resume:
		if err := os.RemoveAll(filepath.Join(dir, "checkpoints")); err != nil {
			return err
		}
		if err := os.Remove(filepath.Join(dir, "metrics.jsonl")); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

// preparedData is what prepareData made.
type preparedData struct {
	// mismatch: a resume's text tokenized to other data than its
	// checkpoint trained on; the job points at the temporary folder, so
	// that Resume lists the differences, and the run's folder is as it was.
	mismatch bool
	// tmp is the temporary folder that cleanup removes, if any.
	tmp string
}

func (p preparedData) cleanup() {
	if p.tmp != "" {
		os.RemoveAll(p.tmp)
	}
}

func (p preparedData) mismatchError() error {
	return errors.New("-resume: -text tokenizes to other data than the checkpoint trained on (its train_data and val_data fingerprints differ); the run's data folder is unchanged: give the run's original -text, or start over with -overwrite or another -name")
}

// prepareData tokenizes the job's text (or the default Opticks) into
// shards in the run's data folder when no shards are given. The text is
// tokenized into a temporary folder first, which replaces the run's data
// folder only when the run may train on it: a fresh run, or a resume whose
// checkpoint trained on the same data (train.DataMatchesCheckpoint).
// Otherwise the run's data stay as they were, byte for byte, and the job
// points at the temporary folder (removed by cleanup) for Resume to refuse
// with the list of differences. The run's lock must be held.
func prepareData(ctx context.Context, job *trainFile, resume bool, stderr io.Writer) (preparedData, error) {
	if len(job.Config.TrainShards) > 0 {
		return preparedData{}, nil
	}
	if len(job.Text) == 0 {
		opticks, err := opticksPath()
		if err != nil {
			return preparedData{}, err
		}
		job.Text = []string{opticks}
	}
	c := &job.Config
	run := filepath.Join(c.RunsDir, c.Name)
	dir := filepath.Join(run, "data")
	tmp, old := filepath.Join(run, ".data-new"), filepath.Join(run, ".data-old")
	// Left by a process that died here (the lock is ours now).
	if err := removeAll(tmp, old); err != nil {
		return preparedData{}, err
	}
	pd := preparedData{tmp: tmp}
	sum, err := shardsFromText(ctx, job, tmp)
	if err != nil {
		return pd, err
	}
	tokenized := fmt.Sprintf("hilbert: tokenized %d documents (%d tokens, %d for validation) from %s",
		sum.Documents, sum.Tokens, sum.ValTokens, strings.Join(job.Text, ", "))
	if resume {
		same, err := train.DataMatchesCheckpoint(*c, c.TrainShards, c.ValShard)
		if err != nil {
			return pd, err
		}
		if !same {
			fmt.Fprintf(stderr, "%s: not the checkpoint's data, so %s is left as it is\n", tokenized, dir)
			pd.mismatch = true
			return pd, nil
		}
	}
	// Swap the new shards in: the old folder aside, the new one in its
	// place, the old one removed. A crash between the renames leaves no
	// data folder, which the next run (holding the lock) tokenizes again.
	if err := os.Rename(dir, old); err != nil && !errors.Is(err, os.ErrNotExist) {
		return pd, fmt.Errorf("-text: %w", err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return pd, fmt.Errorf("-text: %w", err)
	}
	if err := os.RemoveAll(old); err != nil {
		return pd, fmt.Errorf("-text: %w", err)
	}
	for i, p := range c.TrainShards {
		c.TrainShards[i] = filepath.Join(dir, filepath.Base(p))
	}
	c.ValShard = filepath.Join(dir, filepath.Base(c.ValShard))
	fmt.Fprintf(stderr, "%s into %s\n", tokenized, dir)
	return preparedData{}, nil
}

// removeAll removes each path and what it holds.
func removeAll(paths ...string) error {
	for _, p := range paths {
		if err := os.RemoveAll(p); err != nil {
			return err
		}
	}
	return nil
}

// trainOne trains one run whose lock is held (the trainer releases it),
// showing its progress on stderr. An interrupted run (its checkpoint
// written) is an *interruptedError.
func trainOne(ctx context.Context, st *trainSetup, c train.Config, lock *train.RunLock, resume bool, comm dist.Communicator, stdout, stderr io.Writer) (*runSummary, error) {
	dev := st.dev
	opts := []train.Option{}
	if lock != nil {
		opts = append(opts, train.WithLock(lock))
	}
	if comm != nil {
		opts = append(opts, train.WithComm(comm))
	}
	tr, err := train.New(dev, c, opts...)
	if err != nil {
		return nil, err
	}
	defer tr.Close()
	var resumeErr error
	if resume {
		resumeErr = tr.Resume()
	}
	if comm != nil && comm.Size() > 1 {
		// Every rank learns whether one could not resume (the trainer then
		// checks that all resumed the same checkpoint, or none did).
		failed, err := anyFailed(comm, dev, resumeErr != nil)
		if err != nil {
			return nil, err
		}
		if failed && resumeErr == nil {
			return nil, errors.New("another rank could not resume the checkpoint (its error is above)")
		}
	}
	if resumeErr != nil {
		return nil, resumeErr
	}
	for _, w := range tr.Warnings() {
		fmt.Fprintf(stderr, "hilbert: warning: %s\n", w)
	}
	cfg := tr.Config()
	if comm != nil && comm.Rank() != 0 {
		stderr = io.Discard
	}
	size, params := cfg.Sizes(), 0
	for _, p := range tr.Model().Parameters() {
		params += p.Len()
	}
	fmt.Fprintf(stderr, "hilbert: %s on %s: %s d %d, %d layers, vocab %d, %d params; head %s; %d updates of %d x %d tokens\n",
		cfg.Name, dev.Name(), cfg.FamilyName(), size.Dim, size.Layers, size.Vocab, params, cfg.Head,
		cfg.Steps, cfg.BatchSeqs, cfg.SeqLen)
	if cfg.InitHF != "" && !resume {
		fmt.Fprintf(stderr, "hilbert: initialised from %s (init_hf %s)\n", cfg.InitHF, tr.InitHF())
	}
	if resume {
		note := ""
		if cfg.Steps > cfg.ScheduleSteps {
			note = fmt.Sprintf("; the schedule ends at update %d, later updates run at 0.1 of the peak rate", cfg.ScheduleSteps)
		}
		fmt.Fprintf(stderr, "hilbert: resuming %s at update %d of %d%s\n", cfg.Name, tr.Step(), cfg.Steps, note)
	}
	if resume && tr.Step() >= cfg.Steps {
		// Nothing to train: no run, no report rewritten; its validation.
		note, err := nothingToTrain(tr, dev, comm)
		if err != nil {
			return nil, err
		}
		return &runSummary{Summary: tr.Summary(), Dir: tr.Dir(), History: tr.History(), note: note}, nil
	}
	prog := newProgress(stderr, st.quiet, cfg.Head, cfg.Steps, tr.Step())
	err = tr.Run(ctx, func(t *train.Trainer, r train.Record) error {
		prog.record(r)
		return nil
	})
	prog.finish()
	if errors.Is(err, train.ErrInterrupted) {
		if err != train.ErrInterrupted { // the checkpoint or the report failed
			return nil, &interruptedError{msg: fmt.Sprintf("%s interrupted at update %d: %v", c.Name, tr.Step(), err)}
		}
		// A command that has -resume already continues the run as it is.
		hint := "Continue with the same command and -resume"
		if st.resume {
			hint = "Continue with the same command"
		}
		return nil, &interruptedError{msg: fmt.Sprintf("%s interrupted at update %d; checkpoint written", c.Name, tr.Step()), hint: hint}
	}
	if err != nil {
		return nil, err
	}
	return &runSummary{Summary: tr.Summary(), Dir: tr.Dir(), History: tr.History()}, nil
}

// runSummary is a finished run: its summary, folder and records.
type runSummary struct {
	train.Summary
	Dir     string
	History []train.Record
	// note, when set, is what printRun prints instead: a resume that
	// found nothing to train.
	note string
}

// openDevice opens "cpu", "cuda" or "cuda:N".
func openDevice(name string) (device.Device, error) {
	switch {
	case name == "" || name == "cpu":
		return cpu.New(), nil
	case name == "cuda" || strings.HasPrefix(name, "cuda:"):
		// Plain cuda is the local rank's GPU under a launcher (one GPU per
		// process on a machine), GPU 0 otherwise.
		n, err := dist.LocalRank()
		if err != nil {
			return nil, fmt.Errorf("-device %s: %w", name, err)
		}
		if rest, ok := strings.CutPrefix(name, "cuda:"); ok {
			if _, err := fmt.Sscan(rest, &n); err != nil {
				return nil, fmt.Errorf("-device %q: want cuda:N", name)
			}
		}
		d, err := cuda.New(n)
		if err != nil {
			return nil, fmt.Errorf("-device %s: %w (use -device cpu to train on the CPU)", name, err)
		}
		return d, nil
	}
	return nil, fmt.Errorf("-device %q: want cpu, cuda or cuda:N", name)
}

// opticksPath finds the public-domain text every Go installation ships.
func opticksPath() (string, error) {
	var roots []string
	if r := os.Getenv("GOROOT"); r != "" {
		roots = append(roots, r)
	}
	if out, err := exec.Command("go", "env", "GOROOT").Output(); err == nil {
		roots = append(roots, strings.TrimSpace(string(out)))
	}
	roots = append(roots, runtime.GOROOT())
	for _, r := range roots {
		p := filepath.Join(r, "src", "testdata", "Isaac.Newton-Opticks.txt")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("the default job's text, src/testdata/Isaac.Newton-Opticks.txt, is in none of the Go roots %q; pass -text FILE or -train/-val shards", roots)
}

// shardsFromText tokenizes the job's text files into shards in the
// folder dir as prepare does (fineweb.AddTextFile: plain or gzip text,
// one document per blank-line-separated paragraph), sending the first
// TextValTokens tokens to validation, and points the job at them.
func shardsFromText(ctx context.Context, job *trainFile, dir string) (fineweb.Summary, error) {
	c := &job.Config
	sum, err := fineweb.BuildFromTextFiles(ctx, fineweb.BuildConfig{
		Dir: dir, Prefix: "text", Overwrite: true,
		Split: fineweb.Split{ValTokens: job.TextValTokens},
	}, job.Text...)
	if errors.Is(err, fineweb.ErrNoTraining) || err == nil && (len(sum.TrainShards) == 0 || len(sum.ValShards) == 0) {
		return sum, fmt.Errorf("-text: %d tokens are too few for a training and a validation split of %d tokens", sum.Tokens, job.TextValTokens)
	}
	if err != nil {
		return sum, fmt.Errorf("-text: %w", err)
	}
	c.TrainShards, c.ValShard = sum.TrainShards, sum.ValShards[0]
	return sum, nil
}
