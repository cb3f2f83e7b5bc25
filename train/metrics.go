package train

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/hilbert-ml/hilbert/internal/atomicfile"
)

// Record is one logged update: one JSON line of metrics.jsonl. Optional
// fields are present only on updates that computed them.
type Record struct {
	// Step counts updates from 1.
	Step int `json:"step"`
	// Loss is the mean training cross-entropy over the update's batch.
	Loss float64 `json:"loss"`
	// LRScale is the schedule multiplier the update used.
	LRScale float64 `json:"lr_scale"`
	// GradNorm is the global gradient norm before clipping.
	GradNorm float64 `json:"grad_norm"`
	// Tokens counts training tokens seen so far; TokensPerS is this
	// update's throughput.
	Tokens     int64   `json:"tokens"`
	TokensPerS float64 `json:"tokens_per_s"`
	// ElapsedS is the training wall time so far, across resumes.
	ElapsedS float64 `json:"elapsed_s"`
	// CommS is the update's time in collectives (gradient averaging and
	// the loss), in a data-parallel run; CommS / (tokens / TokensPerS) is
	// communication's share of the update.
	CommS *float64 `json:"comm_s,omitempty"`
	// ValLoss is the mean token cross-entropy on the validation prefix.
	ValLoss *float64 `json:"val_loss,omitempty"`
	// Diameter is the exact row diameter D(S_t) of the head step.
	Diameter *float64 `json:"diameter,omitempty"`
	// LR is the head's scheduled learning rate (D(S_t) <= 2 LR for RowNorm).
	LR *float64 `json:"head_lr,omitempty"`
	// HilbertRMS is the head step's Hilbert RMS over the panel.
	HilbertRMS *float64 `json:"hilbert_rms,omitempty"`
}

// MarshalJSON writes the record of update 0 (the initial model's
// validation, before any update) as its step, tokens, time and validation
// loss alone; the other records field by field.
func (r Record) MarshalJSON() ([]byte, error) {
	type plain Record
	if r.Step == 0 {
		return json.Marshal(struct {
			Step     int      `json:"step"`
			Tokens   int64    `json:"tokens"`
			ElapsedS float64  `json:"elapsed_s"`
			ValLoss  *float64 `json:"val_loss,omitempty"`
		}{r.Step, r.Tokens, r.ElapsedS, r.ValLoss})
	}
	return json.Marshal(plain(r))
}

// finite returns an error naming the first field of r that is NaN or
// infinite (JSON has no such numbers, and they mean the run diverged).
func (r Record) finite() error {
	fields := []struct {
		name string
		v    *float64
	}{
		{"training loss", &r.Loss}, {"lr_scale", &r.LRScale}, {"gradient norm", &r.GradNorm},
		{"tokens_per_s", &r.TokensPerS}, {"elapsed_s", &r.ElapsedS}, {"comm_s", r.CommS},
		{"validation loss", r.ValLoss}, {"D(S_t)", r.Diameter}, {"head_lr", r.LR}, {"Hilbert RMS", r.HilbertRMS},
	}
	for _, f := range fields {
		if f.v != nil {
			if err := finiteMetric(f.name, *f.v, r.Step); err != nil {
				return err
			}
		}
	}
	return nil
}

// finiteMetric is nil for a finite value, else the error of a run that
// diverged, naming the metric and the update.
func finiteMetric(name string, v float64, step int) error {
	if !math.IsNaN(v) && !math.IsInf(v, 0) {
		return nil
	}
	return fmt.Errorf("train: %s is %v at update %d: the run diverged; lower the learning rates (-muon-lr, -embed-lr, -head-lr) or init_std, or resume an earlier checkpoint", name, v, step)
}

// metricsWriter appends records to metrics.jsonl.
type metricsWriter struct {
	f  *os.File
	w  *bufio.Writer
	tb *tbWriter // the same records as TensorBoard events (tensorboard.go)
}

// createMetrics starts an empty metrics file (a fresh run), replacing any
// earlier one without reading it.
func createMetrics(path string) (*metricsWriter, error) {
	if err := writeFileAtomic(path, nil); err != nil {
		return nil, err
	}
	return appendMetrics(path, -1)
}

// openMetrics opens path for appending after keeping only the records of
// updates <= keepSteps (a resumed run drops what the interrupted one logged
// after its checkpoint). The trimmed file replaces the old one atomically.
func openMetrics(path string, keepSteps int) (*metricsWriter, error) {
	kept, _, err := readMetrics(path, keepSteps)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	for _, r := range kept {
		line, _ := json.Marshal(r)
		buf.Write(line)
		buf.WriteByte('\n')
	}
	if err := writeFileAtomic(path, buf.Bytes()); err != nil {
		return nil, err
	}
	return appendMetrics(path, keepSteps)
}

// appendMetrics opens path and the run's TensorBoard file for appending,
// the latter keeping the events of updates <= keepSteps (< 0: none).
func appendMetrics(path string, keepSteps int) (*metricsWriter, error) {
	tb, err := openTensorBoard(path, keepSteps)
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		tb.Close()
		return nil, fmt.Errorf("train: metrics: %w", err)
	}
	return &metricsWriter{f: f, w: bufio.NewWriter(f), tb: tb}, nil
}

// readMetrics reads the records of a metrics file with Step <= maxStep; a
// missing file is empty. A last line that does not parse is an append cut
// short (a full disk, a crash): it is dropped and described in torn. Any
// other malformed line is an error naming its number.
func readMetrics(path string, maxStep int) (recs []Record, torn string, err error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("train: metrics: %w", err)
	}
	lines := bytes.Split(data, []byte("\n"))
	last := len(lines) - 1
	for last >= 0 && len(bytes.TrimSpace(bytes.Trim(lines[last], "\x00"))) == 0 {
		last--
	}
	for i, line := range lines[:last+1] {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var r Record
		if err := json.Unmarshal(line, &r); err != nil {
			if i == last {
				torn = fmt.Sprintf("%s: dropped its last line %d, cut short (%v): %q", path, i+1, err, truncateString(string(line), 60))
				break
			}
			return nil, "", fmt.Errorf("train: %s line %d: %w (a damaged line before the last: remove it, or start over with -overwrite)", path, i+1, err)
		}
		if r.Step <= maxStep {
			recs = append(recs, r)
		}
	}
	return recs, torn, nil
}

// missingRecords checks the records a resume read from metrics.jsonl (at
// path) against the checkpoint of update step: want is the number of
// records the run had logged up to it (0 where the checkpoint predates
// that count), logEvery the run's interval. It returns a warning naming
// the file and the updates whose records are missing ("" if none are):
// those of update 0 and of the multiples of logEvery not in hist, or,
// where the interval changed, how many of the counted records are gone.
func missingRecords(path string, hist []Record, step, want, logEvery int) string {
	if step == 0 && len(hist) > 0 {
		return ""
	}
	have := make(map[int]bool, len(hist))
	for _, r := range hist {
		have[r.Step] = true
	}
	// The expected updates that are missing, as runs of consecutive ones.
	var gaps []string
	n := 0
	for s := 0; s <= step; s += logEvery {
		if have[s] {
			continue
		}
		from := s
		for s+logEvery <= step && !have[s+logEvery] {
			s += logEvery
		}
		n += (s-from)/logEvery + 1
		switch {
		case len(gaps) == 5:
			gaps = append(gaps, "...")
		case len(gaps) > 5:
		case s == from:
			gaps = append(gaps, strconv.Itoa(from))
		default:
			gaps = append(gaps, fmt.Sprintf("%d-%d", from, s))
		}
	}
	lost := want > 0 && len(hist) < want
	switch {
	case len(hist) == 0:
		return fmt.Sprintf("%s holds no record up to the checkpoint's update %d (deleted or emptied?): the summary and plots cover only the updates from here on", path, step)
	case lost && n > 0:
		return fmt.Sprintf("%s lacks %d of the %d records logged up to update %d, those of updates %s: the summary and plots will miss them", path, want-len(hist), want, step, strings.Join(gaps, ", "))
	case lost:
		return fmt.Sprintf("%s lacks %d of the %d records logged up to update %d: the summary and plots will miss them", path, want-len(hist), want, step)
	case want == 0 && n > 0:
		return fmt.Sprintf("%s lacks the records of updates %s (every %d up to the checkpoint's update %d): the summary and plots will miss them", path, strings.Join(gaps, ", "), logEvery, step)
	}
	return ""
}

// Write appends one record as a JSON line. The zero metricsWriter (of a
// rank other than 0) writes nothing.
func (m *metricsWriter) Write(r Record) error {
	if m.f == nil {
		return nil
	}
	if err := r.finite(); err != nil {
		return err
	}
	line, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("train: metrics: %w", err)
	}
	m.w.Write(line)
	if err := m.w.WriteByte('\n'); err != nil {
		return fmt.Errorf("train: metrics: %w", err)
	}
	if err := m.w.Flush(); err != nil {
		return err
	}
	return m.tb.Write(r)
}

// Sync flushes the records to disk.
func (m *metricsWriter) Sync() error {
	if m.f == nil {
		return nil
	}
	if err := m.w.Flush(); err != nil {
		return err
	}
	return m.f.Sync()
}

// Close flushes and closes the file.
func (m *metricsWriter) Close() error {
	if m.f == nil {
		return nil
	}
	return firstError(m.Sync(), m.f.Close(), m.tb.Close())
}

// firstError returns the first of errs that is not nil: the error of
// steps that all run, in order, even after one fails (closing files).
func firstError(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// writeFileAtomic writes data to path through internal/atomicfile, so a
// crash leaves either the old or the new file (mode 0644 less the umask).
func writeFileAtomic(path string, data []byte) error {
	if err := atomicfile.WriteFile(path, data); err != nil {
		return fmt.Errorf("train: %w", err)
	}
	return nil
}
