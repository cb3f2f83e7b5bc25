package oraclestudy

import (
	"bufio"
	"encoding/json"
	"fmt"
	"image/color"
	"io"
	"math"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/hilbert-ml/hilbert/internal/atomicfile"
	"github.com/hilbert-ml/hilbert/internal/regfile"
	"github.com/hilbert-ml/hilbert/tokenizer/bytelevel"
	"github.com/hilbert-ml/hilbert/train"
)

// Replot redraws a finished study's ratio.png and rewrites its oracle.csv
// from its oracle.jsonl.
func Replot(dir string) error {
	rows, err := ReadRows(filepath.Join(dir, "oracle.jsonl"))
	if err != nil {
		return err
	}
	if err := writeCSV(filepath.Join(dir, "oracle.csv"), rows); err != nil {
		return err
	}
	return plotRatio(filepath.Join(dir, "ratio.png"), rows)
}

// ReadRows reads an oracle.jsonl; an unparsable line is an error naming
// the file.
func ReadRows(path string) ([]Row, error) {
	fh, err := regfile.Open(path)
	if err != nil {
		return nil, fmt.Errorf("oraclestudy: %w", err)
	}
	defer fh.Close()
	var rows []Row
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		var r Row
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("oraclestudy: %s: line %d: %w", path, len(rows)+1, err)
		}
		rows = append(rows, r)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("oraclestudy: %s: %w", path, err)
	}
	return rows, nil
}

// writeCSV writes rows as oracle.csv.
func writeCSV(path string, rows []Row) error {
	var b strings.Builder
	b.WriteString("step,loss,lr_scale,rank,rownorm_half,t_lower,t_upper,gap,ratio,ratio_lo,ratio_hi,bound,iterations,active_pairs,solve_s,converged,pairs_at_diameter,pairs_carrying_cost\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "%d,%.6f,%.6f,%d,%.10g,%.10g,%.10g,%.3g,%.8f,%.8f,%.8f,%.8f,%d,%d,%.3f,%v,%d,%d\n",
			r.Step, r.Loss, r.LRScale, r.Rank, r.RowNormHalf, r.TLower, r.TUpper, r.Gap, r.Ratio, r.RatioLo, r.RatioHi, r.Bound,
			r.Iterations, r.Active, r.SolveS, r.Converged, r.AtDiameter, r.CostPairs)
	}
	if err := atomicfile.WriteFile(path, []byte(b.String())); err != nil {
		return fmt.Errorf("oraclestudy: %w", err)
	}
	return nil
}

// plotRatio draws the measured ratio (line and markers), the paper's
// lower bound and 1 against the update number.
func plotRatio(path string, rows []Row) error {
	if len(rows) == 0 {
		return nil
	}
	var ratio, bound, one plotter.XYs
	lo := 1.0
	for _, r := range rows {
		x := float64(r.Step)
		ratio = append(ratio, plotter.XY{X: x, Y: r.Ratio})
		bound = append(bound, plotter.XY{X: x, Y: r.Bound})
		one = append(one, plotter.XY{X: x, Y: 1})
		lo = math.Min(lo, math.Min(r.Ratio, r.Bound))
	}
	p := plot.New()
	p.Title.Text = "RowNorm vs the exact diameter-constrained step (head gradient)"
	p.X.Label.Text = "update"
	p.Y.Label.Text = "Delta_RN / Delta_*"
	p.Y.Min, p.Y.Max = lo-0.05, 1.15 // room for the legend above 1
	p.Add(plotter.NewGrid())
	blue, red, grey := color.RGBA{31, 119, 180, 255}, color.RGBA{214, 39, 40, 255}, color.RGBA{90, 90, 90, 255}
	l, sc, err := plotter.NewLinePoints(ratio)
	if err != nil {
		return fmt.Errorf("oraclestudy: plot: %w", err)
	}
	l.Color, sc.Color, sc.Radius = blue, blue, vg.Points(2.5)
	p.Add(l, sc)
	p.Legend.Add("Delta_RN / Delta_* (certified, gap < tol)", l, sc)
	for _, s := range []struct {
		label string
		xy    plotter.XYs
		c     color.RGBA
		dash  bool
	}{{"lower bound sqrt((k+1)/(2k))", bound, red, true}, {"upper bound 1", one, grey, false}} {
		line, err := plotter.NewLine(s.xy)
		if err != nil {
			return fmt.Errorf("oraclestudy: plot: %w", err)
		}
		line.Color, line.Width = s.c, vg.Points(1.2)
		if s.dash {
			line.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
		}
		p.Add(line)
		p.Legend.Add(s.label, line)
	}
	p.Legend.Top = true
	w, err := p.WriterTo(7*vg.Inch, 4*vg.Inch, "png")
	if err != nil {
		return fmt.Errorf("oraclestudy: plot %s: %w", path, err)
	}
	if err := atomicfile.Write(path, func(f io.Writer) error { _, err := w.WriteTo(f); return err }); err != nil {
		return fmt.Errorf("oraclestudy: plot: %w", err)
	}
	return nil
}

// summaryMarkdown is summary.md: the run, then a table row per measurement.
func summaryMarkdown(sc Config, c train.Config, tokenizer, note string, res *Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Delta_RN / Delta_* over training\n\n")
	unit := "byte"
	if c.Model.Vocab != bytelevel.VocabSize {
		unit = "token"
	}
	fmt.Fprintf(&b, "Tokens: %s.\n", tokenizer)
	fmt.Fprintf(&b, "Model (V %d): d %d, %d layers, seq %d; head %s; %d updates of %d sequences; seed %d, data seed %d.\n",
		c.Model.Vocab, c.Model.Dim, c.Model.Layers, c.SeqLen, sc.Head, c.Steps, c.BatchSeqs, c.Seed, c.DataSeed)
	if note != "" {
		b.WriteString(note + "\n")
	}
	s := res.Train
	fmt.Fprintf(&b, "Text: %s. Final train loss %.4f, val loss %.4f (nats/%s).\n", strings.Join(sc.Text, ", "), s.FinalLoss, s.ValLoss, unit)
	val := fmt.Sprintf("the first %d tokens of the shuffled paragraphs", c.ValTokens+1)
	if len(sc.ValText) > 0 {
		val = "the whole of " + strings.Join(sc.ValText, ", ")
	}
	fmt.Fprintf(&b, "Validation: %s; %d targets scored, %d bytes of text: %.4f nats/byte.\n\n", val, res.ValTargets, res.ValBytes, res.ValNatsPerByte)
	b.WriteString("| update | loss | rank k | Delta_RN/Delta_* | certified interval | bound | gap | pairs: flow | at diameter | 99.9% of cost | iterations | solve |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range res.Rows {
		fmt.Fprintf(&b, "| %d | %.3f | %d | %.5f | [%.5f, %.5f] | %.5f | %.1e | %d | %d | %d | %d | %.1f s |\n",
			r.Step, r.Loss, r.Rank, r.Ratio, r.RatioLo, r.RatioHi, r.Bound, r.Gap, r.Active, r.AtDiameter, r.CostPairs, r.Iterations, r.SolveS)
	}
	fmt.Fprintf(&b, "\nToken pairs, of %d: flow, those carrying flow in the solver's last iterate; at diameter, those at distance >= %g in the certified potential (the exact step's binding constraints); 99.9%% of cost, the fewest carrying %g of the certified flow's cost.\n",
		c.Model.Vocab*(c.Model.Vocab-1)/2, pairFrac, pairFrac)
	b.WriteString("\n![ratio](ratio.png)\n")
	return b.String()
}
