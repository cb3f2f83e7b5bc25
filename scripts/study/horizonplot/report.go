package main

// The tables of horizon.md.

import (
	"fmt"
	"image/color"
	"math"
	"sort"
	"strings"

	"github.com/hilbert-ml/hilbert/scripts/study/internal/study"
)

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
		study.Join(cost, "%+.*f", 4, ", "), study.Mean(cost), study.PM(cost, 4), seString(seCost),
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
		study.Join(paperDiam, "%.*f", 1, " / "), study.Join(paperHRMS, "%.*f", 1, " / "), study.Join(paperCost, "%.*f", 4, " / "))
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
		return fmt.Sprintf("| %s | %s | %s | %s | - | - | - |\n", name, data, study.Ints(w), study.Join(y, "%.*f", 2, " / "))
	}
	c, a, se := study.Fit(x, y)
	ses := "-"
	if len(x) > 2 {
		ses = fmt.Sprintf("%.3f", se)
	}
	return fmt.Sprintf("| %s | %s | %s | %s | %.4g | %.3f | %s |\n", name, data, study.Ints(w), study.Join(y, "%.*f", 2, " / "), c, a, ses)
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
		fmt.Fprintf(&b, "| %g | %s | %s | %.2f | %s | %.2f |\n", tpp, study.Ints(w), study.Join(yD, "%.*f", 2, " / "), aD, study.Join(yH, "%.*f", 2, " / "), aH)
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

// seString formats a standard error to 4 decimals, "-" for NaN (no pieces).
func seString(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return fmt.Sprintf("%.4f", v)
}
