// Command horizonplot analyses the horizon study of issue 26: it reads the
// runs that scripts/study/horizon/run.sh made
// (RUNS/hz-d<d>-tpp<x>/<head>-seed<k>/metrics.jsonl and valpieces.tsv),
// pairs the AdamW and RowNorm runs of each width, horizon and seed, and
// writes
//
//   - OUT/horizon.md: per run the final validation loss, D(S_T), the head's
//     lr_T, D(S_T)/(2 lr_T) and Hilbert RMS; per width and horizon the loss
//     cost (RowNorm minus AdamW) with its seed spread and standard error,
//     the AdamW/RowNorm ratios of D(S_T) and Hilbert RMS and their values
//     over training; at 20 tokens per parameter the fit ratio = c d^a
//     beside the paper's Table 3;
//   - OUT/loss_cost.png, OUT/ratio_diameter.png, OUT/ratio_hilbert_rms.png:
//     the loss cost and both ratios against tokens per parameter, one
//     series per width.
//
// The standard errors come from each run's loss on the 64 contiguous
// validation pieces (valpieces.tsv), by batch means stratified by the
// piece's book (DATA/valchunks/sources.tsv): se^2 = sum_f w_f^2 s_f^2 / n_f.
//
// usage: go run ./scripts/study/horizonplot -runs WORKDIR/runs -data WORKDIR/data -out docs/results/horizon
package main

import (
	"bufio"
	"flag"
	"fmt"
	"image/color"
	"log"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/hilbert-ml/hilbert/scripts/study/internal/study"
)

// The paper's Table 3 at 20 tokens per parameter (190M, 380M, 640M on
// FineWeb, mean over 3 seeds): widths, AdamW/RowNorm ratios, loss cost.
var (
	paperD    = []float64{512, 768, 1024}
	paperDiam = []float64{2.870e-2 / 6.369e-4, 2.303e-2 / 4.241e-4, 1.895e-2 / 3.1856e-4}
	paperHRMS = []float64{9.076e-2 / 7.506e-3, 7.732e-2 / 5.667e-3, 7.555e-2 / 4.955e-3}
	paperCost = []float64{3.1741 - 3.1588, 2.9494 - 2.9403, 2.8213 - 2.8156}
)

// The study's model: 2 blocks of 16 d^2 parameters, embedding and head of
// V x d, 2,048 tokens per update.
const (
	vocab          = 1024
	tokensPerStep  = 2048
	longestHorizon = 20.0
)

// params is the model's parameter count at width d.
func params(d int) int { return 32*d*d + 2*vocab*d }

// steps is the schedule length T of a horizon, as run.sh computes it.
func steps(d int, tpp float64) int {
	return int(tpp*float64(params(d))/tokensPerStep + 0.5)
}

// runKey names one run: width, horizon (tokens per parameter), head
// optimizer and seed.
type runKey struct {
	d    int
	tpp  float64
	head string
	seed int
}

// run is one run's final records and its per-piece validation losses.
type run struct {
	study.Run
	pieces []float64 // loss on each validation piece (nil: not measured)
}

// cell is one width and horizon: the paired runs of its seeds.
type cell struct {
	d     int
	tpp   float64
	seeds []int
	a, r  []run // AdamW and RowNorm, by seed
}

// main reads the runs, writes horizon.md and the figures into -out and
// prints horizon.md.
func main() {
	runsDir := flag.String("runs", "runs", "folder holding the hz-d<d>-tpp<x>/<head>-seed<k> runs")
	dataDir := flag.String("data", "data", "the study's data folder (for valchunks/sources.tsv)")
	out := flag.String("out", "docs/results/horizon", "output folder")
	flag.Parse()
	log.SetFlags(0)

	sources, err := readSources(filepath.Join(*dataDir, "valchunks", "sources.tsv"))
	check(err)
	keys, res, err := loadRuns(*runsDir, len(sources))
	check(err)
	order, cells := pairCells(keys, res)
	md := report(keys, res, sources, order, cells)
	check(os.MkdirAll(*out, 0o755))
	check(os.WriteFile(filepath.Join(*out, "horizon.md"), []byte(md), 0o644))
	check(drawFigures(*out, order, cells))
	fmt.Print(md)
}

// loadRuns reads every run under runsDir
// (hz-d<d>-tpp<x>/<head>-seed<k>/metrics.jsonl, and valpieces.tsv beside
// it when there, of n pieces) and returns their keys, ordered by width,
// horizon, head and seed, and the runs by key. A folder that does not match
// the pattern is skipped; none found is an error.
func loadRuns(runsDir string, n int) ([]runKey, map[runKey]run, error) {
	re := regexp.MustCompile(`hz-d(\d+)-tpp([0-9.]+)/(adamw|rownorm)-seed(\d+)/metrics\.jsonl$`)
	paths, _ := filepath.Glob(filepath.Join(runsDir, "hz-d*-tpp*", "*-seed*", "metrics.jsonl"))
	res := map[runKey]run{}
	var keys []runKey
	for _, p := range paths {
		m := re.FindStringSubmatch(filepath.ToSlash(p))
		if m == nil {
			continue
		}
		d, _ := strconv.Atoi(m[1])
		tpp, _ := strconv.ParseFloat(m[2], 64)
		s, _ := strconv.Atoi(m[4])
		f, err := study.ReadRun(p)
		if err != nil {
			return nil, nil, err
		}
		r := run{Run: f}
		r.pieces, err = readPieces(filepath.Join(filepath.Dir(p), "valpieces.tsv"), n)
		if err != nil {
			return nil, nil, err
		}
		k := runKey{d, tpp, m[3], s}
		res[k], keys = r, append(keys, k)
	}
	if len(keys) == 0 {
		return nil, nil, fmt.Errorf("horizonplot: no runs under %s", runsDir)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].less(keys[j]) })
	return keys, res, nil
}

// less orders run keys by width, horizon, head and seed.
func (a runKey) less(b runKey) bool {
	if a.d != b.d {
		return a.d < b.d
	}
	if a.tpp != b.tpp {
		return a.tpp < b.tpp
	}
	if a.head != b.head {
		return a.head < b.head
	}
	return a.seed < b.seed
}

// finished says whether run f reached the end of k's schedule with a
// validation, D(S_T) and Hilbert RMS logged.
func finished(k runKey, f run) bool {
	return f.Step >= steps(k.d, k.tpp) && f.HasVal && f.HasD && f.HasRMS
}

// pairCells gathers the pairs of finished runs (AdamW and RowNorm of one
// seed) into a cell per width and horizon, and returns the cells' ids
// ({d, tokens per parameter}) in the order of keys, and the cells by id.
func pairCells(keys []runKey, res map[runKey]run) ([][2]float64, map[[2]float64]*cell) {
	cells := map[[2]float64]*cell{}
	var order [][2]float64
	for _, k := range keys {
		if k.head != "adamw" {
			continue
		}
		rk := runKey{k.d, k.tpp, "rownorm", k.seed}
		a, r := res[k], res[rk]
		if !finished(k, a) || !finished(rk, r) {
			continue
		}
		id := [2]float64{float64(k.d), k.tpp}
		c := cells[id]
		if c == nil {
			c = &cell{d: k.d, tpp: k.tpp}
			cells[id] = c
			order = append(order, id)
		}
		c.seeds, c.a, c.r = append(c.seeds, k.seed), append(c.a, a), append(c.r, r)
	}
	return order, cells
}

// report is horizon.md: the runs, the cells' loss cost and ratios at the
// final update and over training, the fit at 20 tokens per parameter and
// the figures' links.
func report(keys []runKey, res map[runKey]run, sources []string, order [][2]float64, cells map[[2]float64]*cell) string {
	var md strings.Builder
	md.WriteString("# Horizon study: runs, loss cost and ratios\n\nMade by `go run ./scripts/study/horizonplot -runs RUNS -data DATA -out OUT`: RUNS WORKDIR/runs and DATA WORKDIR/data, WORKDIR being the folder given to scripts/study/horizon/run.sh, or the copies in the repository (`-runs docs/results/horizon/runs -data docs/results/horizon`); OUT docs/results/horizon.\n\n")
	md.WriteString(runTable(keys, res, sources))
	md.WriteString(pieceSizeTable(keys, res, sources))
	md.WriteString(cellTable(order, cells, sources))
	md.WriteString(trainingTable(order, cells))
	md.WriteString(fitTable(order, cells))
	md.WriteString(slopeTable(order, cells))
	md.WriteString("\n![loss cost](loss_cost.png)\n![D ratio](ratio_diameter.png)\n![Hilbert RMS ratio](ratio_hilbert_rms.png)\n")
	return md.String()
}

// runTable is the section of one row per run at its last update (marked
// running when the run has not finished).
func runTable(keys []runKey, res map[runKey]run, sources []string) string {
	var md strings.Builder
	md.WriteString("## Runs (final update)\n\n")
	md.WriteString("| d | tokens/param | head | seed | updates | tokens | val loss | se | D(S_T) | head lr_T | D(S_T) / (2 lr_T) | Hilbert RMS | tokens/s |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, k := range keys {
		f := res[k]
		note := ""
		if !finished(k, f) {
			note = fmt.Sprintf(" of %d (running)", steps(k.d, k.tpp))
		}
		fmt.Fprintf(&md, "| %d | %g | %s | %d | %d%s | %d | %.4f | %s | %.4g | %.4g | %.3f | %.4g | %.0f |\n",
			k.d, k.tpp, k.head, k.seed, f.Step, note, f.Tokens, f.ValLoss, seString(stratifiedSE(f.pieces, sources)),
			f.Diam, f.HeadLR, f.Diam/(2*f.HeadLR), f.HRMS, f.TokensPerS)
	}
	md.WriteString("\nse: the standard error of the run's validation loss as an estimate over text like the held-out text (batch means over the 64 contiguous pieces, stratified by book; - where the pieces were not measured). ")
	md.WriteString("D(S_T) / (2 lr_T): RowNorm's bound is 1. tokens/s: training tokens over training wall time, validations and diagnostics included.\n")
	return md.String()
}

// cellTable is the section of one row per width and horizon at the final
// update: the validation losses, the loss cost and the AdamW/RowNorm
// ratios, per seed and over the seeds.
func cellTable(order [][2]float64, cells map[[2]float64]*cell, sources []string) string {
	var md strings.Builder
	md.WriteString("\n## Loss cost and ratios per width and horizon (final update)\n\n")
	md.WriteString("Per seed, the AdamW and RowNorm runs share initialisation and data order. Loss cost: RowNorm's final validation loss minus AdamW's, per seed and mean ± sd over seeds; ")
	md.WriteString("se(cost): the standard error of one seed's cost from the per-piece differences (same text for both heads; root mean square over seeds). ")
	md.WriteString("Ratios: AdamW/RowNorm of the seed means, ± the sd of the per-seed ratios. RowNorm D/(2 lr_T): 1 on its bound; AdamW D/lr_T: its diameter in units of its own final LR.\n\n")
	md.WriteString("| d | tokens/param | T | seeds | AdamW val loss | RowNorm val loss | loss cost per seed | loss cost | se(cost) | D ratio per seed | D ratio | Hilbert RMS ratio per seed | Hilbert RMS ratio | RowNorm D/(2 lr_T) | AdamW D/lr_T |\n")
	md.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, id := range order {
		md.WriteString(cellRow(cells[id], sources))
	}
	return md.String()
}

// cellRow is cellTable's row of cell c; se(cost) is the root mean square
// over the seeds of the paired standard error, "-" unless every seed's
// pair has its pieces.
func cellRow(c *cell, sources []string) string {
	var al, rl, cost, rD, rH, aD, roD, aH, roH, bound, aUnit, se2 []float64
	for i := range c.seeds {
		a, r := c.a[i], c.r[i]
		al, rl = append(al, a.ValLoss), append(rl, r.ValLoss)
		cost = append(cost, r.ValLoss-a.ValLoss)
		rD, rH = append(rD, a.Diam/r.Diam), append(rH, a.HRMS/r.HRMS)
		aD, roD, aH, roH = append(aD, a.Diam), append(roD, r.Diam), append(aH, a.HRMS), append(roH, r.HRMS)
		bound, aUnit = append(bound, r.Diam/(2*r.HeadLR)), append(aUnit, a.Diam/a.HeadLR)
		if s := pairedSE(a.pieces, r.pieces, sources); !math.IsNaN(s) {
			se2 = append(se2, s*s)
		}
	}
	seCost := math.NaN()
	if len(se2) == len(c.seeds) {
		seCost = math.Sqrt(study.Mean(se2))
	}
	return fmt.Sprintf("| %d | %g | %d | %s | %.4f | %.4f | %s | %+.4f%s | %s | %s | %.2f%s | %s | %.2f%s | %.3f | %.3f |\n",
		c.d, c.tpp, steps(c.d, c.tpp), study.Ints(c.seeds), study.Mean(al), study.Mean(rl),
		signed(cost, 4), study.Mean(cost), study.PM(cost, 4), seString(seCost),
		study.Floats(rD, 2), study.Mean(aD)/study.Mean(roD), study.PM(rD, 2),
		study.Floats(rH, 2), study.Mean(aH)/study.Mean(roH), study.PM(rH, 2),
		study.Mean(bound), study.Mean(aUnit))
}

// trainingTable is the section of the ratios and the loss cost over
// training: at a quarter, half, three quarters and the end of each
// schedule (see atFraction).
func trainingTable(order [][2]float64, cells map[[2]float64]*cell) string {
	var md strings.Builder
	md.WriteString("\n## Over training\n\nD ratio: AdamW/RowNorm ratio of the mean D(S_t) over each quarter of the schedule (8 diagnostics a run in each quarter; one update's D(S_t) is noisy). ")
	md.WriteString("Hilbert RMS ratio (of the seed means) and loss cost (mean over seeds): at the validations, which the 20-tokens/param runs have at T/4, T/2, 3T/4 and T and the others only at T.\n\n")
	md.WriteString("| d | tokens/param | D ratio in (0, T/4] | (T/4, T/2] | (T/2, 3T/4] | (3T/4, T] | Hilbert RMS ratio at T/4 | T/2 | 3T/4 | T | loss cost at T/4 | T/2 | 3T/4 | T |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, id := range order {
		c := cells[id]
		T := steps(c.d, c.tpp)
		fmt.Fprintf(&md, "| %d | %g |", c.d, c.tpp)
		for _, what := range []string{"D", "H", "cost"} {
			for _, frac := range []float64{0.25, 0.5, 0.75, 1} {
				fmt.Fprintf(&md, " %s |", atFraction(c, T, frac, what))
			}
		}
		md.WriteString("\n")
	}
	return md.String()
}

// fitTable is the section of the fit ratio = c d^a at 20 tokens per
// parameter, this study's beside the paper's Table 3.
func fitTable(order [][2]float64, cells map[[2]float64]*cell) string {
	var xs, yD, yH []float64
	for _, id := range order {
		if c := cells[id]; c.tpp == longestHorizon {
			rD, rH := c.ratios()
			xs, yD, yH = append(xs, float64(c.d)), append(yD, rD), append(yH, rH)
		}
	}
	var md strings.Builder
	md.WriteString("\n## At 20 tokens per parameter: ratio = c d^a, beside the paper's Table 3\n\n")
	fmt.Fprintf(&md, "Paper (Table 3, d 512 / 768 / 1024): D ratio %s, Hilbert RMS ratio %s, loss cost %s.\n\n",
		slash(paperDiam, 1), slash(paperHRMS, 1), slash(paperCost, 4))
	md.WriteString("| diagnostic | data | widths | ratios | c | a | se(a) |\n|---|---|---|---|---|---|---|\n")
	md.WriteString(fitRow("D(S_T)", "this study (CPU, V 1024)", xs, yD))
	md.WriteString(fitRow("D(S_T)", "paper", paperD, paperDiam))
	md.WriteString(fitRow("Hilbert RMS", "this study (CPU, V 1024)", xs, yH))
	md.WriteString(fitRow("Hilbert RMS", "paper", paperD, paperHRMS))
	md.WriteString("\nse(a): from the fit's residuals (none with two widths, where the line passes through both points).\n")
	return md.String()
}

// fitRow is fitTable's row of the ratios y at widths x: the fit's c, a and
// se(a) ("-" for all three below two widths, for se(a) at two).
func fitRow(name, data string, x, y []float64) string {
	w := make([]int, len(x))
	for i := range x {
		w[i] = int(x[i])
	}
	if len(x) < 2 {
		return fmt.Sprintf("| %s | %s | %s | %s | - | - | - |\n", name, data, study.Ints(w), slash(y, 2))
	}
	c, a, se := study.Fit(x, y)
	ses := "-"
	if len(x) > 2 {
		ses = fmt.Sprintf("%.3f", se)
	}
	return fmt.Sprintf("| %s | %s | %s | %s | %.4g | %.3f | %s |\n", name, data, study.Ints(w), slash(y, 2), c, a, ses)
}

// series is one width's points in a figure: per seed and of the seed
// means, against tokens per parameter.
type series struct {
	d            int
	seeds, means plotter.XYs
}

// drawFigures draws the three figures into the folder out: the loss cost,
// the D(S_T) ratio and the Hilbert RMS ratio, one series per width.
func drawFigures(out string, order [][2]float64, cells map[[2]float64]*cell) error {
	if err := drawFigure(filepath.Join(out, "loss_cost.png"), "RowNorm's loss cost: final val loss(RowNorm) - val loss(AdamW)", "loss cost (nats)",
		collect(order, cells, func(f run) float64 { return f.ValLoss }, true), paperCost, false, false); err != nil {
		return err
	}
	if err := drawFigure(filepath.Join(out, "ratio_diameter.png"), "AdamW/RowNorm ratio of the head step diameter D(S_T)", "D(S_T) ratio (AdamW / RowNorm)",
		collect(order, cells, func(f run) float64 { return f.Diam }, false), paperDiam, true, true); err != nil {
		return err
	}
	return drawFigure(filepath.Join(out, "ratio_hilbert_rms.png"), "AdamW/RowNorm ratio of the head step's Hilbert RMS", "Hilbert RMS ratio (AdamW / RowNorm)",
		collect(order, cells, func(f run) float64 { return f.HRMS }, false), paperHRMS, true, true)
}

// widths are the cells' widths in the order of their first cell.
func widths(order [][2]float64) []int {
	var out []int
	seen := map[int]bool{}
	for _, id := range order {
		if d := int(id[0]); !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	return out
}

// collect gives, per width, q's AdamW/RowNorm ratio (per seed, and of
// the seed means) or, when cost, RowNorm's q minus AdamW's.
func collect(order [][2]float64, cells map[[2]float64]*cell, q func(run) float64, cost bool) []series {
	var out []series
	for _, d := range widths(order) {
		s := series{d: d}
		for _, id := range order {
			c := cells[id]
			if c.d != d {
				continue
			}
			var qa, qr []float64
			for i := range c.seeds {
				a, r := q(c.a[i]), q(c.r[i])
				qa, qr = append(qa, a), append(qr, r)
				v := a / r
				if cost {
					v = r - a
				}
				s.seeds = append(s.seeds, plotter.XY{X: c.tpp, Y: v})
			}
			m := study.Mean(qa) / study.Mean(qr)
			if cost {
				m = study.Mean(qr) - study.Mean(qa)
			}
			s.means = append(s.means, plotter.XY{X: c.tpp, Y: m})
		}
		out = append(out, s)
	}
	return out
}

// drawFigure draws the series ss and the paper's values (at 20 tokens per
// parameter) against tokens per parameter on a log axis, with a log y axis
// when logY and the legend top left when legendLeft, and saves it at path.
func drawFigure(path, title, yLabel string, ss []series, paper []float64, logY, legendLeft bool) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "tokens per parameter (each horizon its own schedule)"
	p.Y.Label.Text = yLabel
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = study.FixedTicks{0.5, 1, 2, 5, 10, 20}
	p.X.Min, p.X.Max = 0.4, 25
	if logY {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = study.FixedTicks{1, 2, 3, 5, 7, 10, 15, 20, 30, 50, 70, 100}
	}
	p.Add(plotter.NewGrid())
	p.Legend.Top, p.Legend.Left = true, legendLeft
	p.Y.Min, p.Y.Max = yRange(ss, paper, logY)
	palette := [][2]color.Color{{study.Blue, study.Faint}, {orange, orangeFaint}, {green, greenFaint}}
	for i, s := range ss {
		col := palette[i%len(palette)]
		if err := study.AddLine(p, s.means, col[0], false, ""); err != nil {
			return err
		}
		if err := study.AddPoints(p, s.seeds, col[1], 2.5, draw.CircleGlyph{}, fmt.Sprintf("d %d, per seed", s.d)); err != nil {
			return err
		}
		if err := study.AddPoints(p, s.means, col[0], 4.5, draw.BoxGlyph{}, fmt.Sprintf("d %d (%d params), mean over seeds", s.d, params(s.d))); err != nil {
			return err
		}
	}
	if err := study.AddPoints(p, paperPoints(paper), study.Red, 4.5, draw.TriangleGlyph{}, "paper, d 512 / 768 / 1024 (190M-640M, V 50257), at 20"); err != nil {
		return err
	}
	return p.Save(8*vg.Inch, 5*vg.Inch, path)
}

// paperPoints places the paper's values at 20 tokens per parameter, 8%
// apart along the axis so that its three widths do not overlap.
func paperPoints(paper []float64) plotter.XYs {
	var pp plotter.XYs
	for i, v := range paper {
		pp = append(pp, plotter.XY{X: longestHorizon * math.Pow(1.08, float64(i-1)), Y: v})
	}
	return pp
}

// yRange is a figure's y axis range: every point of ss and of paper with a
// margin (a factor on a log axis; on a linear one, from 0 or below and a
// quarter of the span above).
func yRange(ss []series, paper []float64, logY bool) (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, s := range ss {
		for _, v := range append(append(plotter.XYs{}, s.seeds...), s.means...) {
			lo, hi = math.Min(lo, v.Y), math.Max(hi, v.Y)
		}
	}
	for _, v := range paper {
		lo, hi = math.Min(lo, v), math.Max(hi, v)
	}
	if logY {
		return lo / 1.5, hi * 1.8
	}
	return math.Min(0, lo-0.01), hi + 0.25*(hi-math.Min(0, lo))
}

// ratios are the cell's AdamW/RowNorm ratios of the seed means of D(S_T)
// and of the Hilbert RMS at the final update.
func (c *cell) ratios() (diam, hrms float64) {
	var aD, rD, aH, rH []float64
	for i := range c.seeds {
		aD, rD = append(aD, c.a[i].Diam), append(rD, c.r[i].Diam)
		aH, rH = append(aH, c.a[i].HRMS), append(rH, c.r[i].HRMS)
	}
	return study.Mean(aD) / study.Mean(rD), study.Mean(aH) / study.Mean(rH)
}

// slopeTable is the exponent a of ratio = c d^a at every horizon that has
// finished pairs at two widths or more (the ratios of the seed means, as at
// 20 tokens per parameter); "" when no horizon has.
func slopeTable(order [][2]float64, cells map[[2]float64]*cell) string {
	var horizons []float64
	byTPP := map[float64][]*cell{}
	for _, id := range order {
		c := cells[id]
		if byTPP[c.tpp] == nil {
			horizons = append(horizons, c.tpp)
		}
		byTPP[c.tpp] = append(byTPP[c.tpp], c)
	}
	sort.Float64s(horizons)
	var b strings.Builder
	for _, tpp := range horizons {
		cs := byTPP[tpp]
		if len(cs) < 2 {
			continue
		}
		if b.Len() == 0 {
			b.WriteString("\nThe exponent a of the same fit at every horizon with two widths or more (ratios of the seed means):\n\n")
			b.WriteString("| tokens/param | widths | D ratio | a (D) | Hilbert RMS ratio | a (Hilbert RMS) |\n|---|---|---|---|---|---|\n")
		}
		var x, yD, yH []float64
		var w []int
		for _, c := range cs {
			rD, rH := c.ratios()
			x, yD, yH, w = append(x, float64(c.d)), append(yD, rD), append(yH, rH), append(w, c.d)
		}
		_, aD, _ := study.Fit(x, yD)
		_, aH, _ := study.Fit(x, yH)
		fmt.Fprintf(&b, "| %g | %s | %s | %.2f | %s | %.2f |\n", tpp, study.Ints(w), slash(yD, 2), aD, slash(yH, 2), aH)
	}
	return b.String()
}

// Colours of the second and third widths' series.
var (
	orange, orangeFaint = color.RGBA{255, 127, 14, 255}, color.NRGBA{255, 127, 14, 120}
	green, greenFaint   = color.RGBA{44, 160, 44, 255}, color.NRGBA{44, 160, 44, 120}
)

// atFraction formats, for the quarter of the schedule ending at frac T,
// the AdamW/RowNorm ratio of D(S_t) (what "D": means over the seeds and
// every diagnostic in the quarter, as D(S_t) of one update is noisy) or,
// at the first validation at or after frac T (within T/8), the ratio of
// the seed means of the Hilbert RMS ("H") or the mean loss cost ("cost");
// "-" when nothing was logged there.
func atFraction(c *cell, T int, frac float64, what string) string {
	from := int(math.Ceil(frac * float64(T)))
	if what == "D" {
		lo := int(math.Ceil((frac - 0.25) * float64(T)))
		var a, r []float64
		for i := range c.seeds {
			for t, v := range c.a[i].DiamAt {
				if w, ok := c.r[i].DiamAt[t]; ok && t > lo && t <= from && t > 0 {
					a, r = append(a, v), append(r, w)
				}
			}
		}
		if len(a) == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f", study.Mean(a)/study.Mean(r))
	}
	pick := func(f run) map[int]float64 {
		if what == "H" {
			return f.HRMSAt
		}
		return f.ValAt
	}
	best := -1
	for t := range pick(c.a[0]) {
		if t < from || t > from+T/8 || (best >= 0 && t >= best) {
			continue
		}
		ok := true
		for i := range c.seeds {
			if _, has := pick(c.a[i])[t]; !has {
				ok = false
			}
			if _, has := pick(c.r[i])[t]; !has {
				ok = false
			}
		}
		if ok {
			best = t
		}
	}
	if best < 0 {
		return "-"
	}
	var a, r []float64
	for i := range c.seeds {
		a, r = append(a, pick(c.a[i])[best]), append(r, pick(c.r[i])[best])
	}
	if what == "cost" {
		return fmt.Sprintf("%+.3f", study.Mean(r)-study.Mean(a))
	}
	return fmt.Sprintf("%.2f", study.Mean(a)/study.Mean(r))
}

// readSources reads valchunks/sources.tsv: the book of each piece.
func readSources(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Split(sc.Text(), "\t")
		if len(fields) != 2 || fields[0] == "piece" {
			continue
		}
		i, err := strconv.Atoi(fields[0])
		if err != nil || i != len(out) {
			return nil, fmt.Errorf("%s: line %q: want piece %d", path, sc.Text(), len(out))
		}
		out = append(out, fields[1])
	}
	return out, sc.Err()
}

// readPieces reads a run's valpieces.tsv (nil, nil when there is none).
func readPieces(path string, n int) ([]float64, error) {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := make([]float64, n)
	got := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Split(sc.Text(), "\t")
		if len(fields) != 2 || fields[0] == "piece" {
			continue
		}
		i, err1 := strconv.Atoi(fields[0])
		v, err2 := strconv.ParseFloat(fields[1], 64)
		if err1 != nil || err2 != nil || i < 0 || i >= n {
			return nil, fmt.Errorf("%s: line %q: want a piece below %d and its loss", path, sc.Text(), n)
		}
		out[i] = v
		got++
	}
	if got != n {
		return nil, fmt.Errorf("%s: %d pieces, want %d", path, got, n)
	}
	return out, sc.Err()
}

// stratifiedSE is the standard error of the mean of v (one value per
// piece, equal-sized pieces) with the pieces stratified by source:
// se^2 = sum_f w_f^2 s_f^2 / n_f, w_f = n_f / n. NaN when v is nil.
func stratifiedSE(v []float64, source []string) float64 {
	if v == nil {
		return math.NaN()
	}
	by := map[string][]float64{}
	for i, x := range v {
		by[source[i]] = append(by[source[i]], x)
	}
	var se2 float64
	n := float64(len(v))
	for _, xs := range by {
		w := float64(len(xs)) / n
		s := study.SD(xs)
		se2 += w * w * s * s / float64(len(xs))
	}
	return math.Sqrt(se2)
}

// pieceSizeTable is the batch-means check of the standard errors: the
// per-run se and the paired se of the loss cost (over the finished pairs)
// with the pieces taken one, two and four at a time (groups of
// consecutive pieces within one book). Batch means is sound once the pieces are longer than the
// correlation of the losses along the text; an se that stays put as the
// pieces grow says they are.
func pieceSizeTable(keys []runKey, res map[runKey]run, sources []string) string {
	var b strings.Builder
	b.WriteString("\nThe standard errors by piece length (batch means: they should not grow once the pieces are longer than the correlation along the text); range over the runs and over the AdamW/RowNorm pairs with pieces:\n\n")
	b.WriteString("| pieces | tokens a piece | per-run se | paired se of the loss cost |\n|---|---|---|---|\n")
	for _, k := range []int{1, 2, 4} {
		var one, paired []float64
		var n int
		for _, key := range keys {
			f := res[key]
			if f.pieces == nil || !finished(key, f) {
				continue
			}
			v, src := groupPieces(f.pieces, sources, k)
			n = len(v)
			one = append(one, stratifiedSE(v, src))
			if key.head != "adamw" {
				continue
			}
			rk := runKey{key.d, key.tpp, "rownorm", key.seed}
			if r, ok := res[rk]; ok && r.pieces != nil && finished(rk, r) {
				rv, _ := groupPieces(r.pieces, sources, k)
				paired = append(paired, pairedSE(v, rv, src))
			}
		}
		if len(one) == 0 {
			return ""
		}
		fmt.Fprintf(&b, "| %d | %d | %s | %s |\n", n, k*pieceTokens, rangeOf(one), rangeOf(paired))
	}
	return b.String()
}

// pieceTokens is the length of one validation piece (horizondata's 64
// pieces of 89 sequences of 128 tokens).
const pieceTokens = 89 * 128

// groupPieces averages v over groups of k consecutive pieces within each
// run of pieces from one book (a book's last pieces, fewer than k, are
// left out) and returns the group means and their books.
func groupPieces(v []float64, source []string, k int) ([]float64, []string) {
	var out []float64
	var src []string
	for lo := 0; lo < len(v); {
		hi := lo
		for hi < len(v) && source[hi] == source[lo] {
			hi++
		}
		for i := lo; i+k <= hi; i += k {
			out, src = append(out, study.Mean(v[i:i+k])), append(src, source[i])
		}
		lo = hi
	}
	return out, src
}

// rangeOf formats the smallest and largest of v to 4 decimals.
func rangeOf(v []float64) string {
	if len(v) == 0 {
		return "-"
	}
	lo, hi := v[0], v[0]
	for _, x := range v {
		lo, hi = math.Min(lo, x), math.Max(hi, x)
	}
	return fmt.Sprintf("%.4f-%.4f", lo, hi)
}

// pairedSE is the stratified standard error of the mean per-piece
// difference r - a.
func pairedSE(a, r []float64, source []string) float64 {
	if a == nil || r == nil {
		return math.NaN()
	}
	d := make([]float64, len(a))
	for i := range a {
		d[i] = r[i] - a[i]
	}
	return stratifiedSE(d, source)
}

// seString formats a standard error to 4 decimals, "-" for NaN (no pieces).
func seString(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return fmt.Sprintf("%.4f", v)
}

// signed formats v with a sign and prec decimals, comma-separated.
func signed(v []float64, prec int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprintf("%+.*f", prec, x)
	}
	return strings.Join(s, ", ")
}

// slash formats v with prec decimals, separated by " / ".
func slash(v []float64, prec int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.FormatFloat(x, 'f', prec, 64)
	}
	return strings.Join(s, " / ")
}

// check ends the command with err unless it is nil.
func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
