package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"image/color"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/hilbert-ml/hilbert/data/fineweb"
	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/models"
	"github.com/hilbert-ml/hilbert/optim"
	"github.com/hilbert-ml/hilbert/optim/geometry/oracle"
	"github.com/hilbert-ml/hilbert/tokenizer/bytelevel"
	"github.com/hilbert-ml/hilbert/tokenizer/smallbpe"
	"github.com/hilbert-ml/hilbert/train"

	"github.com/hilbert-ml/hilbert/internal/regfile"
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
OUT/data.

Text: -text names files (gzip when they end in .gz); the default is
/work/shared/corpus/*.txt.gz when present, else Newton's Opticks from the Go
installation. Documents are blank-line-separated paragraphs, shuffled, the
first -val-tokens tokens to validation. With -vocab V > 256 the BPE
(package tokenizer/smallbpe) learns its V - 256 merges from all the
paragraphs before they are encoded.

-head exact (experimental, small V) trains with the exact diameter-constrained
head step instead of RowNorm's: RowNorm's EMA B is kept, and its step
-lr RN(B) (diameter <= 2 lr) is replaced by -2 lr Phi*(B), the maximiser of
T(B) (diameter 2 lr, first-order decrease 2 lr T(B) >= lr sum ||b_i||),
solved at every update to -exact-tol.

-timing "VxD,..." instead solves synthetic Zipf-frequency gradients of those
sizes and writes a timing table (timing.md) without training.

flags:
`

// oracleRow is one measured update (one line of oracle.jsonl).
type oracleRow struct {
	Step        int     `json:"step"`
	Loss        float64 `json:"loss"`
	LRScale     float64 `json:"lr_scale"`
	Rank        int     `json:"rank"`
	RowNormHalf float64 `json:"rownorm_half"` // Delta_RN / eta = (1/2) sum ||g_i||
	TLower      float64 `json:"t_lower"`      // Delta_* / eta lies in [TLower, TUpper]
	TUpper      float64 `json:"t_upper"`
	Gap         float64 `json:"gap"`
	Ratio       float64 `json:"ratio"` // Delta_RN / Delta_* at the midpoint of [TLower, TUpper]
	RatioLo     float64 `json:"ratio_lo"`
	RatioHi     float64 `json:"ratio_hi"`
	Bound       float64 `json:"bound"` // sqrt((k+1)/(2k))
	Iterations  int     `json:"iterations"`
	Active      int     `json:"active_pairs"`
	SolveS      float64 `json:"solve_s"`
	Converged   bool    `json:"converged"`
}

type oracleFlags struct {
	out, text, timing, head string
	vocab                   int
	dim, layers, context    int
	seqLen, micro, batch    int
	steps, warmup, every    int
	valTokens, valEvery     int
	muonLR, embedLR, headLR float64
	seed, dataSeed          uint64
	tol, stepTol            float64
	threads, oracleThreads  int
	maxIter                 int
	overwrite, quiet        bool
	replot                  bool
	timeLimit               time.Duration
	timingSamples           int
}

func runOracle(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("oracle", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, oracleUsage)
		fs.PrintDefaults()
	}
	var f oracleFlags
	fs.StringVar(&f.out, "out", "runs/oracle", "output folder")
	fs.StringVar(&f.text, "text", "", "comma-separated text files (.gz allowed); default: /work/shared/corpus/*.txt.gz, else Opticks")
	fs.StringVar(&f.timing, "timing", "", `timing table only: comma-separated sizes VxD, e.g. "256x128,1024x512"`)
	fs.IntVar(&f.timingSamples, "timing-samples", 2000, "timing: positions summed into each synthetic gradient")
	fs.StringVar(&f.head, "head", "rownorm", "head optimizer of the training run: rownorm, adamw, or exact (experimental: RowNorm's EMA, with the step replaced by the exact diameter-constrained step)")
	fs.Float64Var(&f.stepTol, "exact-tol", 1e-2, "with -head exact: relative gap of each step's solve")
	fs.IntVar(&f.vocab, "vocab", bytelevel.VocabSize, "vocabulary V: 256 is the byte-level tokenizer; a larger V trains a byte-level BPE of V tokens on the text")
	fs.IntVar(&f.dim, "dim", 128, "model width d")
	fs.IntVar(&f.layers, "layers", 2, "blocks")
	fs.IntVar(&f.context, "context", 128, "context length")
	fs.IntVar(&f.seqLen, "seq-len", 0, "sequence length (0: the context)")
	fs.IntVar(&f.micro, "micro-batch", 8, "sequences per forward pass")
	fs.IntVar(&f.batch, "batch-seqs", 16, "sequences per update")
	fs.IntVar(&f.steps, "steps", 300, "updates")
	fs.IntVar(&f.warmup, "warmup", 0, "warmup updates (0: floor(0.1 steps))")
	fs.IntVar(&f.every, "every", 20, "solve T(G) every N updates (and at updates 1 and the last)")
	fs.IntVar(&f.valTokens, "val-tokens", 65_536, "validation tokens (bytes at -vocab 256)")
	fs.IntVar(&f.valEvery, "val-every", 100, "validate every N updates (and at the end)")
	fs.Float64Var(&f.muonLR, "muon-lr", 0, "Muon peak LR (0: the paper's 8e-3)")
	fs.Float64Var(&f.embedLR, "embed-lr", 0, "embedding AdamW peak LR (0: the paper's 4e-3)")
	fs.Float64Var(&f.headLR, "head-lr", 0, "head peak LR (0: the paper's 512-wide value times 512/d)")
	fs.Uint64Var(&f.seed, "seed", 0, "model seed")
	fs.Uint64Var(&f.dataSeed, "data-seed", 0, "data order and paragraph shuffle seed")
	fs.Float64Var(&f.tol, "tol", 1e-4, "oracle: relative duality gap")
	fs.IntVar(&f.maxIter, "max-iter", 0, "oracle: iteration cap (0: 100,000)")
	fs.DurationVar(&f.timeLimit, "time-limit", 0, "oracle: time limit per solve (0: none)")
	fs.IntVar(&f.threads, "threads", 0, "CPU threads for training kernels (0: GOMAXPROCS)")
	fs.IntVar(&f.oracleThreads, "oracle-threads", 0, "oracle goroutines (0: GOMAXPROCS)")
	fs.BoolVar(&f.overwrite, "overwrite", false, "replace an earlier study in -out")
	fs.BoolVar(&f.quiet, "quiet", false, "no per-measurement lines on stderr")
	fs.BoolVar(&f.replot, "replot", false, "only redraw ratio.png and rewrite oracle.csv from OUT/oracle.jsonl")
	if err := parseFlags(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return usageErr(fs.Name(), fmt.Errorf("unexpected arguments %q", fs.Args()))
	}
	if f.threads > 0 {
		cpu.SetThreads(f.threads)
	}
	if err := os.MkdirAll(f.out, 0o755); err != nil {
		return err
	}
	opt := oracle.Options{Tol: f.tol, Threads: f.oracleThreads, MaxIter: f.maxIter, TimeLimit: f.timeLimit}
	if f.timing != "" {
		return oracleTiming(f, opt, stdout, stderr)
	}
	if f.replot {
		return oracleReplot(f.out)
	}
	return oracleStudy(f, opt, stdout, stderr)
}

// oracleStudy trains the small-vocabulary model and measures the ratio.
func oracleStudy(f oracleFlags, opt oracle.Options, stdout, stderr io.Writer) error {
	jsonl := filepath.Join(f.out, "oracle.jsonl")
	if _, err := os.Stat(jsonl); err == nil && !f.overwrite {
		return fmt.Errorf("%s exists: pass -overwrite to start the study over", jsonl)
	}
	if f.every < 1 {
		return fmt.Errorf("-every %d: want at least 1", f.every)
	}
	if f.vocab < bytelevel.VocabSize || f.vocab > smallbpe.MaxVocab {
		return fmt.Errorf("-vocab %d: want 256 (bytes) up to %d (a BPE)", f.vocab, smallbpe.MaxVocab)
	}
	files, err := oracleTextFiles(f.text)
	if err != nil {
		return err
	}
	seqLen := f.seqLen
	if seqLen == 0 {
		seqLen = f.context
	}
	sh, err := tokenShards(files, filepath.Join(f.out, "data"), f.valTokens+1, f.dataSeed, f.vocab)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "hilbert oracle: %s; %d training and %d validation tokens from %s\n", sh.tokenizer, sh.nTrain, f.valTokens+1, strings.Join(files, ", "))

	exact := strings.EqualFold(f.head, "exact")
	head := f.head
	if exact {
		head = "rownorm" // the trainer's RowNorm keeps the EMA; its step is replaced
	}
	cfg := train.Config{
		Name: "train", RunsDir: f.out, Head: head,
		Model: models.Config{Layers: f.layers, Dim: f.dim, HeadDim: 64, MLPHidden: 4 * f.dim,
			Vocab: f.vocab, Context: f.context, RoPEBase: 10000, InitStd: 0.02},
		MuonLR: f.muonLR, EmbedLR: f.embedLR, HeadLR: f.headLR,
		Seed: f.seed, DataSeed: f.dataSeed,
		TrainShards: []string{sh.train}, ValShard: sh.val,
		SeqLen: seqLen, MicroBatch: f.micro, BatchSeqs: f.batch,
		Steps: f.steps, Warmup: f.warmup,
		ValEvery: f.valEvery, ValTokens: f.valTokens, DiagEvery: f.every,
		PanelSeqs: 8, PanelPositions: seqLen, LogEvery: 1,
	}
	runDir := filepath.Join(f.out, cfg.Name)
	if train.HasCheckpoint(cfg) && !f.overwrite {
		return fmt.Errorf("%s holds a training run: pass -overwrite to start over", runDir)
	}
	os.RemoveAll(filepath.Join(runDir, "checkpoints"))
	os.Remove(filepath.Join(runDir, "metrics.jsonl"))

	tr, err := train.New(cpu.New(), cfg)
	if err != nil {
		return err
	}
	defer tr.Close()
	c := tr.Config()
	v, d := c.Model.Vocab, c.Model.Dim
	fmt.Fprintf(stderr, "hilbert oracle: d %d, %d layers, V %d, %d params; head %s; %d updates of %d x %d tokens; T(G) every %d updates (tol %g)\n",
		d, c.Model.Layers, v, c.Model.NumParams(), c.Head, c.Steps, c.BatchSeqs, c.SeqLen, f.every, f.tol)

	out, err := os.Create(jsonl)
	if err != nil {
		return err
	}
	defer out.Close()
	var rows []oracleRow
	var steps exactSteps
	g := make([]float64, v*d)
	headLR := f.headLR
	if headLR <= 0 {
		headLR = optim.PaperHeadLR(optim.HeadRowNorm, d)
	}
	stepOpt := opt
	stepOpt.Tol = f.stepTol
	hook := func(t *train.Trainer, r train.Record) error {
		if r.Step == 0 { // the validation before the first update: no gradient yet
			return nil
		}
		if exact {
			if err := steps.replace(t, headLR*r.LRScale, stepOpt); err != nil {
				return fmt.Errorf("update %d: exact step: %w", r.Step, err)
			}
		}
		if r.Step != 1 && r.Step%f.every != 0 && r.Step != c.Steps {
			return nil
		}
		// The head gradient of this update (after the global clip, which
		// scales it and leaves the ratio unchanged).
		grad := t.Head().Grad()
		if grad == nil {
			return fmt.Errorf("update %d: the head has no gradient", r.Step)
		}
		for i, x := range grad.Float32s() {
			g[i] = float64(x)
		}
		row, err := measure(g, v, d, opt)
		if err != nil {
			return fmt.Errorf("update %d: %w", r.Step, err)
		}
		row.Step, row.Loss, row.LRScale = r.Step, r.Loss, r.LRScale
		rows = append(rows, row)
		line, _ := json.Marshal(row)
		if _, err := out.Write(append(line, '\n')); err != nil {
			return err
		}
		if !f.quiet {
			fmt.Fprintf(stderr, "update %4d loss %.3f: rank %d, Delta_RN/Delta_* %.5f in [%.5f, %.5f], bound %.5f, gap %.1e, %d iterations, %.1f s\n",
				row.Step, row.Loss, row.Rank, row.Ratio, row.RatioLo, row.RatioHi, row.Bound, row.Gap, row.Iterations, row.SolveS)
		}
		return nil
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := tr.Run(ctx, hook); err != nil {
		return err
	}
	if err := out.Sync(); err != nil {
		return err
	}
	if err := writeOracleCSV(filepath.Join(f.out, "oracle.csv"), rows); err != nil {
		return err
	}
	if err := plotOracle(filepath.Join(f.out, "ratio.png"), rows); err != nil {
		return err
	}
	sum := tr.Summary()
	note := ""
	if exact {
		note = steps.String()
	}
	if err := writeOracleSummary(filepath.Join(f.out, "summary.md"), c, f.head, sh.tokenizer, note, sum, rows, files); err != nil {
		return err
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, r := range rows {
		lo, hi = math.Min(lo, r.Ratio), math.Max(hi, r.Ratio)
	}
	fmt.Fprintf(stdout, "oracle: %d measurements over %d updates: Delta_RN/Delta_* from %.4f to %.4f (bound %.4f), val loss %.4f; %s\n",
		len(rows), sum.Steps, lo, hi, oracle.Bound(min(v-1, d)), sum.ValLoss, filepath.Join(f.out, "summary.md"))
	return nil
}

// exactSteps replaces the trainer's RowNorm head step by the exact
// diameter-constrained step of the same budget: RowNorm's step -lr RN(B)
// has row diameter at most 2 lr; the exact step S_* = -2 lr Phi*(B), Phi*
// a maximising potential of T(B) (scale-free, so B's bias correction does
// not matter), has diameter exactly 2 lr and decreases <B, S> by 2 lr T(B)
// >= lr sum ||b_i||. It is applied after the trainer's update, as
// U += S_* - S_RN, so the trainer's logged D(S_t) and Hilbert RMS are
// those of RowNorm's step, and a validation at update t sees the weights
// before the replacement of update t.
type exactSteps struct {
	n, iterations int
	solveS        float64
	worstGap      float64
	b             []float64
}

func (e *exactSteps) replace(t *train.Trainer, lr float64, opt oracle.Options) error {
	head := t.Head()
	o := t.Optimizer().Optimizer(head)
	if o == nil || o.Kind() != "rownorm" {
		return errors.New("the head's optimizer is not RowNorm")
	}
	var ema []float32
	for _, st := range o.State() {
		if st.Name == "rownorm.b."+head.Name && st.Tensor != nil {
			ema = st.Tensor.Float32s()
		}
	}
	last := t.Optimizer().LastStep(head)
	if ema == nil || last == nil {
		return errors.New("no RowNorm EMA or last step")
	}
	v, d := head.Dim(0), head.Dim(1)
	if e.b == nil {
		e.b = make([]float64, v*d)
	}
	for i, x := range ema {
		e.b[i] = float64(x)
	}
	res, err := oracle.Solve(e.b, v, d, opt)
	if err != nil {
		return err
	}
	e.n++
	e.iterations += res.Iterations
	e.solveS += res.Elapsed.Seconds()
	e.worstGap = max(e.worstGap, res.Gap)
	step := res.Step(2 * lr)
	w := head.Float32s()
	for i, s := range last.Float32s() {
		w[i] += float32(step[i]) - s
	}
	head.SetFloat32(w)
	return nil
}

func (e *exactSteps) String() string {
	if e.n == 0 {
		return ""
	}
	return fmt.Sprintf("Exact head steps: %d solves of T(B) on RowNorm's EMA B, worst relative gap %.1e, %.0f iterations on average, %.0f s of solving in all.",
		e.n, e.worstGap, float64(e.iterations)/float64(e.n), e.solveS)
}

// oracleReplot redraws a finished study's plot and CSV from its JSONL.
func oracleReplot(dir string) error {
	fh, err := regfile.Open(filepath.Join(dir, "oracle.jsonl"))
	if err != nil {
		return err
	}
	defer fh.Close()
	var rows []oracleRow
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		var r oracleRow
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return fmt.Errorf("%s: %w", fh.Name(), err)
		}
		rows = append(rows, r)
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if err := writeOracleCSV(filepath.Join(dir, "oracle.csv"), rows); err != nil {
		return err
	}
	return plotOracle(filepath.Join(dir, "ratio.png"), rows)
}

// measure solves T(G) and fills the ratio fields of a row.
func measure(g []float64, v, d int, opt oracle.Options) (oracleRow, error) {
	res, err := oracle.Solve(g, v, d, opt)
	if err != nil {
		return oracleRow{}, err
	}
	mid, lo, hi := res.Ratio()
	return oracleRow{
		Rank: res.Rank, RowNormHalf: res.RowNormHalf, TLower: res.Lower, TUpper: res.Upper, Gap: res.Gap,
		Ratio: mid, RatioLo: lo, RatioHi: hi, Bound: oracle.Bound(res.Rank),
		Iterations: res.Iterations, Active: res.Active, SolveS: res.Elapsed.Seconds(), Converged: res.Converged,
	}, nil
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

// oracleShards are a study's token shards.
type oracleShards struct {
	train, val string
	nTrain     int
	tokenizer  string // in words, for the log and summary.md
}

// tokenShards reads the files' paragraphs, shuffles them with seed and
// writes token shards: the first valTokens tokens to validation, the rest
// to training. At vocab 256 the tokens are bytes (package bytelevel);
// above, a byte-level BPE of vocab tokens (package smallbpe) is trained on
// all the paragraphs first and its merges saved beside the shards.
func tokenShards(files []string, dir string, valTokens int, seed uint64, vocab int) (oracleShards, error) {
	var docs []string
	for _, p := range files {
		text, err := readText(p)
		if err != nil {
			return oracleShards{}, err
		}
		for _, para := range strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n\n") {
			if strings.TrimSpace(para) != "" {
				docs = append(docs, para)
			}
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return oracleShards{}, err
	}
	rng := rand.New(rand.NewPCG(seed, 0x6f7261636c65))
	rng.Shuffle(len(docs), func(i, j int) { docs[i], docs[j] = docs[j], docs[i] })
	appendDoc, prefix, unit := bytelevel.AppendDocument, "bytes", "bytes"
	desc := "byte-level tokens (V 256)"
	if vocab != bytelevel.VocabSize {
		bpe, err := smallbpe.Train(vocab, docs...)
		if err != nil {
			return oracleShards{}, fmt.Errorf("-vocab %d: %w", vocab, err)
		}
		prefix, unit = fmt.Sprintf("bpe%d", vocab), "tokens"
		merges := filepath.Join(dir, prefix+".txt")
		if err := bpe.Save(merges); err != nil {
			return oracleShards{}, err
		}
		appendDoc = bpe.Encoder()
		desc = fmt.Sprintf("byte-level BPE of V %d trained on the text (merges in %s)", vocab, merges)
	}
	var toks []int32
	n := 0
	for _, doc := range docs {
		toks = appendDoc(toks, doc)
		n += len(doc) + 1
	}
	if vocab != bytelevel.VocabSize {
		desc += fmt.Sprintf(", %.3f tokens per byte", float64(len(toks))/float64(n))
	}
	if len(toks) < 2*valTokens {
		return oracleShards{}, fmt.Errorf("%d %s of text: too few for %d validation %s and as many for training", len(toks), unit, valTokens, unit)
	}
	sh := oracleShards{val: filepath.Join(dir, prefix+"_val_000000.bin"), train: filepath.Join(dir, prefix+"_train_000000.bin"),
		nTrain: len(toks) - valTokens, tokenizer: desc}
	if err := fineweb.WriteShard(sh.val, toks[:valTokens], true); err != nil {
		return oracleShards{}, err
	}
	if err := fineweb.WriteShard(sh.train, toks[valTokens:], true); err != nil {
		return oracleShards{}, err
	}
	return sh, nil
}

// readText reads a text file as prepare and train -text do
// (fineweb.OpenText: plain or gzip, a truncated gzip is an error).
func readText(path string) (string, error) {
	r, err := fineweb.OpenText(path, nil)
	if err != nil {
		return "", err
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return string(b), nil
}

func writeOracleCSV(path string, rows []oracleRow) error {
	var b strings.Builder
	b.WriteString("step,loss,lr_scale,rank,rownorm_half,t_lower,t_upper,gap,ratio,ratio_lo,ratio_hi,bound,iterations,active_pairs,solve_s,converged\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "%d,%.6f,%.6f,%d,%.10g,%.10g,%.10g,%.3g,%.8f,%.8f,%.8f,%.8f,%d,%d,%.3f,%v\n",
			r.Step, r.Loss, r.LRScale, r.Rank, r.RowNormHalf, r.TLower, r.TUpper, r.Gap, r.Ratio, r.RatioLo, r.RatioHi, r.Bound,
			r.Iterations, r.Active, r.SolveS, r.Converged)
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// plotOracle draws the measured ratio (line and markers), the paper's
// lower bound and 1 against the update number.
func plotOracle(path string, rows []oracleRow) error {
	if len(rows) == 0 {
		return nil
	}
	var ratio, bound, one plotter.XYs
	lo := 1.0
	for _, r := range rows {
		x := float64(r.Step)
		ratio = append(ratio, plotter.XY{X: x, Y: r.Ratio})
		bound = append(bound, plotter.XY{X: x, Y: r.Bound})
		one = append(one, plotter.XY{X: x, Y: 1})
		lo = math.Min(lo, math.Min(r.Ratio, r.Bound))
	}
	p := plot.New()
	p.Title.Text = "RowNorm vs the exact diameter-constrained step (head gradient)"
	p.X.Label.Text = "update"
	p.Y.Label.Text = "Delta_RN / Delta_*"
	p.Y.Min, p.Y.Max = lo-0.05, 1.15 // room for the legend above 1
	p.Add(plotter.NewGrid())
	blue, red, grey := color.RGBA{31, 119, 180, 255}, color.RGBA{214, 39, 40, 255}, color.RGBA{90, 90, 90, 255}
	l, sc, err := plotter.NewLinePoints(ratio)
	if err != nil {
		return err
	}
	l.Color, sc.Color, sc.Radius = blue, blue, vg.Points(2.5)
	p.Add(l, sc)
	p.Legend.Add("Delta_RN / Delta_* (certified, gap < tol)", l, sc)
	for _, s := range []struct {
		label string
		xy    plotter.XYs
		c     color.RGBA
		dash  bool
	}{{"lower bound sqrt((k+1)/(2k))", bound, red, true}, {"upper bound 1", one, grey, false}} {
		line, err := plotter.NewLine(s.xy)
		if err != nil {
			return err
		}
		line.Color, line.Width = s.c, vg.Points(1.2)
		if s.dash {
			line.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
		}
		p.Add(line)
		p.Legend.Add(s.label, line)
	}
	p.Legend.Top = true
	return p.Save(7*vg.Inch, 4*vg.Inch, path)
}

func writeOracleSummary(path string, c train.Config, head, tokenizer, note string, s train.Summary, rows []oracleRow, files []string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# Delta_RN / Delta_* over training\n\n")
	unit := "byte"
	if c.Model.Vocab != bytelevel.VocabSize {
		unit = "token"
	}
	fmt.Fprintf(&b, "Tokens: %s.\n", tokenizer)
	fmt.Fprintf(&b, "Model (V %d): d %d, %d layers, seq %d; head %s; %d updates of %d sequences; seed %d, data seed %d.\n",
		c.Model.Vocab, c.Model.Dim, c.Model.Layers, c.SeqLen, head, c.Steps, c.BatchSeqs, c.Seed, c.DataSeed)
	if note != "" {
		b.WriteString(note + "\n")
	}
	fmt.Fprintf(&b, "Text: %s. Final train loss %.4f, val loss %.4f (nats/%s).\n\n", strings.Join(files, ", "), s.FinalLoss, s.ValLoss, unit)
	b.WriteString("| update | loss | rank k | Delta_RN/Delta_* | certified interval | bound | gap | active pairs | iterations | solve |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %d | %.3f | %d | %.5f | [%.5f, %.5f] | %.5f | %.1e | %d | %d | %.1f s |\n",
			r.Step, r.Loss, r.Rank, r.Ratio, r.RatioLo, r.RatioHi, r.Bound, r.Gap, r.Active, r.Iterations, r.SolveS)
	}
	fmt.Fprintf(&b, "\nActive pairs: token pairs carrying flow in the solver's last iterate, of %d (the pairs at distance 1 in the exact step).\n", c.Model.Vocab*(c.Model.Vocab-1)/2)
	b.WriteString("\n![ratio](ratio.png)\n")
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// oracleTiming solves synthetic gradients of the given sizes.
func oracleTiming(f oracleFlags, opt oracle.Options, stdout, stderr io.Writer) error {
	var b strings.Builder
	threads := opt.Threads
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	fmt.Fprintf(&b, "Synthetic Zipf-frequency gradients (%d positions each), relative gap %g, %d threads, float64.\n\n", f.timingSamples, opt.Tol, threads)
	b.WriteString("| V | d | rank | pairs | iterations | wall s | CPU s | gap | active pairs | Delta_RN/Delta_* | bound |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, size := range strings.Split(f.timing, ",") {
		vs, ds, ok := strings.Cut(strings.TrimSpace(size), "x")
		v, err1 := strconv.Atoi(vs)
		d, err2 := strconv.Atoi(ds)
		if !ok || err1 != nil || err2 != nil || v < 2 || d < 1 {
			return fmt.Errorf("-timing %q: want VxD with V >= 2, D >= 1", size)
		}
		g := zipfGradient(rand.New(rand.NewPCG(uint64(v), uint64(d))), v, d, f.timingSamples)
		cpu0 := cpuSeconds()
		row, err := measure(g, v, d, opt)
		if err != nil {
			return err
		}
		cpuS := "-"
		if c := cpuSeconds() - cpu0; !math.IsNaN(c) {
			cpuS = fmt.Sprintf("%.1f", c)
		}
		line := fmt.Sprintf("| %d | %d | %d | %d | %d | %.2f | %s | %.1e | %d | %.5f | %.5f |\n",
			v, d, row.Rank, v*(v-1)/2, row.Iterations, row.SolveS, cpuS, row.Gap, row.Active, row.Ratio, row.Bound)
		b.WriteString(line)
		fmt.Fprint(stderr, line)
	}
	if err := os.WriteFile(filepath.Join(f.out, "timing.md"), []byte(b.String()), 0o644); err != nil {
		return err
	}
	fmt.Fprint(stdout, b.String())
	return nil
}

// cpuSeconds returns the process's user + system CPU time from
// /proc/self/stat (Linux, clock ticks of 1/100 s), or NaN elsewhere.
func cpuSeconds() float64 {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return math.NaN()
	}
	// Fields after the command name, which is parenthesised and may hold
	// spaces: state is field 3, utime 14 and stime 15.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return math.NaN()
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return math.NaN()
	}
	u, err1 := strconv.ParseFloat(f[11], 64)
	s, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return math.NaN()
	}
	return (u + s) / 100
}

// zipfGradient is a synthetic head gradient: n positions with Gaussian
// hidden states, softmax probabilities around Zipf frequencies and Zipf
// targets, g_i = mean over positions of (p_i - [target = i]) h.
func zipfGradient(rng *rand.Rand, v, d, n int) []float64 {
	g := make([]float64, v*d)
	h := make([]float64, d)
	z := make([]float64, v)
	w := make([]float64, v)
	cum := make([]float64, v)
	var ws float64
	for i := range w {
		w[i] = 1 / float64(i+1)
		ws += w[i]
		cum[i] = ws
	}
	for t := 0; t < n; t++ {
		for c := range h {
			h[c] = rng.NormFloat64()
		}
		var zs float64
		for i := range z {
			z[i] = w[i] * math.Exp(0.5*rng.NormFloat64())
			zs += z[i]
		}
		u := rng.Float64() * ws
		tgt := min(v-1, sortSearch(cum, u))
		for i := range z {
			p := z[i] / zs
			if i == tgt {
				p--
			}
			row := g[i*d : (i+1)*d]
			for c, e := range h {
				row[c] += p * e / float64(n)
			}
		}
	}
	return g
}

// sortSearch returns the first index with cum[i] >= u.
func sortSearch(cum []float64, u float64) int {
	lo, hi := 0, len(cum)
	for lo < hi {
		m := (lo + hi) / 2
		if cum[m] < u {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}
