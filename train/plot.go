package train

import (
	"fmt"
	"image/color"
	"io"
	"math"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/hilbert-ml/hilbert/internal/atomicfile"
)

// Series is one line of a plot: Points draws markers instead of a line,
// Dashed a dashed line; Color (nil: the palette's next) is its colour; a
// series with an empty Label has no legend entry.
type Series struct {
	Label  string
	XY     plotter.XYs
	Points bool
	Dashed bool
	Color  color.Color
}

var palette = []color.RGBA{{31, 119, 180, 255}, {214, 39, 40, 255}, {44, 160, 44, 255}, {148, 103, 189, 255}, {255, 127, 14, 255}, {140, 86, 75, 255}}

// boundColor draws RowNorm's bound: dark grey, dashed, over the data.
var boundColor = color.RGBA{80, 80, 80, 255}

// LinePlot writes a PNG line plot of the non-empty series to path
// (atomically), with a logarithmic y axis when logY is set. The legend
// sits in a column right of the data, never over it; dashed series (a
// bound) are drawn last and thinner, so a solid curve on the bound shows
// through their gaps.
func LinePlot(path, title, xLabel, yLabel string, logY bool, series []Series) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xLabel
	p.Y.Label.Text = yLabel
	if logY {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = logTicks{}
	} else {
		p.Y.Tick.Marker = distinctTicks{}
	}
	p.Add(plotter.NewGrid())
	thumbs, err := addSeries(p, series)
	if err != nil {
		return fmt.Errorf("train: plot %s: %w", path, err)
	}
	if thumbs == nil {
		return nil // nothing measured (for example no head step yet)
	}
	legend := plot.NewLegend()
	legend.Top, legend.Left = true, true
	for i, s := range series { // legend in the caller's order
		if thumbs[i] != nil && s.Label != "" {
			legend.Add(s.Label, thumbs[i])
		}
	}
	if logY {
		// Fix a positive range (one point, or equal values, would
		// otherwise give the log axis a range through zero).
		lo, hi := positiveRange(series)
		if hi <= 0 || math.IsInf(lo, 0) {
			return nil
		}
		p.Y.Min, p.Y.Max = lo/1.5, hi*1.5
	}
	if err := savePlot(path, p, legend); err != nil {
		return fmt.Errorf("train: plot %s: %w", path, err)
	}
	return nil
}

// addSeries adds the non-empty series to p, solid ones first and dashed
// ones (bounds) last and thinner, and returns each series' legend
// thumbnail (nil for an empty one), or nil when none was drawn.
func addSeries(p *plot.Plot, series []Series) ([]plot.Thumbnailer, error) {
	order := make([]int, 0, len(series))
	for i, s := range series {
		if !s.Dashed {
			order = append(order, i)
		}
	}
	for i, s := range series {
		if s.Dashed {
			order = append(order, i)
		}
	}
	drawn := 0
	thumbs := make([]plot.Thumbnailer, len(series))
	for _, i := range order {
		s := series[i]
		if len(s.XY) == 0 {
			continue
		}
		var c color.Color = palette[i%len(palette)]
		if s.Color != nil {
			c = s.Color
		}
		if s.Points || len(s.XY) == 1 {
			sc, err := plotter.NewScatter(s.XY)
			if err != nil {
				return nil, err
			}
			sc.GlyphStyle.Color = c
			sc.GlyphStyle.Radius = vg.Points(2.5)
			p.Add(sc)
			thumbs[i] = sc
		} else {
			l, err := plotter.NewLine(s.XY)
			if err != nil {
				return nil, err
			}
			l.Color = c
			l.Width = vg.Points(1.8)
			if s.Dashed {
				l.Dashes = []vg.Length{vg.Points(5), vg.Points(4)}
				l.Width = vg.Points(1)
			}
			p.Add(l)
			thumbs[i] = l
		}
		drawn++
	}
	if drawn == 0 {
		return nil, nil
	}
	return thumbs, nil
}

// runCurves are the points of a run's records that its plots draw.
type runCurves struct {
	train, val, diam, rms plotter.XYs
	bound                 plotter.XYs // RowNorm's bound 2 lr_t, where asked for
}

// newRunCurves collects hist's points: the training loss of every update,
// the validation losses, the positive D(S_t) (with, where bound is set,
// the bound 2 lr_t beside each where lr_t > 0) and the positive Hilbert
// RMS.
func newRunCurves(hist []Record, bound bool) runCurves {
	var c runCurves
	for _, r := range hist {
		x := float64(r.Step)
		if r.Step > 0 {
			c.train = append(c.train, plotter.XY{X: x, Y: r.Loss})
		}
		if r.ValLoss != nil {
			c.val = append(c.val, plotter.XY{X: x, Y: *r.ValLoss})
		}
		if r.Diameter != nil && *r.Diameter > 0 {
			c.diam = append(c.diam, plotter.XY{X: x, Y: *r.Diameter})
			if bound && r.LR != nil && *r.LR > 0 {
				c.bound = append(c.bound, plotter.XY{X: x, Y: 2 * *r.LR})
			}
		}
		if r.HilbertRMS != nil && *r.HilbertRMS > 0 {
			c.rms = append(c.rms, plotter.XY{X: x, Y: *r.HilbertRMS})
		}
	}
	return c
}

// positiveRange returns the least and greatest positive y of the series
// (+Inf and -Inf when there is none).
func positiveRange(series []Series) (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, s := range series {
		for _, xy := range s.XY {
			if xy.Y > 0 {
				lo, hi = math.Min(lo, xy.Y), math.Max(hi, xy.Y)
			}
		}
	}
	return lo, hi
}

// savePlot draws p on the left and the legend in a column on the right,
// at the height of the data's top, and writes the PNG atomically.
func savePlot(path string, p *plot.Plot, legend plot.Legend) error {
	const width, height = 8 * vg.Inch, 4 * vg.Inch
	cw, err := draw.NewFormattedCanvas(width, height, "png")
	if err != nil {
		return err
	}
	dc := draw.New(cw)
	legendW := legend.Rectangle(dc).Size().X
	pad := vg.Points(10)
	p.Draw(draw.Crop(dc, 0, -(legendW + 2*pad), 0, 0))
	titleH := p.Title.TextStyle.Rectangle(p.Title.Text).Size().Y + p.Title.Padding
	legend.Draw(draw.Crop(dc, width-legendW-pad, 0, 0, -(titleH + pad)))
	return atomicfile.Write(path, func(w io.Writer) error {
		_, err := cw.WriteTo(w)
		return err
	})
}

// logTicks labels a logarithmic axis at 1, 2 and 5 times each power of ten
// (every mark 1..9 when the range spans less than a decade, the powers of
// ten alone beyond five decades, and linear ticks when even 1..9 would
// label fewer than two), so that even a narrow range has labels.
type logTicks struct{}

func (logTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(lo > 0) || !(hi > lo) {
		return nil
	}
	decades := math.Log10(hi / lo)
	labelled := map[int]bool{1: true, 2: true, 5: true}
	switch {
	case decades < 1:
		labelled = map[int]bool{1: true, 2: true, 3: true, 4: true, 5: true, 6: true, 7: true, 8: true, 9: true}
	case decades > 5:
		labelled = map[int]bool{1: true}
	}
	var ticks []plot.Tick
	for e := int(math.Floor(math.Log10(lo))); e <= int(math.Ceil(math.Log10(hi))); e++ {
		p := math.Pow(10, float64(e))
		for k := 1; k <= 9; k++ {
			v := float64(k) * p
			if v < lo*(1-1e-9) || v > hi*(1+1e-9) {
				continue
			}
			t := plot.Tick{Value: v}
			if labelled[k] {
				t.Label = strconv.FormatFloat(v, 'g', 3, 64)
			}
			ticks = append(ticks, t)
		}
	}
	n := 0
	for _, t := range ticks {
		if t.Label != "" {
			n++
		}
	}
	if n < 2 {
		// Less than a step of the 1..9 marks: linear ticks, which over so
		// narrow a range look evenly spaced on the log axis too.
		ticks = ticks[:0]
		for _, t := range (distinctTicks{}).Ticks(lo, hi) {
			if t.Value > 0 {
				ticks = append(ticks, t)
			}
		}
	}
	return ticks
}

// distinctTicks are gonum's default linear ticks, labelled with as many
// digits as it takes to tell neighbours apart (a loss axis from 10.6 to
// 10.9 would otherwise read 11, 11, 11).
type distinctTicks struct{}

func (distinctTicks) Ticks(lo, hi float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(lo, hi)
	for prec := 1; prec <= 12; prec++ {
		seen := map[string]bool{}
		ok := true
		for _, t := range ticks {
			if t.Label == "" {
				continue
			}
			l := strconv.FormatFloat(t.Value, 'g', prec, 64)
			if seen[l] {
				ok = false
				break
			}
			seen[l] = true
		}
		if ok {
			for i := range ticks {
				if ticks[i].Label != "" {
					ticks[i].Label = strconv.FormatFloat(ticks[i].Value, 'g', prec, 64)
				}
			}
			break
		}
	}
	return ticks
}
