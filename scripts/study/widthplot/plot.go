package main

import (
	"image/color"
	"math"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

var (
	blue  = color.RGBA{31, 119, 180, 255}
	red   = color.RGBA{214, 39, 40, 255}
	faint = color.NRGBA{31, 119, 180, 120}
)

func ratioPlot(path, title, yLabel string, seeds, means, fitXY, paper, paperFit plotter.XYs, fitLabel, paperLabel string) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "model width d"
	p.Y.Label.Text = yLabel + " (AdamW / RowNorm)"
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker = fixedTicks{100, 128, 200, 256, 300, 400, 512, 600, 768, 1024}
	p.Y.Tick.Marker = fixedTicks{1, 2, 3, 5, 7, 10, 15, 20, 30, 50, 70, 100}
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
	if err := addLine(p, fitXY, blue, true, fitLabel); err != nil {
		return err
	}
	if err := addLine(p, paperFit, red, true, paperLabel); err != nil {
		return err
	}
	if err := addPoints(p, seeds, faint, 2.5, draw.CircleGlyph{}, "CPU, per seed"); err != nil {
		return err
	}
	if err := addPoints(p, means, blue, 4.5, draw.BoxGlyph{}, "CPU, ratio of seed means (2 layers, 409,600 tokens)"); err != nil {
		return err
	}
	if err := addPoints(p, paper, red, 4.5, draw.TriangleGlyph{}, "paper (190M-640M, FineWeb, 20 tokens/param)"); err != nil {
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
	p.X.Tick.Marker = fixedTicks{100, 128, 200, 256, 300, 400, 512, 600, 768, 1024}
	p.X.Min, p.X.Max = 100, 700
	p.Y.Min = 0 // a cost's size reads against zero
	p.Add(plotter.NewGrid())
	p.Legend.Top, p.Legend.Left = false, false
	if err := addLine(p, means, blue, false, ""); err != nil {
		return err
	}
	if err := addPoints(p, seeds, faint, 2.5, draw.CircleGlyph{}, "per seed"); err != nil {
		return err
	}
	if err := addPoints(p, means, blue, 4.5, draw.BoxGlyph{}, "mean over seeds"); err != nil {
		return err
	}
	return p.Save(8*vg.Inch, 4*vg.Inch, path)
}

func addLine(p *plot.Plot, xy plotter.XYs, c color.Color, dashed bool, label string) error {
	if len(xy) < 2 {
		return nil
	}
	l, err := plotter.NewLine(xy)
	if err != nil {
		return err
	}
	l.Color, l.Width = c, vg.Points(1.2)
	if dashed {
		l.Dashes = []vg.Length{vg.Points(5), vg.Points(4)}
	}
	p.Add(l)
	if label != "" {
		p.Legend.Add(label, l)
	}
	return nil
}

func addPoints(p *plot.Plot, xy plotter.XYs, c color.Color, r float64, g draw.GlyphDrawer, label string) error {
	if len(xy) == 0 {
		return nil
	}
	s, err := plotter.NewScatter(xy)
	if err != nil {
		return err
	}
	s.GlyphStyle.Color, s.GlyphStyle.Radius, s.GlyphStyle.Shape = c, vg.Points(r), g
	p.Add(s)
	p.Legend.Add(label, s)
	return nil
}

// fixedTicks labels the given values that fall inside the axis range.
type fixedTicks []float64

func (t fixedTicks) Ticks(lo, hi float64) []plot.Tick {
	var out []plot.Tick
	for _, v := range t {
		if v >= lo && v <= hi {
			out = append(out, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'g', 4, 64)})
		}
	}
	return out
}
