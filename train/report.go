package train

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// Summary is the outcome of a run: the last logged values.
type Summary struct {
	Name       string
	Head       string
	Seed       uint64
	Steps      int
	Tokens     int64
	ElapsedS   float64
	TokensPerS float64 // mean over logged updates
	FinalLoss  float64 // last training loss
	ValLoss    float64 // last validation loss (NaN if none)
	Diameter   float64 // last D(S_t) (NaN if none)
	HilbertRMS float64 // last Hilbert RMS (NaN if none)
}

// Summarize reduces a run's records to its summary.
func Summarize(cfg Config, hist []Record) Summary {
	s := Summary{Name: cfg.Name, Head: cfg.Head, Seed: cfg.Seed, ValLoss: math.NaN(), Diameter: math.NaN(), HilbertRMS: math.NaN()}
	var tps float64
	for _, r := range hist {
		s.Steps, s.Tokens, s.ElapsedS, s.FinalLoss = r.Step, r.Tokens, r.ElapsedS, r.Loss
		tps += r.TokensPerS
		if r.ValLoss != nil {
			s.ValLoss = *r.ValLoss
		}
		if r.Diameter != nil {
			s.Diameter = *r.Diameter
		}
		if r.HilbertRMS != nil {
			s.HilbertRMS = *r.HilbertRMS
		}
	}
	if len(hist) > 0 {
		s.TokensPerS = tps / float64(len(hist))
	}
	return s
}

// Summary returns the run's summary so far.
func (t *Trainer) Summary() Summary { return Summarize(t.cfg, t.history) }

// WriteReport writes the run's plots (loss.png, diameter.png,
// hilbert_rms.png) and summary.md into its folder.
func (t *Trainer) WriteReport() error {
	dir := t.Dir()
	var train, val, diam, bound, rms plotter.XYs
	for _, r := range t.history {
		train = append(train, plotter.XY{X: float64(r.Step), Y: r.Loss})
		if r.ValLoss != nil {
			val = append(val, plotter.XY{X: float64(r.Step), Y: *r.ValLoss})
		}
		if r.Diameter != nil && *r.Diameter > 0 {
			diam = append(diam, plotter.XY{X: float64(r.Step), Y: *r.Diameter})
			if r.LR != nil && *r.LR > 0 && strings.EqualFold(t.cfg.Head, "rownorm") {
				bound = append(bound, plotter.XY{X: float64(r.Step), Y: 2 * *r.LR})
			}
		}
		if r.HilbertRMS != nil && *r.HilbertRMS > 0 {
			rms = append(rms, plotter.XY{X: float64(r.Step), Y: *r.HilbertRMS})
		}
	}
	plots := []struct {
		file, title, y string
		log            bool
		series         []Series
	}{
		{"loss.png", "Cross-entropy", "loss (nats/token)", false, []Series{{"train", train, false}, {"validation", val, true}}},
		{"diameter.png", "Head step row diameter D(S_t)", "D(S_t)", true, []Series{{t.cfg.Head, diam, false}, {"2 lr_t (RowNorm bound)", bound, false}}},
		{"hilbert_rms.png", "Hilbert RMS of the head step", "Hilbert RMS", true, []Series{{t.cfg.Head, rms, true}}},
	}
	for _, p := range plots {
		if err := LinePlot(filepath.Join(dir, p.file), p.title, "update", p.y, p.log, p.series); err != nil {
			return err
		}
	}
	s := t.Summary()
	var b strings.Builder
	fmt.Fprintf(&b, "# Run %s\n\n", t.cfg.Name)
	fmt.Fprintf(&b, "Model: d %d, %d layers, vocab %d, seq %d; head optimizer %s", t.cfg.Model.Dim, t.cfg.Model.Layers, t.cfg.Model.Vocab, t.cfg.SeqLen, t.cfg.Head)
	if t.cfg.Projected {
		b.WriteString(" (projected)")
	}
	fmt.Fprintf(&b, "; seed %d, data seed %d; %d updates of %d sequences.\n\n", t.cfg.Seed, t.cfg.DataSeed, t.cfg.Steps, t.cfg.BatchSeqs)
	b.WriteString("| updates | tokens | train loss | val loss | D(S_T) | Hilbert RMS | tokens/s | time |\n|---|---|---|---|---|---|---|---|\n")
	fmt.Fprintf(&b, "| %d | %d | %.4f | %.4f | %.4g | %.4g | %.0f | %.0f s |\n\n", s.Steps, s.Tokens, s.FinalLoss, s.ValLoss, s.Diameter, s.HilbertRMS, s.TokensPerS, s.ElapsedS)
	b.WriteString("![loss](loss.png) ![diameter](diameter.png) ![Hilbert RMS](hilbert_rms.png)\n")
	return writeFileAtomic(filepath.Join(dir, "summary.md"), []byte(b.String()))
}

// Series is one line of a plot; Points draws markers instead of a line.
type Series struct {
	Label  string
	XY     plotter.XYs
	Points bool
}

var palette = []color.RGBA{{31, 119, 180, 255}, {214, 39, 40, 255}, {44, 160, 44, 255}, {148, 103, 189, 255}, {255, 127, 14, 255}, {140, 86, 75, 255}}

// LinePlot writes a PNG line plot of the non-empty series to path
// (atomically), with a logarithmic y axis when logY is set.
func LinePlot(path, title, xLabel, yLabel string, logY bool, series []Series) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xLabel
	p.Y.Label.Text = yLabel
	if logY {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	p.Add(plotter.NewGrid())
	drawn := 0
	for i, s := range series {
		if len(s.XY) == 0 {
			continue
		}
		c := palette[i%len(palette)]
		if s.Points || len(s.XY) == 1 {
			sc, err := plotter.NewScatter(s.XY)
			if err != nil {
				return fmt.Errorf("train: plot %s: %w", path, err)
			}
			sc.GlyphStyle.Color = c
			sc.GlyphStyle.Radius = vg.Points(2.5)
			p.Add(sc)
			p.Legend.Add(s.Label, sc)
		} else {
			l, err := plotter.NewLine(s.XY)
			if err != nil {
				return fmt.Errorf("train: plot %s: %w", path, err)
			}
			l.Color = c
			l.Width = vg.Points(1.2)
			p.Add(l)
			p.Legend.Add(s.Label, l)
		}
		drawn++
	}
	if drawn == 0 {
		return nil // nothing measured (for example no head step yet)
	}
	if logY {
		// Fix a positive range (one point, or equal values, would
		// otherwise give the log axis a range through zero).
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, s := range series {
			for _, xy := range s.XY {
				if xy.Y > 0 {
					lo, hi = math.Min(lo, xy.Y), math.Max(hi, xy.Y)
				}
			}
		}
		if hi <= 0 || math.IsInf(lo, 0) {
			return nil
		}
		p.Y.Min, p.Y.Max = lo/1.5, hi*1.5
	}
	p.Legend.Top = true
	w, err := p.WriterTo(7*vg.Inch, 4*vg.Inch, "png")
	if err != nil {
		return fmt.Errorf("train: plot %s: %w", path, err)
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-*.png")
	if err != nil {
		return fmt.Errorf("train: plot: %w", err)
	}
	defer os.Remove(f.Name())
	if _, err := w.WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("train: plot %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
