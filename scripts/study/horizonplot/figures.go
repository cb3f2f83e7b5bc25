package main

// The figures: loss cost and the two ratios against tokens per parameter.

import (
	"cmp"
	"fmt"
	"image/color"
	"math"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/hilbert-ml/hilbert/scripts/study/internal/study"
)

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
		// The layers in drawing order; the first error is the plot's.
		if err := cmp.Or(
			study.AddLine(p, s.means, col[0], false, ""),
			study.AddPoints(p, s.seeds, col[1], 2.5, draw.CircleGlyph{}, fmt.Sprintf("d %d, per seed", s.d)),
			study.AddPoints(p, s.means, col[0], 4.5, draw.BoxGlyph{}, fmt.Sprintf("d %d (%d params), mean over seeds", s.d, params(s.d))),
		); err != nil {
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
