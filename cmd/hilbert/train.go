package main

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
	"strings"
	"syscall"

	"github.com/schollz/progressbar/v3"
	"go.yaml.in/yaml/v3"

	"github.com/hilbert-ml/hilbert/data/fineweb"
	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/device/cuda"
	"github.com/hilbert-ml/hilbert/models"
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
summary.md. Ctrl-C (or SIGTERM) stops after the current update and writes a
checkpoint; -resume continues it exactly.

Data: -train and -val name llm.c shards (from hilbert prepare); or -text
names plain-text files tokenized on the fly (the first -text-val-tokens
tokens become the validation shard). With neither, the embedded default
job trains on $(go env GOROOT)/src/testdata/Isaac.Newton-Opticks.txt.

Settings come from -config (YAML, keys as in the flag names with _ for -)
and then from flags, which win.

flags:
`

// modelYAML is the optional "model" section of a config file.
type modelYAML struct {
	Layers    int     `yaml:"layers"`
	Dim       int     `yaml:"dim"`
	HeadDim   int     `yaml:"head_dim"`
	MLPHidden int     `yaml:"mlp_hidden"`
	Vocab     int     `yaml:"vocab"`
	Context   int     `yaml:"context"`
	RoPEBase  float64 `yaml:"rope_base"`
	InitStd   float64 `yaml:"init_std"`
}

// trainFile is the YAML config file: train.Config plus the CLI's own keys.
type trainFile struct {
	train.Config  `yaml:",inline"`
	Model         *modelYAML `yaml:"model"`
	Text          []string   `yaml:"text"`
	TextValTokens int        `yaml:"text_val_tokens"`
	Device        string     `yaml:"device"`
	Threads       int        `yaml:"threads"`
}

// defaultJob is the embedded default: a small model on Opticks that
// finishes in a few minutes on 2 cores.
func defaultJob() trainFile {
	return trainFile{
		Config: train.Config{
			Name: "opticks", Head: "rownorm",
			Model:  models.Config{Layers: 2, Dim: 128, HeadDim: 64, MLPHidden: 512, Vocab: models.PaperVocab, Context: 128, RoPEBase: 10000, InitStd: 0.02},
			SeqLen: 128, MicroBatch: 8, BatchSeqs: 16,
			Steps: 120, ValEvery: 40, ValTokens: 16_384, DiagEvery: 20,
			PanelSeqs: 8, PanelPositions: 128, CheckpointEvery: 40,
			// A short run on a tiny corpus needs larger steps than the
			// paper's 20-tokens-per-parameter horizon.
			MuonLR: 0.02, EmbedLR: 0.02, HeadLR: 0.01,
		},
		TextValTokens: 16_385,
	}
}

// trainSetup is a parsed train (or compare) command line.
type trainSetup struct {
	job                      trainFile
	resume, overwrite, quiet bool
	dev                      device.Device
}

// parseTrainFlags parses the flags shared by train and compare; extra adds
// a command's own flags. It returns nil, nil when help was asked for.
func parseTrainFlags(name, usage string, args []string, stderr io.Writer, extra func(fs *flag.FlagSet)) (*trainSetup, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	job := defaultJob()
	c := &job.Config
	configPath := fs.String("config", "", "YAML config file (flags override it)")
	fs.StringVar(&c.Name, "name", c.Name, "run name: output goes to RUNS/NAME")
	fs.StringVar(&c.RunsDir, "runs", "runs", "folder holding the runs")
	fs.StringVar(&c.Preset, "preset", "", "model preset: "+strings.Join(models.PresetNames(), ", ")+" (default: the default job's d 128, 2 layers, context 128)")
	layers := fs.Int("layers", 0, "override the model's number of blocks")
	dim := fs.Int("dim", 0, "override the model width d")
	context_ := fs.Int("context", 0, "override the model's context length")
	fs.StringVar(&c.Head, "head", c.Head, "LM-head optimizer: rownorm or adamw")
	fs.BoolVar(&c.Projected, "projected", false, "use RowNorm's exact projected form P RN(P .)")
	fs.Float64Var(&c.MuonLR, "muon-lr", c.MuonLR, "Muon peak LR (0: the paper's 8e-3)")
	fs.Float64Var(&c.EmbedLR, "embed-lr", c.EmbedLR, "embedding AdamW peak LR (0: the paper's 4e-3)")
	fs.Float64Var(&c.HeadLR, "head-lr", c.HeadLR, "head peak LR (0: the paper's value for the width)")
	fs.Uint64Var(&c.Seed, "seed", 0, "model initialisation seed")
	fs.Uint64Var(&c.DataSeed, "data-seed", 0, "training data order seed")
	trainGlob := fs.String("train", "", "training shards (glob), e.g. 'fineweb10B/fineweb_train_*.bin'")
	fs.StringVar(&c.ValShard, "val", "", "validation shard")
	text := fs.String("text", "", "comma-separated text files to tokenize on the fly instead of shards")
	fs.IntVar(&job.TextValTokens, "text-val-tokens", job.TextValTokens, "with -text: tokens sent to the validation shard")
	fs.IntVar(&c.SeqLen, "seq-len", c.SeqLen, "sequence length T (0: the model's context)")
	fs.IntVar(&c.MicroBatch, "micro-batch", c.MicroBatch, "sequences per forward pass")
	fs.IntVar(&c.BatchSeqs, "batch-seqs", c.BatchSeqs, "sequences per update (a multiple of -micro-batch; gradient accumulation)")
	fs.IntVar(&c.Steps, "steps", c.Steps, "number of updates T")
	fs.IntVar(&c.Warmup, "warmup", 0, "warmup updates (0: floor(0.1 T))")
	fs.Float64Var(&c.ClipNorm, "clip", 1, "global gradient-norm clip")
	fs.IntVar(&c.ValEvery, "val-every", c.ValEvery, "validate every N updates (and at the end)")
	fs.IntVar(&c.ValTokens, "val-tokens", c.ValTokens, "validation prefix length in tokens (cut to the shard)")
	fs.IntVar(&c.DiagEvery, "diag-every", c.DiagEvery, "exact D(S_t) every N updates (and at the end)")
	fs.IntVar(&c.PanelSeqs, "panel-seqs", c.PanelSeqs, "Hilbert-RMS panel: validation sequences")
	fs.IntVar(&c.PanelPositions, "panel-positions", c.PanelPositions, "Hilbert-RMS panel: positions per sequence")
	fs.IntVar(&c.CheckpointEvery, "checkpoint-every", c.CheckpointEvery, "checkpoint every N updates (and at the end and on Ctrl-C)")
	fs.IntVar(&c.LogEvery, "log-every", 1, "metrics line every N updates")
	fs.IntVar(&c.BlockRows, "block-rows", 0, "rows of logits the fused head holds at once (0: about 16M logits)")
	resume := fs.Bool("resume", false, "continue the run's latest checkpoint")
	overwrite := fs.Bool("overwrite", false, "start over even if the run has a checkpoint")
	fs.StringVar(&job.Device, "device", "cpu", "cpu or cuda[:N]")
	fs.IntVar(&job.Threads, "threads", 0, "CPU threads for kernels and OpenBLAS (0: GOMAXPROCS)")
	fs.StringVar(&c.Autocast, "autocast", "auto", "bf16 (block matrix products in bfloat16, the paper's GPU precision), off, or auto (bf16 on cuda, off on cpu)")
	quiet := fs.Bool("quiet", false, "no progress bar")
	if extra != nil {
		extra(fs)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, nil
		}
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q (see hilbert %s -h)", fs.Args(), name)
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })

	if *configPath != "" {
		fileJob, err := readTrainConfig(*configPath)
		if err != nil {
			return nil, err
		}
		// Flags given on the command line win over the file.
		flagJob := job
		job = fileJob
		applyFlags(&job, &flagJob, set)
		c = &job.Config
	}
	if set["preset"] {
		c.Model = models.Config{}
	}
	if c.Preset != "" && c.Model.Layers == 0 {
		m, err := models.Preset(c.Preset)
		if err != nil {
			return nil, err
		}
		c.Model = m
		if !set["seq-len"] && !hasYAMLKey(*configPath, "seq_len") {
			c.SeqLen = 0
		}
	}
	if *layers > 0 {
		c.Model.Layers = *layers
	}
	if *dim > 0 {
		c.Model.Dim = *dim
		c.Model.MLPHidden = 4 * *dim
	}
	if *context_ > 0 {
		c.Model.Context = *context_
	}
	if *trainGlob != "" {
		m, err := filepath.Glob(*trainGlob)
		if err != nil || len(m) == 0 {
			return nil, fmt.Errorf("-train %q matches no file", *trainGlob)
		}
		c.TrainShards = m
	}
	if *text != "" {
		job.Text = strings.Split(*text, ",")
	}
	if job.Threads > 0 {
		cpu.SetThreads(job.Threads)
	}
	dev, err := openDevice(job.Device)
	if err != nil {
		return nil, err
	}
	if c.Autocast == "auto" || c.Autocast == "" {
		c.Autocast = "off"
		if dev.Name() != "cpu" {
			c.Autocast = "bf16"
		}
	}
	return &trainSetup{job: job, resume: *resume, overwrite: *overwrite, quiet: *quiet, dev: dev}, nil
}

func runTrain(args []string, stdout, stderr io.Writer) error {
	st, err := parseTrainFlags("train", trainUsage, args, stderr, nil)
	if st == nil || err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := prepareData(ctx, &st.job, stderr); err != nil {
		return err
	}
	s, err := trainOne(ctx, st, st.job.Config, stdout, stderr)
	if err != nil || s == nil {
		return err
	}
	fmt.Fprintf(stdout, "run %s: %d updates, %d tokens, train loss %.4f, val loss %.4f, D(S_T) %.4g, Hilbert RMS %.4g, %.0f tokens/s, %.0f s\n",
		s.Name, s.Steps, s.Tokens, s.FinalLoss, s.ValLoss, s.Diameter, s.HilbertRMS, s.TokensPerS, s.ElapsedS)
	fmt.Fprintf(stdout, "report: %s\n", filepath.Join(s.Dir, "summary.md"))
	return nil
}

// prepareData tokenizes the job's text (or the default Opticks) into
// shards when no shards are given.
func prepareData(ctx context.Context, job *trainFile, stderr io.Writer) error {
	if len(job.Config.TrainShards) > 0 {
		return nil
	}
	if len(job.Text) == 0 {
		opticks, err := opticksPath()
		if err != nil {
			return err
		}
		job.Text = []string{opticks}
	}
	return shardsFromText(ctx, job, stderr)
}

// trainOne trains one run with a progress bar. It returns a nil summary
// (and no error) when the run was interrupted and checkpointed.
func trainOne(ctx context.Context, st *trainSetup, c train.Config, stdout, stderr io.Writer) (*runSummary, error) {
	dev := st.dev

	if !st.resume && !st.overwrite && train.HasCheckpoint(c) {
		return nil, fmt.Errorf("run %q already has a checkpoint in %s: pass -resume to continue it or -overwrite to start over",
			c.Name, filepath.Join(c.RunsDir, c.Name))
	}
	if st.overwrite && !st.resume {
		if err := os.RemoveAll(filepath.Join(c.RunsDir, c.Name, "checkpoints")); err != nil {
			return nil, err
		}
		os.Remove(filepath.Join(c.RunsDir, c.Name, "metrics.jsonl"))
	}
	tr, err := train.New(dev, c)
	if err != nil {
		return nil, err
	}
	defer tr.Close()
	if st.resume {
		if err := tr.Resume(); err != nil {
			return nil, err
		}
		fmt.Fprintf(stderr, "hilbert: resuming %s at update %d\n", c.Name, tr.Step())
	}
	cfg := tr.Config()
	fmt.Fprintf(stderr, "hilbert: %s on %s: d %d, %d layers, vocab %d, %d params; head %s; %d updates of %d x %d tokens\n",
		cfg.Name, dev.Name(), cfg.Model.Dim, cfg.Model.Layers, cfg.Model.Vocab, cfg.Model.NumParams(), cfg.Head,
		cfg.Steps, cfg.BatchSeqs, cfg.SeqLen)

	var bar *progressbar.ProgressBar
	if !st.quiet {
		bar = progressbar.NewOptions(cfg.Steps,
			progressbar.OptionSetWriter(stderr),
			progressbar.OptionSetDescription("train"),
			progressbar.OptionShowCount(),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionFullWidth(),
			progressbar.OptionThrottle(0),
			progressbar.OptionClearOnFinish(),
		)
		bar.Set(tr.Step())
	}
	var lastVal string
	hook := func(t *train.Trainer, r train.Record) error {
		if r.ValLoss != nil {
			lastVal = fmt.Sprintf(" val %.3f", *r.ValLoss)
		}
		if bar != nil {
			bar.Describe(fmt.Sprintf("step %d loss %.3f%s %.0f tok/s", r.Step, r.Loss, lastVal, r.TokensPerS))
			bar.Set(r.Step)
		}
		return nil
	}
	err = tr.Run(ctx, hook)
	if bar != nil {
		bar.Finish()
	}
	if errors.Is(err, train.ErrInterrupted) {
		fmt.Fprintf(stderr, "hilbert: %s interrupted at update %d; checkpoint written. Continue with the same command and -resume\n", c.Name, tr.Step())
		return nil, nil
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
}

// readTrainConfig reads a YAML config file strictly (unknown keys are
// errors that name them).
func readTrainConfig(path string) (trainFile, error) {
	var job trainFile
	f, err := os.Open(path)
	if err != nil {
		return job, err
	}
	defer f.Close()
	dec := yaml.NewDecoder(f)
	dec.KnownFields(true)
	if err := dec.Decode(&job); err != nil && !errors.Is(err, io.EOF) {
		return job, fmt.Errorf("config %s: %w", path, err)
	}
	if m := job.Model; m != nil {
		job.Config.Model = models.Config{Layers: m.Layers, Dim: m.Dim, HeadDim: m.HeadDim, MLPHidden: m.MLPHidden,
			Vocab: m.Vocab, Context: m.Context, RoPEBase: m.RoPEBase, InitStd: m.InitStd}
		if job.Config.Model.HeadDim == 0 {
			job.Config.Model.HeadDim = 64
		}
		if job.Config.Model.MLPHidden == 0 {
			job.Config.Model.MLPHidden = 4 * m.Dim
		}
		if job.Config.Model.Vocab == 0 {
			job.Config.Model.Vocab = models.PaperVocab
		}
		if job.Config.Model.RoPEBase == 0 {
			job.Config.Model.RoPEBase = 10000
		}
		if job.Config.Model.InitStd == 0 {
			job.Config.Model.InitStd = 0.02
		}
	}
	if job.Device == "" {
		job.Device = "cpu"
	}
	if job.Config.Model.Layers == 0 && job.Config.Preset == "" && len(job.Config.TrainShards) == 0 && len(job.Text) == 0 {
		// A file that names no model or data starts from the default job.
		def := defaultJob()
		def.Config.Name = job.Config.Name
		if def.Config.Name == "" {
			def.Config.Name = defaultJob().Config.Name
		}
		return def, nil
	}
	return job, nil
}

// hasYAMLKey reports whether a config file sets a top-level key.
func hasYAMLKey(path, key string) bool {
	if path == "" {
		return false
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	var m map[string]any
	if yaml.Unmarshal(data, &m) != nil {
		return false
	}
	_, ok := m[key]
	return ok
}

// applyFlags copies into job the fields whose flags were given.
func applyFlags(job, flags *trainFile, set map[string]bool) {
	c, f := &job.Config, &flags.Config
	copyIf := map[string]func(){
		"name": func() { c.Name = f.Name }, "runs": func() { c.RunsDir = f.RunsDir },
		"preset": func() { c.Preset = f.Preset }, "head": func() { c.Head = f.Head },
		"projected": func() { c.Projected = f.Projected }, "muon-lr": func() { c.MuonLR = f.MuonLR },
		"embed-lr": func() { c.EmbedLR = f.EmbedLR }, "head-lr": func() { c.HeadLR = f.HeadLR },
		"seed": func() { c.Seed = f.Seed }, "data-seed": func() { c.DataSeed = f.DataSeed },
		"val": func() { c.ValShard = f.ValShard }, "seq-len": func() { c.SeqLen = f.SeqLen },
		"micro-batch": func() { c.MicroBatch = f.MicroBatch }, "batch-seqs": func() { c.BatchSeqs = f.BatchSeqs },
		"steps": func() { c.Steps = f.Steps }, "warmup": func() { c.Warmup = f.Warmup },
		"clip": func() { c.ClipNorm = f.ClipNorm }, "val-every": func() { c.ValEvery = f.ValEvery },
		"val-tokens": func() { c.ValTokens = f.ValTokens }, "diag-every": func() { c.DiagEvery = f.DiagEvery },
		"panel-seqs": func() { c.PanelSeqs = f.PanelSeqs }, "panel-positions": func() { c.PanelPositions = f.PanelPositions },
		"checkpoint-every": func() { c.CheckpointEvery = f.CheckpointEvery }, "log-every": func() { c.LogEvery = f.LogEvery },
		"block-rows":      func() { c.BlockRows = f.BlockRows },
		"text-val-tokens": func() { job.TextValTokens = flags.TextValTokens },
		"device":          func() { job.Device = flags.Device }, "threads": func() { job.Threads = flags.Threads },
	}
	for name := range set {
		if fn, ok := copyIf[name]; ok {
			fn()
		}
	}
}

// openDevice opens "cpu", "cuda" or "cuda:N".
func openDevice(name string) (device.Device, error) {
	switch {
	case name == "" || name == "cpu":
		return cpu.New(), nil
	case name == "cuda" || strings.HasPrefix(name, "cuda:"):
		n := 0
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

// shardsFromText tokenizes the job's text files into shards in the run's
// data folder as prepare does (fineweb.AddTextFile: plain or gzip text,
// one document per blank-line-separated paragraph), sending the first
// TextValTokens tokens to validation.
func shardsFromText(ctx context.Context, job *trainFile, stderr io.Writer) error {
	c := &job.Config
	dir := filepath.Join(c.RunsDir, c.Name, "data")
	sum, err := fineweb.BuildFromTextFiles(ctx, fineweb.BuildConfig{
		Dir: dir, Prefix: "text", Overwrite: true,
		Split: fineweb.Split{ValTokens: job.TextValTokens},
	}, job.Text...)
	if errors.Is(err, fineweb.ErrNoTraining) || err == nil && (len(sum.TrainShards) == 0 || len(sum.ValShards) == 0) {
		return fmt.Errorf("-text: %d tokens are too few for a training and a validation split of %d tokens", sum.Tokens, job.TextValTokens)
	}
	if err != nil {
		return fmt.Errorf("-text: %w", err)
	}
	fmt.Fprintf(stderr, "hilbert: tokenized %d documents (%d tokens) from %s into %s: %d validation tokens\n",
		sum.Documents, sum.Tokens, strings.Join(job.Text, ", "), dir, sum.ValTokens)
	c.TrainShards, c.ValShard = sum.TrainShards, sum.ValShards[0]
	return nil
}
