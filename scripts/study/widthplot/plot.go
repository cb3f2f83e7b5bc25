package main

import (
	"cmp"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	shared "github.com/hilbert-ml/hilbert/scripts/study/internal/study"
)

func ratioPlot(path, title, yLabel string, seeds, means, fitXY, paper, paperFit plotter.XYs, fitLabel, paperLabel string) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "model width d"
	p.Y.Label.Text = yLabel + " (AdamW / RowNorm)"
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker = shared.FixedTicks{100, 128, 200, 256, 300, 400, 512, 600, 768, 1024}
	p.Y.Tick.Marker = shared.FixedTicks{1, 2, 3, 5, 7, 10, 15, 20, 30, 50, 70, 100}
	p.X.Min, p.X.Max = 100, 1200
	p.Add(plotter.NewGrid())
	p.Legend.Top, p.Legend.Left = true, true
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, set := range []plotter.XYs{seeds, means, paper} {
		for _, v := range set {
			lo, hi = math.Min(lo, v.Y), math.Max(hi, v.Y)
		}
	}
	p.Y.Min, p.Y.Max = lo/1.6, hi*1.6
	// The layers in drawing order; the first error is the plot's.
	if err := cmp.Or(
		shared.AddLine(p, fitXY, shared.Blue, true, fitLabel),
		shared.AddLine(p, paperFit, shared.Red, true, paperLabel),
		shared.AddPoints(p, seeds, shared.Faint, 2.5, draw.CircleGlyph{}, "CPU, per seed"),
		shared.AddPoints(p, means, shared.Blue, 4.5, draw.BoxGlyph{}, "CPU, ratio of seed means (2 layers, 409,600 tokens)"),
		shared.AddPoints(p, paper, shared.Red, 4.5, draw.TriangleGlyph{}, "paper (190M-640M, FineWeb, 20 tokens/param)"),
	); err != nil {
		return err
	}
	return p.Save(8*vg.Inch, 5*vg.Inch, path)
}

func costPlot(path string, seeds, means plotter.XYs) error {
	p := plot.New()
	p.Title.Text = "RowNorm's loss cost: final val loss(RowNorm) - val loss(AdamW)"
	p.X.Label.Text = "model width d"
	p.Y.Label.Text = "loss cost (nats)"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = shared.FixedTicks{100, 128, 200, 256, 300, 400, 512, 600, 768, 1024}
	p.X.Min, p.X.Max = 100, 700
	p.Y.Min = 0 // a cost's size reads against zero
	p.Add(plotter.NewGrid())
	p.Legend.Top, p.Legend.Left = false, false
	if err := cmp.Or(
		shared.AddLine(p, means, shared.Blue, false, ""),
		shared.AddPoints(p, seeds, shared.Faint, 2.5, draw.CircleGlyph{}, "per seed"),
		shared.AddPoints(p, means, shared.Blue, 4.5, draw.BoxGlyph{}, "mean over seeds"),
	); err != nil {
		return err
	}
	return p.Save(8*vg.Inch, 4*vg.Inch, path)
}
