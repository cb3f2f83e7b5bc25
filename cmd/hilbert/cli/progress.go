package cli

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/hilbert-ml/hilbert/train"
)

// progress shows a run on stderr. On a terminal: a progress bar, with a
// line that stays above it at every validation. Elsewhere (a file, a
// pipe): plain lines, one at every validation and one every 5% of the
// run or 30 s, whichever comes first. Quiet: nothing. Write errors (a
// closed terminal, a broken pipe) are ignored: output never stops a run.
type progress struct {
	w        io.Writer
	bar      *progressbar.ProgressBar
	plain    bool
	steps    int
	every    int
	lastStep int
	lastLine time.Time
	start    time.Time
	startAt  int
	rownorm  bool
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

func newProgress(w io.Writer, quiet bool, head string, steps, step int) *progress {
	p := &progress{w: w, steps: steps, every: max(1, steps/20), lastStep: step, lastLine: time.Now(), start: time.Now(), startAt: step,
		rownorm: strings.EqualFold(head, "rownorm")}
	switch {
	case quiet:
	case isTerminal(w):
		p.bar = newBar(w, steps, step, progressbar.OptionFullWidth())
	default:
		p.plain = true
	}
	return p
}

// newBar returns the terminal's progress bar at step of steps. It is not
// cleared when it reaches the end, so that its last frame shows the last
// update; finish clears it.
func newBar(w io.Writer, steps, step int, opts ...progressbar.Option) *progressbar.ProgressBar {
	bar := progressbar.NewOptions(steps, append([]progressbar.Option{
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription("train"),
		progressbar.OptionShowCount(),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionThrottle(0),
	}, opts...)...)
	bar.Set(step)
	return bar
}

// record shows one record of the run.
func (p *progress) record(r train.Record) {
	if p.bar == nil && !p.plain {
		return
	}
	if r.ValLoss != nil {
		line := validationLine(r, p.steps, p.rownorm)
		if p.bar != nil {
			p.bar.Clear()
			fmt.Fprintln(p.w, line)
		} else {
			fmt.Fprintln(p.w, "hilbert: "+line)
			p.lastStep, p.lastLine = r.Step, time.Now()
		}
	}
	if r.Step == 0 {
		if p.bar != nil {
			p.bar.RenderBlank()
		}
		return
	}
	if p.bar != nil {
		// The count first, then the description: each renders, and the
		// last frame has both (with the description first, a frame showed
		// the previous count, and the last update's frame was never drawn).
		p.bar.Set(r.Step)
		p.bar.Describe(fmt.Sprintf("loss %.3f  %.0f tok/s", r.Loss, r.TokensPerS))
		return
	}
	if r.ValLoss == nil && (r.Step-p.lastStep >= p.every || time.Since(p.lastLine) >= 30*time.Second) {
		fmt.Fprintf(p.w, "hilbert: update %d/%d  loss %.4f  %.0f tok/s%s\n", r.Step, p.steps, r.Loss, r.TokensPerS, p.eta(r.Step))
		p.lastStep, p.lastLine = r.Step, time.Now()
	}
}

// eta estimates the time left from this process's pace.
func (p *progress) eta(step int) string {
	done := step - p.startAt
	if done <= 0 || step >= p.steps {
		return ""
	}
	left := time.Duration(float64(time.Since(p.start)) / float64(done) * float64(p.steps-step))
	return "  ETA " + left.Round(time.Second).String()
}

// finish removes the bar, where it stands (an interrupted run's bar is
// not filled first).
func (p *progress) finish() {
	if p.bar != nil {
		p.bar.Clear()
	}
}

// validationLine describes a validation record: the losses, and the head's
// diagnostics when the update computed them.
func validationLine(r train.Record, steps int, rownorm bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "update %d/%d  val loss %.4f", r.Step, steps, *r.ValLoss)
	if r.Step == 0 {
		b.WriteString(" (initial model)")
		return b.String()
	}
	fmt.Fprintf(&b, "  train loss %.4f", r.Loss)
	if r.Diameter != nil {
		fmt.Fprintf(&b, "  D(S_t) %.4g", *r.Diameter)
		if r.LR != nil && rownorm {
			fmt.Fprintf(&b, " (bound 2 lr_t %.4g)", 2**r.LR)
		}
	}
	if r.HilbertRMS != nil {
		fmt.Fprintf(&b, "  Hilbert RMS %.4g", *r.HilbertRMS)
	}
	fmt.Fprintf(&b, "  %.0f tok/s  %s", r.TokensPerS, (time.Duration(r.ElapsedS) * time.Second).String())
	return b.String()
}
