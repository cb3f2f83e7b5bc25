package cli

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/hilbert-ml/hilbert/device/cpu"
)

// parityStats are the median and the range of a side's repetitions.
type parityStats struct {
	Median float64   `json:"median"`
	Min    float64   `json:"min"`
	Max    float64   `json:"max"`
	Values []float64 `json:"values"`
}

func statsOf(v []float64) parityStats {
	s := slices.Clone(v)
	slices.Sort(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return parityStats{Median: med, Min: s[0], Max: s[len(s)-1], Values: v}
}

// parityLine is one measure of one row: both sides' statistics, Hilbert's
// speedup over PyTorch (the ratio of the medians, and the range of the
// ratios of the repetitions taken together), its share of the GEMM-bound
// ideal, and both sides' peak RSS.
type parityLine struct {
	Row         string      `json:"row"`
	Title       string      `json:"title"`
	Measure     string      `json:"measure"`
	LowerBetter bool        `json:"lower_better,omitempty"`
	Hilbert     parityStats `json:"hilbert"`
	PyTorch     parityStats `json:"pytorch"`
	// Speedup is Hilbert over PyTorch for a speed, PyTorch over Hilbert
	// for a latency: above 1, Hilbert is faster.
	Speedup    float64 `json:"speedup"`
	SpeedupMin float64 `json:"speedup_min"`
	SpeedupMax float64 `json:"speedup_max"`
	// Ideal is the GEMM-bound tokens/s (6 N + 12 L T d FLOPs a token at
	// the run's best native GEMM rate), OfIdeal Hilbert's median over it; both
	// absent where they do not apply or the GEMM row did not run.
	Ideal   *float64 `json:"ideal,omitempty"`
	OfIdeal *float64 `json:"hilbert_over_ideal,omitempty"`
	// Baseline and its RSS are the -baseline binary's; Gain is this
	// binary's speedup over it (of the medians; a latency inverted).
	Baseline    *parityStats `json:"baseline,omitempty"`
	RSSBaseline *parityStats `json:"peak_rss_mib_baseline,omitempty"`
	Gain        *float64     `json:"speedup_over_baseline,omitempty"`
	RSSHilbert  parityStats  `json:"peak_rss_mib_hilbert"`
	RSSPyTorch  parityStats  `json:"peak_rss_mib_pytorch"`
	RSSRatio    float64      `json:"peak_rss_hilbert_over_pytorch"`
	GemmGFLOPS  *float64     `json:"gemm_gflops,omitempty"`
	Repetitions int          `json:"reps"`
}

// lines computes every row's measures from the samples.
func (r *parityRun) lines() []parityLine {
	gemm := r.gemmRate()
	var out []parityLine
	for i, row := range r.rows {
		h, p := r.hilbert[i], r.pytorch[i]
		rss := func(ss []paritySample) parityStats {
			v := make([]float64, len(ss))
			for j, s := range ss {
				v[j] = s.rss
			}
			return statsOf(v)
		}
		for _, m := range row.measures {
			hv, pv := values(h, m.hilbertKey), values(p, m.pytorchKey)
			l := parityLine{Row: row.name, Title: row.title, Measure: m.label, LowerBetter: m.lowerBetter,
				Hilbert: statsOf(hv), PyTorch: statsOf(pv), RSSHilbert: rss(h), RSSPyTorch: rss(p), Repetitions: len(hv)}
			l.Speedup = speedup(l.Hilbert.Median, l.PyTorch.Median, m.lowerBetter)
			pairs := make([]float64, len(hv))
			for j := range hv {
				pairs[j] = speedup(hv[j], pv[j], m.lowerBetter)
			}
			ps := statsOf(pairs)
			l.SpeedupMin, l.SpeedupMax = ps.Min, ps.Max
			if l.RSSPyTorch.Median > 0 {
				l.RSSRatio = l.RSSHilbert.Median / l.RSSPyTorch.Median
			}
			if r.baseline != nil {
				bs, brss := statsOf(values(r.baseline[i], m.hilbertKey)), rss(r.baseline[i])
				gain := speedup(l.Hilbert.Median, bs.Median, m.lowerBetter)
				l.Baseline, l.RSSBaseline, l.Gain = &bs, &brss, &gain
			}
			if row.flopsPerToken > 0 && gemm > 0 {
				ideal := gemm * 1e9 / row.flopsPerToken
				of := l.Hilbert.Median / ideal
				l.Ideal, l.OfIdeal, l.GemmGFLOPS = &ideal, &of, &gemm
			}
			out = append(out, l)
		}
	}
	return out
}

// gemmRate is the native GEMM's best rate in the run at the threads of
// the other rows (the highest of its repetitions), 0 when that row did not
// run. The best rather than the median: a repetition slowed by another
// tenant of the machine would lower the ideal (one noisy run's median put
// three rows above 100% of it), and the ideal is a bound.
func (r *parityRun) gemmRate() float64 {
	for i, row := range r.rows {
		if row.name == fmt.Sprintf("gemm-%dt", r.threads) {
			return statsOf(values(r.hilbert[i], gflopsPerS.hilbertKey)).Max
		}
	}
	return 0
}

// values reads one number from each sample (NaN where it is missing,
// which shows in the table rather than passing as 0).
func values(ss []paritySample, key string) []float64 {
	v := make([]float64, len(ss))
	for i, s := range ss {
		x, ok := s.out[key].(float64)
		if !ok {
			x = math.NaN()
		}
		v[i] = x
	}
	return v
}

func speedup(h, p float64, lowerBetter bool) float64 {
	if lowerBetter {
		return p / h
	}
	return h / p
}

// writeTable prints the run's header and its table (markdown), then the
// bfloat16 over float32 ratios where both ran.
func (r *parityRun) writeTable(w io.Writer, lines []parityLine) error {
	var b strings.Builder
	fmt.Fprintf(&b, "hilbert bench parity: %d repetitions, %d threads; Hilbert's GEMM: %s\n", r.reps, r.threads, cpu.GemmDescription())
	fmt.Fprintf(&b, "PyTorch %s, OPENBLAS_CORETYPE %s, OMP_WAIT_POLICY %s; load average %s at the start, %s at the end\n",
		orUnknown(r.torch), orUnknown(r.coretype), orUnknown(r.ompWait), orUnknown(r.loadStart), orUnknown(r.loadStop))
	b.WriteString("medians (min-max); speedup: Hilbert over PyTorch (a latency: PyTorch over Hilbert), of the medians (of each repetition's pair)\n\n")
	base := r.baseline != nil
	if base {
		fmt.Fprintf(&b, "baseline: %s (before); its columns are its medians and this binary's speedup over it\n\n", r.baselineName)
		b.WriteString("| row | measure | PyTorch | baseline | Hilbert | over baseline | speedup | Hilbert / ideal | peak RSS MiB PyTorch | baseline | Hilbert | RSS ratio |\n")
		b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	} else {
		b.WriteString("| row | measure | PyTorch | Hilbert | speedup | Hilbert / ideal | peak RSS MiB PyTorch | Hilbert | RSS ratio |\n")
		b.WriteString("|---|---|---|---|---|---|---|---|---|\n")
	}
	for _, l := range lines {
		ideal := ""
		if l.OfIdeal != nil {
			ideal = fmt.Sprintf("%.0f%% (ideal %s)", 100**l.OfIdeal, formatNumber(*l.Ideal))
		}
		speed := fmt.Sprintf("%.2fx (%.2f-%.2f)", l.Speedup, l.SpeedupMin, l.SpeedupMax)
		if base {
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %.2fx | %s | %s | %s | %s | %s | %.2f |\n",
				l.Row, l.Measure, formatStats(l.PyTorch), formatStats(*l.Baseline), formatStats(l.Hilbert), *l.Gain, speed,
				ideal, formatStats(l.RSSPyTorch), formatStats(*l.RSSBaseline), formatStats(l.RSSHilbert), l.RSSRatio)
			continue
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %.2f |\n",
			l.Row, l.Measure, formatStats(l.PyTorch), formatStats(l.Hilbert), speed,
			ideal, formatStats(l.RSSPyTorch), formatStats(l.RSSHilbert), l.RSSRatio)
	}
	b.WriteString("\nrows:\n")
	for _, row := range r.rows {
		fmt.Fprintf(&b, "  %-11s %s\n", row.name, row.title)
	}
	for _, d := range bf16Ratios(lines) {
		b.WriteString(d + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// bf16Ratios are the tokens/s of the autocast rows over their float32
// rows, for each side.
func bf16Ratios(lines []parityLine) []string {
	by := map[string]parityLine{}
	for _, l := range lines {
		by[l.Row] = l
	}
	var out []string
	for _, l := range lines {
		width, ok := strings.CutPrefix(l.Row, "bf16-")
		f32, have := by["paper-"+width]
		if !ok || !have {
			continue
		}
		out = append(out, fmt.Sprintf("bf16 over float32 at %s: Hilbert %.2fx, PyTorch %.2fx", width,
			l.Hilbert.Median/f32.Hilbert.Median, l.PyTorch.Median/f32.PyTorch.Median))
	}
	return out
}

func formatStats(s parityStats) string {
	if s.Min == s.Max {
		return formatNumber(s.Median)
	}
	return fmt.Sprintf("%s (%s-%s)", formatNumber(s.Median), formatNumber(s.Min), formatNumber(s.Max))
}

// formatNumber prints three significant figures or whole numbers.
func formatNumber(x float64) string {
	switch a := math.Abs(x); {
	case a >= 100 || x == 0:
		return fmt.Sprintf("%.0f", x)
	case a >= 10:
		return fmt.Sprintf("%.1f", x)
	}
	return fmt.Sprintf("%.2f", x)
}
