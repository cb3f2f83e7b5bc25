// Package study holds what the study programs under scripts/study share: a
// run's metrics read back from its metrics.jsonl, the power-law fit of a
// ratio against a size, summary statistics in the tables' format, and the
// gonum/plot pieces their figures are drawn with.
package study

import (
	"bufio"
	"encoding/json"
	"fmt"
	"image/color"
	"log"
	"math"
	"os"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/hilbert-ml/hilbert/train"
)

// Run is one training run read back from its metrics.jsonl: the last
// update's values (each the last one the run logged) and every logged
// value by update.
type Run struct {
	Step                 int     // the last update logged
	Tokens               int64   // training tokens at Step
	ValLoss, Diam, HRMS  float64 // the last validation loss, D(S_t), Hilbert RMS
	HeadLR               float64 // the head's scheduled LR at the last diameter
	Elapsed, TokensPerS  float64 // training seconds and tokens/s over the run
	HasVal, HasD, HasRMS bool    // whether each was logged at all
	// Every logged value by update (ValAt[0]: the initial model).
	ValAt, DiamAt, HRMSAt, LRAt map[int]float64
}

// ReadRun reads a run's metrics.jsonl; a torn last line (a run still
// writing) is skipped.
func ReadRun(path string) (Run, error) {
	f, err := os.Open(path)
	if err != nil {
		return Run{}, err
	}
	defer f.Close()
	out := Run{ValAt: map[int]float64{}, DiamAt: map[int]float64{}, HRMSAt: map[int]float64{}, LRAt: map[int]float64{}}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var r train.Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			continue
		}
		if r.Step < out.Step {
			continue
		}
		out.Step, out.Tokens, out.Elapsed = r.Step, r.Tokens, r.ElapsedS
		if r.Step > 0 && r.ElapsedS > 0 {
			out.TokensPerS = float64(r.Tokens) / r.ElapsedS
		}
		if r.ValLoss != nil {
			out.ValLoss, out.HasVal = *r.ValLoss, true
			out.ValAt[r.Step] = *r.ValLoss
		}
		if r.Diameter != nil {
			out.Diam, out.HasD = *r.Diameter, true
			out.DiamAt[r.Step] = *r.Diameter
			if r.LR != nil {
				out.HeadLR = *r.LR
				out.LRAt[r.Step] = *r.LR
			}
		}
		if r.HilbertRMS != nil {
			out.HRMS, out.HasRMS = *r.HilbertRMS, true
			out.HRMSAt[r.Step] = *r.HilbertRMS
		}
	}
	return out, sc.Err()
}

// Check ends the command with err unless it is nil.
func Check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}

// Fit returns c, a and the standard error of a for the least-squares line
// log y = log c + a log x (se is 0 with two points: no residual freedom).
func Fit(x, y []float64) (c, a, se float64) {
	n := float64(len(x))
	var sx, sy, sxx, sxy float64
	for i := range x {
		lx, ly := math.Log(x[i]), math.Log(y[i])
		sx, sy, sxx, sxy = sx+lx, sy+ly, sxx+lx*lx, sxy+lx*ly
	}
	a = (n*sxy - sx*sy) / (n*sxx - sx*sx)
	b := (sy - a*sx) / n
	if len(x) > 2 {
		var rss float64
		for i := range x {
			r := math.Log(y[i]) - b - a*math.Log(x[i])
			rss += r * r
		}
		se = math.Sqrt(rss / (n - 2) / (sxx - sx*sx/n))
	}
	return math.Exp(b), a, se
}

// Mean is the mean of v (NaN when v is empty).
func Mean(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

// SD is the sample standard deviation of v (0 for fewer than two values).
func SD(v []float64) float64 {
	if len(v) < 2 {
		return 0
	}
	m := Mean(v)
	var ss float64
	for _, x := range v {
		ss += (x - m) * (x - m)
	}
	return math.Sqrt(ss / float64(len(v)-1))
}

// PM formats " ± sd" of v with prec decimals (nothing for a single value).
func PM(v []float64, prec int) string {
	if len(v) < 2 {
		return ""
	}
	return fmt.Sprintf(" ± %.*f", prec, SD(v))
}

// Floats joins v with ", ", each with prec decimals.
func Floats(v []float64, prec int) string { return Join(v, "%.*f", prec, ", ") }

// Join formats every value of v with format, a verb that takes prec (such
// as "%+.*f"), and joins them with sep.
func Join(v []float64, format string, prec int, sep string) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprintf(format, prec, x)
	}
	return strings.Join(s, sep)
}

// Ints joins v with ",".
func Ints(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}

// The figures' colours: this study's points (Blue, Faint for per-seed
// points) and the paper's (Red).
var (
	Blue  = color.RGBA{31, 119, 180, 255}
	Red   = color.RGBA{214, 39, 40, 255}
	Faint = color.NRGBA{31, 119, 180, 120}
)

// AddLine adds xy as a line (dashed if asked) with a legend entry when
// label is not empty; fewer than two points add nothing.
func AddLine(p *plot.Plot, xy plotter.XYs, c color.Color, dashed bool, label string) error {
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

// AddPoints adds xy as markers of radius r points with a legend entry;
// no points add nothing.
func AddPoints(p *plot.Plot, xy plotter.XYs, c color.Color, r float64, g draw.GlyphDrawer, label string) error {
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

// FixedTicks labels the given values that fall inside the axis range.
type FixedTicks []float64

// Ticks implements plot.Ticker.
func (t FixedTicks) Ticks(lo, hi float64) []plot.Tick {
	var out []plot.Tick
	for _, v := range t {
		if v >= lo && v <= hi {
			out = append(out, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'g', 4, 64)})
		}
	}
	return out
}

// XY pairs x and y as plot points.
func XY(x, y []float64) plotter.XYs {
	xy := make(plotter.XYs, len(x))
	for i := range x {
		xy[i] = plotter.XY{X: x[i], Y: y[i]}
	}
	return xy
}
