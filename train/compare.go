package train

import (
	"fmt"
	"image/color"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"gonum.org/v1/plot/plotter"
)

// RunResult is one finished run of a comparison.
type RunResult struct {
	Summary Summary
	History []Record
}

// Stat is a mean and sample standard deviation over seeds.
type Stat struct {
	Mean, SD float64
	N        int
}

// NewStat returns the mean and the sample standard deviation (n-1 in the
// denominator; 0 for a single value) of xs, skipping NaNs.
func NewStat(xs []float64) Stat {
	var s Stat
	var sum float64
	for _, x := range xs {
		if !math.IsNaN(x) {
			sum += x
			s.N++
		}
	}
	if s.N == 0 {
		return Stat{Mean: math.NaN(), SD: math.NaN()}
	}
	s.Mean = sum / float64(s.N)
	if s.N > 1 {
		var ss float64
		for _, x := range xs {
			if !math.IsNaN(x) {
				ss += (x - s.Mean) * (x - s.Mean)
			}
		}
		s.SD = math.Sqrt(ss / float64(s.N-1))
	}
	return s
}

// String formats the statistic as "mean ± sd".
func (s Stat) String() string {
	if s.N > 1 {
		return fmt.Sprintf("%.4g ± %.2g", s.Mean, s.SD)
	}
	return fmt.Sprintf("%.4g", s.Mean)
}

// HeadRow is one line of the comparison table: a head optimizer's final
// values over its seeds.
type HeadRow struct {
	Head                                string
	Seeds                               []uint64
	ValLoss, Diameter, HilbertRMS, Rate Stat
}

// Comparison is the paper's Table 3 for a set of runs.
type Comparison struct {
	Rows []HeadRow
	// DiameterRatio and RMSRatio are AdamW's mean over RowNorm's mean;
	// LossCost is RowNorm's mean validation loss minus AdamW's. NaN when
	// either head is missing.
	DiameterRatio, RMSRatio, LossCost float64
}

// Compare groups runs by head optimizer and computes the table.
func Compare(runs []RunResult) Comparison {
	byHead := map[string][]Summary{}
	for _, r := range runs {
		h := strings.ToLower(r.Summary.Head)
		byHead[h] = append(byHead[h], r.Summary)
	}
	heads := slices.Sorted(maps.Keys(byHead))
	var c Comparison
	means := map[string]HeadRow{}
	for _, h := range heads {
		var val, diam, rms, rate []float64
		row := HeadRow{Head: h}
		for _, s := range byHead[h] {
			row.Seeds = append(row.Seeds, s.Seed)
			val, diam, rms, rate = append(val, s.ValLoss), append(diam, s.Diameter), append(rms, s.HilbertRMS), append(rate, s.TokensPerS)
		}
		row.ValLoss, row.Diameter, row.HilbertRMS, row.Rate = NewStat(val), NewStat(diam), NewStat(rms), NewStat(rate)
		c.Rows = append(c.Rows, row)
		means[h] = row
	}
	a, okA := means["adamw"]
	r, okR := means["rownorm"]
	c.DiameterRatio, c.RMSRatio, c.LossCost = math.NaN(), math.NaN(), math.NaN()
	if okA && okR {
		c.DiameterRatio = a.Diameter.Mean / r.Diameter.Mean
		c.RMSRatio = a.HilbertRMS.Mean / r.HilbertRMS.Mean
		c.LossCost = r.ValLoss.Mean - a.ValLoss.Mean
	}
	return c
}

// Markdown renders the comparison in the shape of the paper's Table 3,
// with the paper's ratios for reference.
func (c Comparison) Markdown() string {
	var b strings.Builder
	b.WriteString("| head | seeds | val loss | D(S_T) | Hilbert RMS | tokens/s |\n|---|---|---|---|---|---|\n")
	for _, r := range c.Rows {
		seeds := make([]string, len(r.Seeds))
		for i, s := range r.Seeds {
			seeds[i] = fmt.Sprint(s)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %.0f |\n", r.Head, strings.Join(seeds, ","), r.ValLoss, r.Diameter, r.HilbertRMS, r.Rate.Mean)
	}
	if math.IsNaN(c.DiameterRatio) {
		b.WriteString("\nAdamW/RowNorm ratios: none (the comparison needs runs of both heads).\n")
	} else {
		fmt.Fprintf(&b, "\nAdamW/RowNorm ratios: diameter %.3gx, Hilbert RMS %.3gx; loss cost of RowNorm %+.4f nats.\n", c.DiameterRatio, c.RMSRatio, c.LossCost)
	}
	b.WriteString("The paper (190M-640M, FineWeb) reports diameter ratios of 45-60x, Hilbert-RMS ratios of 12-15x and a loss cost of 0.006-0.015.\n")
	return b.String()
}

// comparisonSeries are the lines of the comparison plots: validation loss,
// D(S_t) (with RowNorm's bound, dashed, last) and Hilbert RMS, one series
// per run in its head's colour, the first run of each head labelled.
func comparisonSeries(runs []RunResult) (val, diam, rms []Series) {
	seeds := map[string]int{} // runs by head
	for _, r := range runs {
		seeds[strings.ToLower(r.Summary.Head)]++
	}
	heads := slices.Sorted(maps.Keys(seeds))
	labelled := map[string]bool{}
	var bound plotter.XYs
	for _, r := range runs {
		head := strings.ToLower(r.Summary.Head)
		label := ""
		if !labelled[head] {
			labelled[head] = true
			if n := seeds[head]; n > 1 {
				label = fmt.Sprintf("%s (%d seeds)", head, n)
			} else {
				label = fmt.Sprintf("%s (seed %d)", head, r.Summary.Seed)
			}
		}
		col := headColor(heads, head)
		c := newRunCurves(r.History, head == "rownorm" && label != "")
		bound = append(bound, c.bound...)
		val = append(val, Series{Label: label, XY: c.val, Color: col})
		diam = append(diam, Series{Label: label, XY: c.diam, Color: col})
		rms = append(rms, Series{Label: label, XY: c.rms, Color: col})
	}
	if len(bound) > 0 {
		diam = append(diam, Series{Label: "2 lr_t (RowNorm bound)", XY: bound, Dashed: true, Color: boundColor})
	}
	return val, diam, rms
}

// headColor gives each head optimizer its own colour in comparison plots,
// the same in every plot: AdamW blue, RowNorm red, others after them.
func headColor(heads []string, head string) color.Color {
	i := sort.SearchStrings(heads, head)
	switch head {
	case "adamw":
		return palette[0]
	case "rownorm":
		return palette[1]
	}
	return palette[2+i%(len(palette)-2)]
}

// WriteComparison writes compare.md and the overlay plots
// (compare_val_loss.png, compare_diameter.png, compare_hilbert_rms.png)
// into dir. Every seed of a head is drawn in that head's colour, with one
// legend entry per head; RowNorm's bound 2 lr_t is drawn dashed.
func WriteComparison(dir, title string, runs []RunResult) (Comparison, error) {
	c := Compare(runs)
	val, diam, rms := comparisonSeries(runs)
	for _, p := range []struct {
		file, title, y string
		log            bool
		s              []Series
	}{
		{"compare_val_loss.png", "Validation loss", "loss (nats/token)", false, val},
		{"compare_diameter.png", "Head step row diameter D(S_t)", "D(S_t)", true, diam},
		{"compare_hilbert_rms.png", "Hilbert RMS of the head step", "Hilbert RMS", true, rms},
	} {
		if err := LinePlot(filepath.Join(dir, p.file), p.title, "update", p.y, p.log, p.s); err != nil {
			return c, err
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n\n", title)
	b.WriteString(c.Markdown())
	b.WriteString("\n![validation loss](compare_val_loss.png)\n![diameter](compare_diameter.png)\n![Hilbert RMS](compare_hilbert_rms.png)\n")
	return c, writeFileAtomic(filepath.Join(dir, "compare.md"), []byte(b.String()))
}
