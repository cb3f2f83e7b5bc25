package train

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
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
	// ValLoss is the mean token cross-entropy on the validation prefix.
	ValLoss *float64 `json:"val_loss,omitempty"`
	// Diameter is the exact row diameter D(S_t) of the head step.
	Diameter *float64 `json:"diameter,omitempty"`
	// LR is the head's scheduled learning rate (D(S_t) <= 2 LR for RowNorm).
	LR *float64 `json:"head_lr,omitempty"`
	// HilbertRMS is the head step's Hilbert RMS over the panel.
	HilbertRMS *float64 `json:"hilbert_rms,omitempty"`
}

// metricsWriter appends records to metrics.jsonl.
type metricsWriter struct {
	f *os.File
	w *bufio.Writer
}

// openMetrics opens path for appending after keeping only the records of
// updates <= keepSteps (a resumed run drops what the interrupted one logged
// after its checkpoint). The trimmed file replaces the old one atomically.
func openMetrics(path string, keepSteps int) (*metricsWriter, error) {
	kept, err := readMetrics(path, keepSteps)
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
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("train: metrics: %w", err)
	}
	return &metricsWriter{f: f, w: bufio.NewWriter(f)}, nil
}

// readMetrics reads the records of a metrics file with Step <= maxStep; a
// missing file is empty. A malformed line is an error naming its number.
func readMetrics(path string, maxStep int) ([]Record, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("train: metrics: %w", err)
	}
	var out []Record
	for i, line := range bytes.Split(data, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var r Record
		if err := json.Unmarshal(line, &r); err != nil {
			return nil, fmt.Errorf("train: %s line %d: %w", path, i+1, err)
		}
		if r.Step <= maxStep {
			out = append(out, r)
		}
	}
	return out, nil
}

// Write appends one record as a JSON line.
func (m *metricsWriter) Write(r Record) error {
	line, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("train: metrics: %w", err)
	}
	m.w.Write(line)
	if err := m.w.WriteByte('\n'); err != nil {
		return fmt.Errorf("train: metrics: %w", err)
	}
	return m.w.Flush()
}

// Sync flushes the records to disk.
func (m *metricsWriter) Sync() error {
	if err := m.w.Flush(); err != nil {
		return err
	}
	return m.f.Sync()
}

// Close flushes and closes the file.
func (m *metricsWriter) Close() error {
	err := m.Sync()
	if e := m.f.Close(); err == nil {
		err = e
	}
	return err
}

// writeFileAtomic writes data to a temporary file beside path, syncs it and
// renames it over path, so a crash leaves either the old or the new file.
func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(dirOf(path), ".tmp-*")
	if err != nil {
		return fmt.Errorf("train: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("train: writing %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("train: writing %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("train: writing %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("train: %w", err)
	}
	return nil
}

func dirOf(path string) string {
	for i := len(path) - 1; i >= 0; i-- {
		if os.IsPathSeparator(path[i]) {
			return path[:i+1]
		}
	}
	return "."
}
