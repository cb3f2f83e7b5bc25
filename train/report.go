package train

import (
	"cmp"
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/hilbert-ml/hilbert/models"
)

// Summary is the outcome of a run: the first and last logged values.
type Summary struct {
	Name         string
	Head         string
	Seed         uint64
	Steps        int
	Tokens       int64
	ElapsedS     float64
	TokensPerS   float64 // mean over logged updates
	FirstLoss    float64 // training loss of the first logged update (NaN if none)
	FinalLoss    float64 // last training loss
	StartValLoss float64 // validation loss of the initial model, update 0 (NaN if none)
	ValLoss      float64 // last validation loss (NaN if none)
	Diameter     float64 // last D(S_t) (NaN if none)
	HeadLR       float64 // the head's scheduled learning rate at that update (NaN if none)
	HilbertRMS   float64 // last Hilbert RMS (NaN if none)
}

// Summarize reduces a run's records to its summary.
func Summarize(cfg Config, hist []Record) Summary {
	nan := math.NaN()
	s := Summary{Name: cfg.Name, Head: cfg.Head, Seed: cfg.Seed, FirstLoss: nan, StartValLoss: nan, ValLoss: nan, Diameter: nan, HeadLR: nan, HilbertRMS: nan}
	var tps float64
	var updates int
	for _, r := range hist {
		s.Steps, s.Tokens, s.ElapsedS = r.Step, r.Tokens, r.ElapsedS
		if r.Step == 0 {
			if r.ValLoss != nil {
				s.StartValLoss = *r.ValLoss
			}
			continue
		}
		if updates == 0 {
			s.FirstLoss = r.Loss
		}
		s.FinalLoss = r.Loss
		tps += r.TokensPerS
		updates++
		if r.ValLoss != nil {
			s.ValLoss = *r.ValLoss
		}
		if r.Diameter != nil {
			s.Diameter = *r.Diameter
			s.HeadLR = nan
			if r.LR != nil {
				s.HeadLR = *r.LR
			}
		}
		if r.HilbertRMS != nil {
			s.HilbertRMS = *r.HilbertRMS
		}
	}
	if updates > 0 {
		s.TokensPerS = tps / float64(updates)
	}
	return s
}

// Summary returns the run's summary so far.
func (t *Trainer) Summary() Summary { return Summarize(t.cfg, t.history) }

// WriteReport writes the run's plots (loss.png, diameter.png,
// hilbert_rms.png) and summary.md into its folder.
func (t *Trainer) WriteReport() error {
	dir := t.Dir()
	head := strings.ToLower(t.cfg.Head)
	c := newRunCurves(t.history, head == "rownorm")
	plots := []struct {
		file, title, y string
		log            bool
		series         []Series
	}{
		{"loss.png", "Cross-entropy", "loss (nats/token)", false, []Series{{Label: "train", XY: c.train}, {Label: "validation", XY: c.val, Points: true}}},
		{"diameter.png", "Head step row diameter D(S_t)", "D(S_t)", true, []Series{{Label: head, XY: c.diam}, {Label: "2 lr_t (RowNorm bound)", XY: c.bound, Dashed: true, Color: boundColor}}},
		{"hilbert_rms.png", "Hilbert RMS of the head step", "Hilbert RMS", true, []Series{{Label: head, XY: c.rms, Points: true}}},
	}
	for _, p := range plots {
		if err := LinePlot(filepath.Join(dir, p.file), p.title, "update", p.y, p.log, p.series); err != nil {
			return err
		}
	}
	return writeFileAtomic(filepath.Join(dir, "summary.md"), []byte(t.summaryMarkdown()))
}

// shortRunTokensPerParam is the paper's horizon: 20 training tokens per
// parameter. A run well short of it gets a caveat in its summary.
const shortRunTokensPerParam = 20

// modelWords names a family's model in a summary's first sentence ("a
// decoder-only ..."); a family not listed is "model".
var modelWords = map[string]string{"paper": "transformer", "gpt2": "transformer (GPT-2)", "llama": "transformer (Llama)"}

// summaryMarkdown explains the run to someone who has not read the paper.
func (t *Trainer) summaryMarkdown() string {
	c := t.cfg
	s := t.Summary()
	params := 0
	for _, p := range t.model.Parameters() {
		params += p.Len()
	}
	headName := map[string]string{"rownorm": "RowNorm (the paper's method)", "adamw": "AdamW (the baseline)"}[strings.ToLower(c.Head)]
	headName = cmp.Or(headName, c.Head)
	if c.Projected {
		headName += ", projected form P RN(P ·)"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Run %s\n\n", c.Name)
	fmt.Fprintf(&b, "A decoder-only %s (%s parameters) trained for %d updates of %d sequences × %d tokens (%s tokens) "+
		"with Muon on its blocks, AdamW on its embedding and %s on its LM head, the layer that turns the last hidden state into next-token logits.\n\n",
		cmp.Or(modelWords[c.FamilyName()], "model"), thousands(int64(params)), s.Steps, c.BatchSeqs, c.SeqLen, thousands(s.Tokens), headName)
	t.writeSettings(&b, headName)
	t.writeResults(&b, s, params)
	writeMeanings(&b, t.model.vocab)
	return b.String()
}

// summaryG formats a summary's number to 4 significant digits, NaN as a dash.
func summaryG(v float64) string {
	if math.IsNaN(v) {
		return "—"
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}

// summaryLoss formats a loss to 4 decimals, NaN as a dash.
func summaryLoss(v float64) string {
	if math.IsNaN(v) {
		return "—"
	}
	return fmt.Sprintf("%.4f", v)
}

// writeSettings writes the summary's settings table.
func (t *Trainer) writeSettings(b *strings.Builder, headName string) {
	c, m := t.cfg, t.cfg.Model
	b.WriteString("## Settings\n\n| setting | value |\n|---|---|\n")
	row := func(k, format string, args ...any) { fmt.Fprintf(b, "| %s | %s |\n", k, fmt.Sprintf(format, args...)) }
	if !c.IsPaper() {
		z := c.Sizes()
		what := fmt.Sprintf("%s (%T)", c.Family, c.Arch)
		if c.Preset != "" {
			what += ", preset " + c.Preset
		}
		if t.model.head == nil {
			what += ", head tied to the embedding"
		} else if c.UntieHead {
			what += ", head untied (a copy of the embedding at initialisation)"
		}
		row("model", "%s: d %d, %d layers, %d heads, vocabulary %d, context %d", what, z.Dim, z.Layers, z.Heads, z.Vocab, z.Context)
	} else if c.Preset != "" && c.Model == mustPreset(c.Preset) {
		row("model", "preset %s: d %d, %d layers, heads of %d, MLP %d, vocabulary %d, context %d", c.Preset, m.Dim, m.Layers, m.HeadDim, m.MLPHidden, m.Vocab, m.Context)
	} else {
		row("model", "d %d, %d layers, heads of %d, MLP %d, vocabulary %d, context %d", m.Dim, m.Layers, m.HeadDim, m.MLPHidden, m.Vocab, m.Context)
	}
	row("head optimizer", "%s", headName)
	row("peak learning rates", "Muon %s, embedding AdamW %s, head %s", summaryG(t.opt.PeakLR("blocks")), summaryG(t.opt.PeakLR("embed")), summaryG(t.opt.PeakLR("head")))
	sched := fmt.Sprintf("linear warmup over %d updates, then cosine decay to 0.1 of the peak at update %d", c.WarmupSteps(), c.ScheduleSteps)
	if c.WarmupSteps() == 0 {
		sched = fmt.Sprintf("no warmup; cosine decay to 0.1 of the peak at update %d", c.ScheduleSteps)
	}
	if c.Steps > c.ScheduleSteps {
		sched += fmt.Sprintf("; updates %d to %d at 0.1 of the peak", c.ScheduleSteps+1, c.Steps)
	}
	row("schedule", "%s", sched)
	row("batch", "%d sequences × %d tokens per update (%s tokens), in micro-batches of %d", c.BatchSeqs, c.SeqLen, thousands(int64(c.BatchSeqs*c.SeqLen)), c.MicroBatch)
	row("gradient clip", "global norm %s", summaryG(c.ClipNorm))
	row("seeds", "model %d, data order %d", c.Seed, c.DataSeed)
	row("training data", "%s", strings.Join(shortPaths(c.TrainShards, 3), ", "))
	row("validation", "the first %s tokens of %s, every %d updates, before the first and after the last", thousands(int64(c.ValTokens)), filepath.Base(c.ValShard), c.ValEvery)
	row("diagnostics", "D(S_t) every %d updates; Hilbert RMS over %d sequences × %d positions at each validation", c.DiagEvery, c.PanelSeqs, c.PanelPositions)
	autocast := "float32 throughout"
	if dt, _ := c.AutocastDType(); dt != 0 {
		autocast = "bf16 autocast of the blocks' matrix products"
	}
	row("device", "%s, %s", t.dev.Name(), autocast)
}

// writeResults writes the start and end values and the caveats of an
// interrupted or short run.
func (t *Trainer) writeResults(b *strings.Builder, s Summary, params int) {
	c := t.cfg
	b.WriteString("\n## Results\n\n| | start | end |\n|---|---|---|\n")
	fmt.Fprintf(b, "| validation loss | %s (initial model) | %s (update %d) |\n", summaryLoss(s.StartValLoss), summaryLoss(s.ValLoss), s.Steps)
	fmt.Fprintf(b, "| training loss | %s (update 1) | %s (update %d) |\n", summaryLoss(s.FirstLoss), summaryLoss(s.FinalLoss), s.Steps)
	boundNote := ""
	if strings.EqualFold(c.Head, "rownorm") && !math.IsNaN(s.HeadLR) {
		boundNote = fmt.Sprintf(" (RowNorm bound 2·lr_T = %s)", summaryG(2*s.HeadLR))
	}
	fmt.Fprintf(b, "| D(S_T) | | %s%s |\n", summaryG(s.Diameter), boundNote)
	fmt.Fprintf(b, "| Hilbert RMS | | %s |\n\n", summaryG(s.HilbertRMS))
	fmt.Fprintf(b, "%.0f tokens/s on average, %.0f s of training.\n\n", s.TokensPerS, s.ElapsedS)

	if t.step < c.Steps {
		fmt.Fprintf(b, "> **Interrupted at update %d of %d.** A checkpoint was written; the same command with `-resume` continues the run. "+
			"The end values above are the last ones logged; the validation loss and D(S_T) come from the last update that computed them.\n\n", t.step, c.Steps)
	}
	if perParam := float64(s.Tokens) / float64(params); perParam < shortRunTokensPerParam {
		fmt.Fprintf(b, "> **A short run.** %s tokens are %.2g tokens per parameter; the paper trains on %d. "+
			"Its losses are far from converged and its geometry is that of an early head, so compare it with runs like it "+
			"(`hilbert compare` trains both heads on the same data) rather than with the paper's tables.\n\n",
			thousands(s.Tokens), perParam, shortRunTokensPerParam)
	}
}

// writeMeanings writes the summary's explanation of its numbers and its
// plots.
func writeMeanings(b *strings.Builder, vocab int) {
	b.WriteString("## What the numbers mean\n\n")
	fmt.Fprintf(b, "- **Loss** is the mean cross-entropy of the next token, in nats per token. A model that guesses uniformly over the %d-token vocabulary scores ln %d = %.2f.\n", vocab, vocab, math.Log(float64(vocab)))
	b.WriteString("- **D(S_T)** is the row diameter of the LM head's last update S_T (one row per vocabulary token): the largest distance ‖s_i − s_j‖ between two rows, computed exactly over all pairs. " +
		"An update S moves the logits at a hidden state h by S h, and the softmax distribution by ‖S h‖_var = max_i (S h)_i − min_i (S h)_i (the Hilbert distance, which ignores shifts that softmax ignores) — at most D(S)·‖h‖. So D bounds how far one update can move any prediction.\n")
	b.WriteString("- **The RowNorm bound**: RowNorm scales every row of the head's update to the length lr_t, so no two rows are more than 2·lr_t apart: D(S_t) ≤ 2·lr_t, where lr_t is the head's scheduled learning rate and lr_T its value at the last update. AdamW's update has no such bound.\n")
	b.WriteString("- **Hilbert RMS** is the typical rather than the worst-case move: the root mean square of ‖S_T h‖_var over a fixed panel of validation positions.\n")
	b.WriteString("- `metrics.jsonl` holds one JSON line per logged update (update 0: the initial model's validation loss only); `checkpoints/` the latest checkpoint.\n\n")
	b.WriteString("![loss](loss.png)\n\n![diameter](diameter.png)\n\n![Hilbert RMS](hilbert_rms.png)\n")
}

func mustPreset(name string) models.Config {
	m, _ := models.Preset(name)
	return m
}

// shortPaths lists at most n paths (then a count of the rest).
func shortPaths(paths []string, n int) []string {
	if len(paths) <= n {
		return paths
	}
	return append(append([]string{}, paths[:n]...), fmt.Sprintf("and %d more", len(paths)-n))
}

// thousands formats n with thin separators: 245,760.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
