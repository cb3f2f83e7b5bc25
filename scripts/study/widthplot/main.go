// Command widthplot analyses the width study of issue 16 (part 2): it reads
// the runs that scripts/study/width/run.sh made (RUNS/width-d<d>/<head>-seed<k>/
// metrics.jsonl), pairs the AdamW and RowNorm runs of each width and seed,
// and writes
//
//   - OUT/width.md: per run the final validation loss, D(S_T) and Hilbert
//     RMS; per width the AdamW/RowNorm ratios (per seed and of the seed
//     means) and RowNorm's loss cost; the least-squares fits
//     log ratio = log c + a log d for both diagnostics, ours and the paper's;
//   - OUT/ratio_diameter.png, OUT/ratio_hilbert_rms.png: the ratios against
//     d on log-log axes, with the fit and the paper's three points and fit;
//   - OUT/loss_cost.png: RowNorm's loss cost against d.
//
// usage: go run ./scripts/study/widthplot -runs WORKDIR/runs -out docs/results/width
package main

import (
	"cmp"
	"flag"
	"fmt"
	"log"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"gonum.org/v1/plot/plotter"

	"github.com/hilbert-ml/hilbert/internal/atomicfile"
	shared "github.com/hilbert-ml/hilbert/scripts/study/internal/study"
)

// The paper's AdamW/RowNorm ratios (190M, 380M, 640M on FineWeb).
var (
	paperD    = []float64{512, 768, 1024}
	paperDiam = []float64{45.1, 54.3, 59.5}
	paperHRMS = []float64{12.1, 13.6, 15.2}
)

type runKey struct {
	d    int
	head string
	seed int
}

// width is one width's AdamW/RowNorm pairs (same seed, same data order).
type width struct {
	d                              int
	seeds                          []int
	rD, rH, cost                   []float64 // per seed
	meanRD, meanRH, meanCost       float64   // ratio of seed means; mean cost
	adamwLoss, rownormLoss         []float64
	adamwD, rownormD, adamwH, rowH []float64
}

// fitRes is a fit ratio = c d^a with the slope's standard error.
type fitRes struct{ c, a, se float64 }

// study is the runs read and what width.md says of them.
type study struct {
	out        string
	steps      int // updates a finished run has
	res        map[runKey]shared.Run
	keys       []runKey // sorted by width, head, seed
	byD        map[int]*width
	ds         []int     // widths with a finished pair, ascending
	xs, yD, yH []float64 // per width: d, D ratio, Hilbert RMS ratio
	fits       map[string]fitRes
	md         strings.Builder
}

func main() {
	runs := flag.String("runs", "/tmp/ws/runs", "folder holding width-d<d>/<head>-seed<k> runs")
	out := flag.String("out", "docs/results/width", "output folder")
	steps := flag.Int("steps", 200, "updates a finished run has; shorter runs are listed as partial and left out of the ratios")
	flag.Parse()
	log.SetFlags(0)

	s, err := loadRuns(*runs)
	shared.Check(err)
	s.out, s.steps = *out, *steps
	s.writeRuns()
	s.pairWidths()
	s.writeRatios()
	s.writeFits()
	s.md.WriteString("\n## Over training\n")
	s.overTraining("D(S_t)", func(f shared.Run) map[int]float64 { return f.DiamAt }, false)
	s.overTraining("Hilbert RMS", func(f shared.Run) map[int]float64 { return f.HRMSAt }, false)
	s.overTraining("Validation loss cost", func(f shared.Run) map[int]float64 { return f.ValAt }, true)
	s.md.WriteString("\n![D ratio](ratio_diameter.png)\n![Hilbert RMS ratio](ratio_hilbert_rms.png)\n![loss cost](loss_cost.png)\n")

	shared.Check(os.MkdirAll(*out, 0o755))
	shared.Check(atomicfile.WriteFile(filepath.Join(*out, "width.md"), []byte(s.md.String())))
	s.plots()
	fmt.Print(s.md.String())
}

// loadRuns reads every run's metrics.jsonl under runs.
func loadRuns(runs string) (*study, error) {
	re := regexp.MustCompile(`width-d(\d+)/(adamw|rownorm)-seed(\d+)/metrics\.jsonl$`)
	paths, _ := filepath.Glob(filepath.Join(runs, "width-d*", "*-seed*", "metrics.jsonl"))
	s := &study{res: map[runKey]shared.Run{}, byD: map[int]*width{}, fits: map[string]fitRes{}}
	for _, p := range paths {
		m := re.FindStringSubmatch(filepath.ToSlash(p))
		if m == nil {
			continue
		}
		d, _ := strconv.Atoi(m[1])
		seed, _ := strconv.Atoi(m[3])
		f, err := shared.ReadRun(p)
		if err != nil {
			return nil, err
		}
		k := runKey{d, m[2], seed}
		s.res[k], s.keys = f, append(s.keys, k)
	}
	if len(s.keys) == 0 {
		return nil, fmt.Errorf("widthplot: no runs under %s", runs)
	}
	slices.SortFunc(s.keys, func(a, b runKey) int {
		return cmp.Or(cmp.Compare(a.d, b.d), strings.Compare(a.head, b.head), cmp.Compare(a.seed, b.seed))
	})
	return s, nil
}

// done reports whether a run finished with every diagnostic logged.
func (s *study) done(f shared.Run) bool { return f.Step >= s.steps && f.HasVal && f.HasD && f.HasRMS }

// writeRuns writes the header and the table of every run's final update.
func (s *study) writeRuns() {
	md := &s.md
	fmt.Fprintf(md, "# Width study: runs and ratios\n\nMade by `go run ./scripts/study/widthplot -runs WORKDIR/runs -out %s -steps %d`, WORKDIR being the folder given to scripts/study/width/run.sh.\n\n", s.out, s.steps)
	md.WriteString("## Runs (final update)\n\n| d | head | seed | updates | tokens | val loss | D(S_T) | head lr_T | D(S_T) / (lr_T sqrt d) | Hilbert RMS | tokens/s (with val, diag) |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, k := range s.keys {
		f := s.res[k]
		note := ""
		if !s.done(f) {
			note = " (partial)"
		}
		fmt.Fprintf(md, "| %d | %s | %d | %d%s | %d | %.4f | %.4g | %.4g | %.3f | %.4g | %.0f |\n", k.d, k.head, k.seed, f.Step, note, f.Tokens, f.ValLoss, f.Diam, f.HeadLR, f.Diam/(f.HeadLR*math.Sqrt(float64(k.d))), f.HRMS, f.TokensPerS)
	}
	md.WriteString("\nD(S_T) / (lr_T sqrt d): the final diameter in units of the head's final scheduled LR times sqrt(d). RowNorm's bound D <= 2 lr_T gives 2/sqrt(d). ")
	md.WriteString("With RowNorm on its bound the AdamW/RowNorm diameter ratio is (AdamW's value) x (lr ratio 4/3.2) x sqrt(d) / 2, so it grows exactly as sqrt(d) when AdamW's value does not change with d.\n")
}

// pairWidths pairs each finished AdamW run with the RowNorm run of the
// same width and seed.
func (s *study) pairWidths() {
	for _, k := range s.keys {
		if k.head != "adamw" {
			continue
		}
		a, r := s.res[k], s.res[runKey{k.d, "rownorm", k.seed}]
		if !s.done(a) || !s.done(r) {
			continue
		}
		w := s.byD[k.d]
		if w == nil {
			w = &width{d: k.d}
			s.byD[k.d] = w
			s.ds = append(s.ds, k.d)
		}
		w.seeds = append(w.seeds, k.seed)
		w.rD = append(w.rD, a.Diam/r.Diam)
		w.rH = append(w.rH, a.HRMS/r.HRMS)
		w.cost = append(w.cost, r.ValLoss-a.ValLoss)
		w.adamwLoss, w.rownormLoss = append(w.adamwLoss, a.ValLoss), append(w.rownormLoss, r.ValLoss)
		w.adamwD, w.rownormD = append(w.adamwD, a.Diam), append(w.rownormD, r.Diam)
		w.adamwH, w.rowH = append(w.adamwH, a.HRMS), append(w.rowH, r.HRMS)
	}
	sort.Ints(s.ds)
}

// writeRatios writes the per-width ratio table and keeps the ratios of
// seed means for the fits.
func (s *study) writeRatios() {
	md := &s.md
	md.WriteString("\n## AdamW/RowNorm ratios per width\n\nPer seed: the ratio of the AdamW and RowNorm runs of that seed (same initialisation, same data order). ")
	md.WriteString("Ratio: of the seed means (as `hilbert compare` reports it); ± is the sample standard deviation of the per-seed ratios (n = 1: none). ")
	md.WriteString("Loss cost: RowNorm's final validation loss minus AdamW's, mean ± sd over seeds.\n\n")
	md.WriteString("| d | seeds | D ratio per seed | D ratio | Hilbert RMS ratio per seed | Hilbert RMS ratio | AdamW val loss | RowNorm val loss | loss cost (nats) |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, d := range s.ds {
		w := s.byD[d]
		w.meanRD = shared.Mean(w.adamwD) / shared.Mean(w.rownormD)
		w.meanRH = shared.Mean(w.adamwH) / shared.Mean(w.rowH)
		w.meanCost = shared.Mean(w.cost)
		fmt.Fprintf(md, "| %d | %s | %s | %.2f%s | %s | %.2f%s | %.4f | %.4f | %+.4f%s |\n", d, shared.Ints(w.seeds),
			shared.Floats(w.rD, 2), w.meanRD, shared.PM(w.rD, 2), shared.Floats(w.rH, 2), w.meanRH, shared.PM(w.rH, 2),
			shared.Mean(w.adamwLoss), shared.Mean(w.rownormLoss), w.meanCost, shared.PM(w.cost, 4))
		s.xs, s.yD, s.yH = append(s.xs, float64(d)), append(s.yD, w.meanRD), append(s.yH, w.meanRH)
	}
}

// writeFits writes the power-law fits, ours and the paper's, and the
// extrapolation of ours to the paper's widths.
func (s *study) writeFits() {
	md := &s.md
	md.WriteString("\n## Fits: ratio = c d^a (least squares on log ratio against log d, one point per width)\n\n| diagnostic | data | widths | c | a | se(a) |\n|---|---|---|---|---|---|\n")
	s.addFit("D(S_T)", "this study (CPU)", s.xs, s.yD)
	s.addFit("D(S_T)", "paper", paperD, paperDiam)
	s.addFit("Hilbert RMS", "this study (CPU)", s.xs, s.yH)
	s.addFit("Hilbert RMS", "paper", paperD, paperHRMS)
	md.WriteString("\nse(a): the slope's standard error from the fit's residuals (n - 2 degrees of freedom; none with two widths).\n")
	if f, ok := s.fits["D(S_T)/this study (CPU)"]; ok {
		fmt.Fprintf(md, "\nExtrapolated to the paper's widths, the CPU diameter fit gives %.1f, %.1f, %.1f at d = 512, 768, 1024 (paper: 45.1, 54.3, 59.5).\n",
			f.c*math.Pow(512, f.a), f.c*math.Pow(768, f.a), f.c*math.Pow(1024, f.a))
	}
	if f, ok := s.fits["Hilbert RMS/this study (CPU)"]; ok {
		fmt.Fprintf(md, "The CPU Hilbert-RMS fit gives %.1f, %.1f, %.1f (paper: 12.1, 13.6, 15.2).\n",
			f.c*math.Pow(512, f.a), f.c*math.Pow(768, f.a), f.c*math.Pow(1024, f.a))
	}
}

// addFit fits ratio = c d^a to one series and writes its row.
func (s *study) addFit(name, data string, x, y []float64) {
	if len(x) < 2 {
		fmt.Fprintf(&s.md, "| %s | %s | %s | - | - | - |\n", name, data, shared.Ints(toInts(x)))
		return
	}
	c, a, se := shared.Fit(x, y)
	s.fits[name+"/"+data] = fitRes{c, a, se}
	ses := "-"
	if len(x) > 2 {
		ses = fmt.Sprintf("%.3f", se)
	}
	fmt.Fprintf(&s.md, "| %s | %s | %s | %.4g | %.3f | %s |\n", name, data, shared.Ints(toInts(x)), c, a, ses)
}

// commonSteps returns the updates after 0 at which every paired run
// logged the value at gives, ascending.
func (s *study) commonSteps(at func(f shared.Run) map[int]float64) []int {
	var steps []int
	for t := range at(s.res[s.keys[0]]) {
		if t == 0 {
			continue
		}
		all := true
		for _, d := range s.ds {
			for _, sd := range s.byD[d].seeds {
				for _, h := range []string{"adamw", "rownorm"} {
					if _, ok := at(s.res[runKey{d, h, sd}])[t]; !ok {
						all = false
					}
				}
			}
		}
		if all {
			steps = append(steps, t)
		}
	}
	sort.Ints(steps)
	return steps
}

// overTraining writes the ratios (or, with cost, the loss differences) at
// every update where all paired runs logged them: is the final update's
// exponent a property of the end of the schedule or of the whole run?
func (s *study) overTraining(name string, at func(f shared.Run) map[int]float64, cost bool) {
	steps := s.commonSteps(at)
	if len(steps) == 0 {
		return
	}
	md := &s.md
	what := "AdamW/RowNorm ratio of seed means"
	if cost {
		what = "RowNorm minus AdamW, mean over seeds"
	}
	fmt.Fprintf(md, "\n%s over training (%s):\n\n| update |", name, what)
	for _, d := range s.ds {
		fmt.Fprintf(md, " d %d |", d)
	}
	if !cost {
		md.WriteString(" fitted a |")
	}
	md.WriteString("\n|---|" + strings.Repeat("---|", len(s.ds)))
	if !cost {
		md.WriteString("---|")
	}
	md.WriteString("\n")
	for _, t := range steps {
		fmt.Fprintf(md, "| %d |", t)
		var x, y []float64
		for _, d := range s.ds {
			var a, r []float64
			for _, sd := range s.byD[d].seeds {
				a = append(a, at(s.res[runKey{d, "adamw", sd}])[t])
				r = append(r, at(s.res[runKey{d, "rownorm", sd}])[t])
			}
			v := shared.Mean(a) / shared.Mean(r)
			if cost {
				v = shared.Mean(r) - shared.Mean(a)
			}
			fmt.Fprintf(md, " %.4g |", v)
			x, y = append(x, float64(d)), append(y, v)
		}
		switch {
		case cost:
		case len(x) >= 2:
			_, a, _ := shared.Fit(x, y)
			fmt.Fprintf(md, " %.3f |", a)
		default:
			md.WriteString(" - |")
		}
		md.WriteString("\n")
	}
}

// plots draws the two ratio plots and the loss-cost plot.
func (s *study) plots() {
	perSeed := func(get func(w *width) []float64) plotter.XYs {
		var xy plotter.XYs
		for _, d := range s.ds {
			for _, v := range get(s.byD[d]) {
				xy = append(xy, plotter.XY{X: float64(d), Y: v})
			}
		}
		return xy
	}
	shared.Check(ratioPlot(filepath.Join(s.out, "ratio_diameter.png"), "AdamW/RowNorm ratio of the head step diameter D(S_T)", "D(S_T) ratio",
		perSeed(func(w *width) []float64 { return w.rD }), shared.XY(s.xs, s.yD), s.fitLine("D(S_T)/this study (CPU)"),
		shared.XY(paperD, paperDiam), s.fitLine("D(S_T)/paper"),
		s.fitLabel("D(S_T)/this study (CPU)", "CPU fit"), s.fitLabel("D(S_T)/paper", "paper fit")))
	shared.Check(ratioPlot(filepath.Join(s.out, "ratio_hilbert_rms.png"), "AdamW/RowNorm ratio of the head step's Hilbert RMS", "Hilbert RMS ratio",
		perSeed(func(w *width) []float64 { return w.rH }), shared.XY(s.xs, s.yH), s.fitLine("Hilbert RMS/this study (CPU)"),
		shared.XY(paperD, paperHRMS), s.fitLine("Hilbert RMS/paper"),
		s.fitLabel("Hilbert RMS/this study (CPU)", "CPU fit"), s.fitLabel("Hilbert RMS/paper", "paper fit")))
	var costMean plotter.XYs
	for _, d := range s.ds {
		costMean = append(costMean, plotter.XY{X: float64(d), Y: s.byD[d].meanCost})
	}
	shared.Check(costPlot(filepath.Join(s.out, "loss_cost.png"), perSeed(func(w *width) []float64 { return w.cost }), costMean))
}

// fitLine samples a fit over the plots' width range (nil without the fit).
func (s *study) fitLine(key string) plotter.XYs {
	f, ok := s.fits[key]
	if !ok {
		return nil
	}
	var xy plotter.XYs
	for x := 100.0; x <= 1200; x *= 1.05 {
		xy = append(xy, plotter.XY{X: x, Y: f.c * math.Pow(x, f.a)})
	}
	return xy
}

// fitLabel is a fit's legend entry, what with its formula.
func (s *study) fitLabel(key, what string) string {
	f, ok := s.fits[key]
	if !ok {
		return what
	}
	return fmt.Sprintf("%s: %.3g d^%.2f", what, f.c, f.a)
}

func toInts(x []float64) []int {
	v := make([]int, len(x))
	for i := range x {
		v[i] = int(x[i])
	}
	return v
}
