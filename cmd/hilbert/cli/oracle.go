package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/study/oraclestudy"
)

func init() {
	register(subcommand{
		name:    "oracle",
		summary: "exact diameter oracle: RowNorm's Delta_RN/Delta_* on a small-vocabulary model's head gradients",
		run:     runOracle,
	})
}

const oracleUsage = `usage: hilbert oracle [flags]

Trains a small-vocabulary model (byte-level, V = 256, or with -vocab V a
byte-level BPE of V tokens trained on the text) with the paper's recipe
and, at chosen updates, solves the exact diameter-constrained
problem T(G) for the head gradient G (centred), reporting RowNorm's
first-order decrease relative to the best under the same row-diameter
budget,

    Delta_RN / Delta_* = (1/2) sum_i ||g_i|| / T(G),

with its certified interval and the paper's bound sqrt((k+1)/(2k)) <= ratio
<= 1, k = rank(G). Output in OUT: oracle.jsonl and oracle.csv (one row per
measured update), ratio.png, summary.md, the training run in OUT/train and
the token shards (and with -vocab V > 256 the BPE's merges, bpeV.txt) in
OUT/data. The study is package study/oraclestudy; this command is its
front end.

Text: -text names files (plain or gzip); the default is
/work/shared/corpus/*.txt.gz when present, else Newton's Opticks from the Go
installation. Documents are blank-line-separated paragraphs, shuffled, the
first -val-tokens tokens to validation. With -vocab V > 256 the BPE
(package tokenizer/smallbpe) learns its V - 256 merges from all the
paragraphs before they are encoded. -val-text names other files whose whole
text is the validation instead: all of -text trains (and the BPE learns
from it alone), and studies of different -vocab on one -val-text report
comparable validation losses in nats per byte (summary.md).

-head exact (experimental, small V) trains with the exact diameter-constrained
head step instead of RowNorm's: RowNorm's EMA B is kept, and its step
-lr RN(B) (diameter <= 2 lr) is replaced by -2 lr Phi*(B), the maximiser of
T(B) (diameter 2 lr, first-order decrease 2 lr T(B) >= lr sum ||b_i||),
solved at every update to -exact-tol.

-timing "VxD,..." instead solves synthetic Zipf-frequency gradients of those
sizes and writes a timing table (timing.md) without training.

flags:
`

// oracleFlags are the flags beyond the study's Config.
type oracleFlags struct {
	text, valText    string
	timing           string
	threads, samples int
	replot           bool
	study            oraclestudy.Config
}

func runOracle(args []string, stdout, stderr io.Writer) error {
	f, err := parseOracleFlags(args, stderr)
	if f == nil {
		return err
	}
	if f.threads > 0 {
		cpu.SetThreads(f.threads)
	}
	c := f.study
	switch {
	case f.timing != "":
		sizes, err := oraclestudy.ParseSizes(f.timing)
		if err != nil {
			return fmt.Errorf("-timing: %w", err)
		}
		table, err := oraclestudy.Timing(c.Out, sizes, f.samples, c.Solver, stderr)
		if err != nil {
			return err
		}
		fmt.Fprint(stdout, table)
		return nil
	case f.replot:
		return oraclestudy.Replot(c.Out)
	}
	if c.Text, err = oracleTextFiles(f.text); err != nil {
		return err
	}
	c.Log = stderr
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := oraclestudy.Run(ctx, cpu.New(), c)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "oracle: %d measurements over %d updates: Delta_RN/Delta_* from %.4f to %.4f (bound %.4f), val loss %.4f (%.4f nats/byte); %s\n",
		len(res.Rows), res.Train.Steps, res.MinRatio, res.MaxRatio, res.Bound, res.Train.ValLoss, res.ValNatsPerByte, res.Summary)
	return nil
}

// parseOracleFlags reads the flags into a study Config, its defaults
// oraclestudy.DefaultConfig's; nil flags and a nil error mean -h.
func parseOracleFlags(args []string, stderr io.Writer) (*oracleFlags, error) {
	fs := newFlagSet("oracle", oracleUsage, stderr)
	f := &oracleFlags{study: oraclestudy.DefaultConfig()}
	c := &f.study
	fs.StringVar(&c.Out, "out", c.Out, "output folder")
	fs.StringVar(&f.text, "text", "", "comma-separated text files (.gz allowed); default: /work/shared/corpus/*.txt.gz, else Opticks")
	fs.StringVar(&f.valText, "val-text", "", "comma-separated text files whose whole text is the validation (all of -text then trains; -val-tokens does not apply)")
	fs.StringVar(&f.timing, "timing", "", `timing table only: comma-separated sizes VxD, e.g. "256x128,1024x512"`)
	fs.IntVar(&f.samples, "timing-samples", 2000, "timing: positions summed into each synthetic gradient")
	fs.StringVar(&c.Head, "head", c.Head, "head optimizer of the training run: rownorm, adamw, or exact (experimental: RowNorm's EMA, with the step replaced by the exact diameter-constrained step)")
	fs.Float64Var(&c.ExactTol, "exact-tol", c.ExactTol, "with -head exact: relative gap of each step's solve")
	fs.IntVar(&c.Vocab, "vocab", c.Vocab, "vocabulary V: 256 is the byte-level tokenizer; a larger V trains a byte-level BPE of V tokens on the text")
	fs.IntVar(&c.Dim, "dim", c.Dim, "model width d")
	fs.IntVar(&c.Layers, "layers", c.Layers, "blocks")
	fs.IntVar(&c.Context, "context", c.Context, "context length")
	fs.IntVar(&c.SeqLen, "seq-len", c.SeqLen, "sequence length (0: the context)")
	fs.IntVar(&c.MicroBatch, "micro-batch", c.MicroBatch, "sequences per forward pass")
	fs.IntVar(&c.BatchSeqs, "batch-seqs", c.BatchSeqs, "sequences per update")
	fs.IntVar(&c.Steps, "steps", c.Steps, "updates")
	fs.IntVar(&c.Warmup, "warmup", c.Warmup, "warmup updates (0: floor(0.1 steps))")
	fs.IntVar(&c.Every, "every", c.Every, "solve T(G) every N updates (and at updates 1 and the last)")
	fs.IntVar(&c.ValTokens, "val-tokens", c.ValTokens, "validation tokens (bytes at -vocab 256)")
	fs.IntVar(&c.ValEvery, "val-every", c.ValEvery, "validate every N updates (and at the end)")
	fs.Float64Var(&c.MuonLR, "muon-lr", c.MuonLR, "Muon peak LR (0: the paper's 8e-3)")
	fs.Float64Var(&c.EmbedLR, "embed-lr", c.EmbedLR, "embedding AdamW peak LR (0: the paper's 4e-3)")
	fs.Float64Var(&c.HeadLR, "head-lr", c.HeadLR, "head peak LR (0: the paper's 512-wide value times 512/d)")
	fs.Uint64Var(&c.Seed, "seed", c.Seed, "model seed")
	fs.Uint64Var(&c.DataSeed, "data-seed", c.DataSeed, "data order and paragraph shuffle seed")
	fs.Float64Var(&c.Solver.Tol, "tol", c.Solver.Tol, "oracle: relative duality gap")
	fs.IntVar(&c.Solver.MaxIter, "max-iter", c.Solver.MaxIter, "oracle: iteration cap (0: 100,000)")
	fs.DurationVar(&c.Solver.TimeLimit, "time-limit", c.Solver.TimeLimit, "oracle: time limit per solve (0: none)")
	fs.IntVar(&f.threads, "threads", 0, "CPU threads for training kernels (0: GOMAXPROCS)")
	fs.IntVar(&c.Solver.Threads, "oracle-threads", c.Solver.Threads, "oracle goroutines (0: GOMAXPROCS)")
	fs.BoolVar(&c.Overwrite, "overwrite", c.Overwrite, "replace an earlier study in -out")
	fs.BoolVar(&c.Quiet, "quiet", c.Quiet, "no per-measurement lines on stderr")
	fs.BoolVar(&f.replot, "replot", false, "only redraw ratio.png and rewrite oracle.csv from OUT/oracle.jsonl")
	if stop, err := parseCommand(fs, args); stop {
		return nil, err
	}
	if f.valText != "" {
		set := false
		fs.Visit(func(fl *flag.Flag) { set = set || fl.Name == "val-tokens" })
		if set {
			return nil, usageErr(fs.Name(), fmt.Errorf("-val-tokens with -val-text: the validation is the whole of %s", f.valText))
		}
		c.ValText, c.ValTokens = strings.Split(f.valText, ","), 0
	}
	return f, nil
}

// oracleTextFiles resolves -text (or the default corpus).
func oracleTextFiles(text string) ([]string, error) {
	if text != "" {
		return strings.Split(text, ","), nil
	}
	if m, _ := filepath.Glob("/work/shared/corpus/*.txt.gz"); len(m) > 0 {
		return m, nil
	}
	p, err := opticksPath()
	if err != nil {
		return nil, err
	}
	return []string{p}, nil
}
