// Package oraclestudy is the exact diameter oracle study that `hilbert
// oracle` runs (docs/results/oracle): it trains a small-vocabulary model
// with the paper's recipe and, at chosen updates, solves the exact
// diameter-constrained problem T(G) for the head gradient G
// (optim/geometry/oracle), reporting RowNorm's first-order decrease
// relative to the best under the same row-diameter budget,
//
//	Delta_RN / Delta_* = (1/2) sum_i ||g_i|| / T(G),
//
// with its certified interval and the paper's bound sqrt((k+1)/(2k)) <=
// ratio <= 1, k = rank(G). Run writes, in Config.Out, oracle.jsonl and
// oracle.csv (one Row per measured update), ratio.png, summary.md, the
// training run in train/ and the token shards (and a BPE's merges) in
// data/. Timing solves synthetic gradients instead and writes timing.md.
//
// A study sits on top, as train does: it depends on train, the solver and
// the data and tokenizer packages, is handed its device, and never
// imports a concrete backend or cmd.
package oraclestudy

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/internal/atomicfile"
	"github.com/hilbert-ml/hilbert/internal/regfile"
	"github.com/hilbert-ml/hilbert/models"
	"github.com/hilbert-ml/hilbert/optim"
	"github.com/hilbert-ml/hilbert/optim/geometry/oracle"
	"github.com/hilbert-ml/hilbert/tokenizer/bytelevel"
	"github.com/hilbert-ml/hilbert/tokenizer/smallbpe"
	"github.com/hilbert-ml/hilbert/train"
)

// Config is a study's settings; DefaultConfig gives the published study's.
type Config struct {
	// Out is the study's folder.
	Out string
	// Text lists the text files (plain or gzip): blank-line-separated
	// paragraphs are the documents, shuffled with DataSeed, the first
	// ValTokens+1 tokens to validation (without ValText).
	Text []string
	// ValText, when set, lists other files whose whole text (paragraphs
	// in order) is the validation: all of Text then goes to training, a
	// BPE learns from Text alone, and ValTokens must be 0. Studies of
	// different vocabularies on one ValText validate on the same text, so
	// their losses per byte compare.
	ValText []string
	// Head is the training run's head optimizer: rownorm, adamw, or exact
	// (experimental: RowNorm's EMA B kept, its step replaced by the exact
	// diameter-constrained step of the same budget, solved at every update
	// to ExactTol; see exactSteps).
	Head     string
	ExactTol float64
	// Vocab is V: 256 is the byte-level tokenizer; a larger V trains a
	// byte-level BPE of V tokens (tokenizer/smallbpe) on the paragraphs.
	Vocab int
	// The model and the run: width, blocks, context, sequence length (0:
	// the context), sequences per forward pass and per update, updates,
	// warmup updates (0: floor(0.1 Steps)).
	Dim, Layers, Context          int
	SeqLen, MicroBatch, BatchSeqs int
	Steps, Warmup                 int
	// Every solves T(G) every Every updates (and at update 1 and the last).
	Every int
	// ValTokens is the validation prefix (0 with ValText: all of it);
	// ValEvery the validation interval.
	ValTokens, ValEvery int
	// Peak learning rates (0: the paper's; the head's scaled to the width).
	MuonLR, EmbedLR, HeadLR float64
	Seed, DataSeed          uint64
	// Solver configures each measurement's solve of T(G).
	Solver oracle.Options
	// Overwrite replaces an earlier study in Out.
	Overwrite bool
	// Log receives the progress lines (nil: none); Quiet leaves out the
	// line per measurement.
	Log   io.Writer
	Quiet bool
}

// DefaultConfig returns the published study's settings (Out runs/oracle,
// no text: the caller names it).
func DefaultConfig() Config {
	return Config{
		Out: filepath.Join("runs", "oracle"), Head: "rownorm", ExactTol: 1e-2, Vocab: bytelevel.VocabSize,
		Dim: 128, Layers: 2, Context: 128, MicroBatch: 8, BatchSeqs: 16, Steps: 300,
		Every: 20, ValTokens: 65_536, ValEvery: 100, Solver: oracle.Options{Tol: 1e-4},
	}
}

// Row is one measured update: one line of oracle.jsonl.
type Row struct {
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
	// The token pairs the step uses, three ways (oracle.Result.PairCounts at
	// pairFrac): carrying flow in the solver's last iterate, at distance
	// >= 0.999 in the certified potential, and the fewest carrying 99.9%
	// of the certified flow's cost.
	Active     int     `json:"active_pairs"`
	AtDiameter int     `json:"pairs_at_diameter"`
	CostPairs  int     `json:"pairs_carrying_cost"`
	SolveS     float64 `json:"solve_s"`
	Converged  bool    `json:"converged"`
}

// Result is what a finished study measured.
type Result struct {
	Rows  []Row
	Train train.Summary
	// ValTargets are the validation tokens scored (each after the first
	// of its sequence), ValBytes their length in bytes of text and
	// ValNatsPerByte the final validation loss per byte (Train.ValLoss x
	// ValTargets / ValBytes; the loss itself at V 256).
	ValTargets, ValBytes int
	ValNatsPerByte       float64
	// MinRatio and MaxRatio bound the measured ratios; Bound is the
	// paper's lower bound at the largest possible rank, min(V-1, d).
	MinRatio, MaxRatio, Bound float64
	// Summary is the path of summary.md.
	Summary string
}

// check validates what train.Config does not.
func (c Config) check() error {
	if c.Every < 1 {
		return fmt.Errorf("oraclestudy: every %d: want at least 1", c.Every)
	}
	if c.Vocab < bytelevel.VocabSize || c.Vocab > smallbpe.MaxVocab {
		return fmt.Errorf("oraclestudy: vocab %d: want 256 (bytes) up to %d (a BPE)", c.Vocab, smallbpe.MaxVocab)
	}
	if len(c.Text) == 0 {
		return fmt.Errorf("oraclestudy: no text files")
	}
	if len(c.ValText) > 0 && c.ValTokens != 0 {
		return fmt.Errorf("oraclestudy: val tokens %d with val text: the validation is the whole of %s; leave val tokens 0", c.ValTokens, strings.Join(c.ValText, ", "))
	}
	if len(c.ValText) == 0 && c.ValTokens < 1 {
		return fmt.Errorf("oraclestudy: val tokens %d: want at least 1 (or val text files)", c.ValTokens)
	}
	for _, v := range c.ValText {
		for _, t := range c.Text {
			if regfile.SamePath(v, t) {
				return fmt.Errorf("oraclestudy: %s is both training text and val text", v)
			}
		}
	}
	if h := strings.ToLower(c.Head); h != "rownorm" && h != "adamw" && h != "exact" {
		return fmt.Errorf("oraclestudy: head %q: want rownorm, adamw or exact", c.Head)
	}
	return nil
}

// trainConfig is the training run's configuration on the shards sh.
func (c Config) trainConfig(sh shards) train.Config {
	seqLen := c.SeqLen
	if seqLen == 0 {
		seqLen = c.Context
	}
	head := c.Head
	if c.exact() {
		head = "rownorm" // the trainer's RowNorm keeps the EMA; its step is replaced
	}
	return train.Config{
		Name: "train", RunsDir: c.Out, Head: head,
		Model: models.Config{Layers: c.Layers, Dim: c.Dim, HeadDim: 64, MLPHidden: 4 * c.Dim,
			Vocab: c.Vocab, Context: c.Context, RoPEBase: 10000, InitStd: 0.02},
		MuonLR: c.MuonLR, EmbedLR: c.EmbedLR, HeadLR: c.HeadLR,
		Seed: c.Seed, DataSeed: c.DataSeed,
		TrainShards: []string{sh.train}, ValShard: sh.val,
		SeqLen: seqLen, MicroBatch: c.MicroBatch, BatchSeqs: c.BatchSeqs,
		Steps: c.Steps, Warmup: c.Warmup,
		ValEvery: c.ValEvery, ValTokens: sh.nVal - 1, DiagEvery: c.Every,
		PanelSeqs: 8, PanelPositions: seqLen, LogEvery: 1,
	}
}

// valFiles are the files the validation comes from: ValText, or Text.
func (c Config) valFiles() []string {
	if len(c.ValText) > 0 {
		return c.ValText
	}
	return c.Text
}

func (c Config) exact() bool { return strings.EqualFold(c.Head, "exact") }

func (c Config) logf(format string, args ...any) {
	if c.Log != nil {
		fmt.Fprintf(c.Log, format, args...)
	}
}

// Run trains on dev and measures the ratio at updates 1, every Every and
// the last; ctx stops the training after the current update.
func Run(ctx context.Context, dev device.Device, c Config) (*Result, error) {
	jsonl := filepath.Join(c.Out, "oracle.jsonl")
	if _, err := os.Stat(jsonl); err == nil && !c.Overwrite {
		return nil, fmt.Errorf("oraclestudy: %s exists: overwrite it (hilbert oracle -overwrite) to start the study over", jsonl)
	}
	if err := c.check(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(c.Out, 0o755); err != nil {
		return nil, fmt.Errorf("oraclestudy: %w", err)
	}
	sh, err := tokenShards(c.Text, c.ValText, filepath.Join(c.Out, "data"), c.ValTokens+1, c.DataSeed, c.Vocab)
	if err != nil {
		return nil, err
	}
	c.logf("hilbert oracle: %s; %d training tokens from %s, %d validation tokens from %s\n", sh.tokenizer,
		sh.nTrain, strings.Join(c.Text, ", "), sh.nVal, strings.Join(c.valFiles(), ", "))
	tc := c.trainConfig(sh)
	runDir := filepath.Join(c.Out, tc.Name)
	if train.HasCheckpoint(tc) && !c.Overwrite {
		return nil, fmt.Errorf("oraclestudy: %s holds a training run: overwrite it (hilbert oracle -overwrite) to start over", runDir)
	}
	os.RemoveAll(filepath.Join(runDir, "checkpoints"))
	os.Remove(filepath.Join(runDir, "metrics.jsonl"))
	tr, err := train.New(dev, tc)
	if err != nil {
		return nil, err
	}
	defer tr.Close()
	s, err := newStudy(c, tr.Config(), jsonl)
	if err != nil {
		return nil, err
	}
	defer s.out.Close()
	if err := tr.Run(ctx, s.hook); err != nil {
		return nil, err
	}
	return s.finish(tr.Summary(), sh)
}

// study is a running study: what the trainer's hook measures into.
type study struct {
	c     Config
	tc    train.Config // the trainer's, defaults filled in
	out   *os.File     // oracle.jsonl, a line per measurement as it comes
	rows  []Row
	steps exactSteps
	g     []float64 // the head gradient in float64
	lr    float64   // the head's peak learning rate
}

func newStudy(c Config, tc train.Config, jsonl string) (*study, error) {
	v, d := tc.Model.Vocab, tc.Model.Dim
	c.logf("hilbert oracle: d %d, %d layers, V %d, %d params; head %s; %d updates of %d x %d tokens; T(G) every %d updates (tol %g)\n",
		d, tc.Model.Layers, v, tc.Model.NumParams(), tc.Head, tc.Steps, tc.BatchSeqs, tc.SeqLen, c.Every, c.Solver.Tol)
	out, err := os.Create(jsonl)
	if err != nil {
		return nil, fmt.Errorf("oraclestudy: %w", err)
	}
	lr := c.HeadLR
	if lr <= 0 {
		lr = optim.PaperHeadLR(optim.HeadRowNorm, d)
	}
	return &study{c: c, tc: tc, out: out, g: make([]float64, v*d), lr: lr}, nil
}

// hook is the trainer's hook: after each update, the exact step (with
// Head exact) and, at the measured updates, the solve of T(G).
func (s *study) hook(t *train.Trainer, r train.Record) error {
	if r.Step == 0 { // the validation before the first update: no gradient yet
		return nil
	}
	if s.c.exact() {
		opt := s.c.Solver
		opt.Tol = s.c.ExactTol
		if err := s.steps.replace(t, s.lr*r.LRScale, opt); err != nil {
			return fmt.Errorf("oraclestudy: update %d: exact step: %w", r.Step, err)
		}
	}
	if r.Step != 1 && r.Step%s.c.Every != 0 && r.Step != s.tc.Steps {
		return nil
	}
	// The head gradient of this update (after the global clip, which
	// scales it and leaves the ratio unchanged).
	grad := t.Head().Grad()
	if grad == nil {
		return fmt.Errorf("oraclestudy: update %d: the head has no gradient", r.Step)
	}
	for i, x := range grad.Float32s() {
		s.g[i] = float64(x)
	}
	row, err := measure(s.g, s.tc.Model.Vocab, s.tc.Model.Dim, s.c.Solver)
	if err != nil {
		return fmt.Errorf("oraclestudy: update %d: %w", r.Step, err)
	}
	row.Step, row.Loss, row.LRScale = r.Step, r.Loss, r.LRScale
	s.rows = append(s.rows, row)
	line, _ := json.Marshal(row)
	if _, err := s.out.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("oraclestudy: %w", err)
	}
	if !s.c.Quiet {
		s.c.logf("update %4d loss %.3f: rank %d, Delta_RN/Delta_* %.5f in [%.5f, %.5f], bound %.5f, gap %.1e, %d iterations, %.1f s\n",
			row.Step, row.Loss, row.Rank, row.Ratio, row.RatioLo, row.RatioHi, row.Bound, row.Gap, row.Iterations, row.SolveS)
	}
	return nil
}

// finish writes the CSV, the plot and summary.md after the training run.
func (s *study) finish(sum train.Summary, sh shards) (*Result, error) {
	if err := s.out.Sync(); err != nil {
		return nil, fmt.Errorf("oraclestudy: %w", err)
	}
	if err := writeCSV(filepath.Join(s.c.Out, "oracle.csv"), s.rows); err != nil {
		return nil, err
	}
	if err := plotRatio(filepath.Join(s.c.Out, "ratio.png"), s.rows); err != nil {
		return nil, err
	}
	note := ""
	if s.c.exact() {
		note = s.steps.String()
	}
	res := &Result{Rows: s.rows, Train: sum, MinRatio: math.Inf(1), MaxRatio: math.Inf(-1),
		Bound: oracle.Bound(min(s.tc.Model.Vocab-1, s.tc.Model.Dim)), Summary: filepath.Join(s.c.Out, "summary.md")}
	res.ValTargets, res.ValBytes = sh.valBytes(s.tc.ValTokens, s.tc.SeqLen)
	res.ValNatsPerByte = sum.ValLoss * float64(res.ValTargets) / float64(res.ValBytes)
	md := summaryMarkdown(s.c, s.tc, sh.tokenizer, note, res)
	if err := atomicfile.WriteFile(res.Summary, []byte(md)); err != nil {
		return nil, fmt.Errorf("oraclestudy: %w", err)
	}
	for _, r := range s.rows {
		res.MinRatio, res.MaxRatio = math.Min(res.MinRatio, r.Ratio), math.Max(res.MaxRatio, r.Ratio)
	}
	return res, nil
}

// pairFrac is the distance (of the budget) and the share of the cost at
// which a Row counts the pairs the step uses.
const pairFrac = 0.999

// measure solves T(G) and fills the ratio fields of a row.
func measure(g []float64, v, d int, opt oracle.Options) (Row, error) {
	res, err := oracle.Solve(g, v, d, opt)
	if err != nil {
		return Row{}, err
	}
	mid, lo, hi := res.Ratio()
	pc, err := res.PairCounts(pairFrac)
	if err != nil {
		return Row{}, err
	}
	return Row{
		Rank: res.Rank, RowNormHalf: res.RowNormHalf, TLower: res.Lower, TUpper: res.Upper, Gap: res.Gap,
		Ratio: mid, RatioLo: lo, RatioHi: hi, Bound: oracle.Bound(res.Rank),
		Iterations: res.Iterations, Active: pc.Flow, AtDiameter: pc.Distance, CostPairs: pc.Cost,
		SolveS: res.Elapsed.Seconds(), Converged: res.Converged,
	}, nil
}
