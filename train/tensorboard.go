package train

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/hilbert-ml/hilbert/internal/tfevent"
)

// TensorBoardDir is the folder of a run's TensorBoard event file, beside
// metrics.jsonl: `tensorboard --logdir RUNS` shows every run.
const TensorBoardDir = "tb"

// TensorBoardFile is the name of the event file in TensorBoardDir. One
// file per run, named alike across resumes, so a resumed run rewrites it
// without the records after its checkpoint instead of adding a second file
// whose steps overlap the first.
const TensorBoardFile = "events.out.tfevents.hilbert"

// scalars lists the TensorBoard scalars of a record, tagged by the names
// of metrics.jsonl's fields (grouped as TensorBoard groups tags by their
// prefix).
func scalars(r Record) []tfevent.Scalar {
	var s []tfevent.Scalar
	add := func(tag string, v float64) { s = append(s, tfevent.Scalar{Tag: tag, Value: float32(v)}) }
	opt := func(tag string, v *float64) {
		if v != nil {
			add(tag, *v)
		}
	}
	if r.Step > 0 {
		add("train/loss", r.Loss)
		add("train/lr_scale", r.LRScale)
		add("train/grad_norm", r.GradNorm)
		add("perf/tokens_per_s", r.TokensPerS)
		opt("perf/comm_s", r.CommS)
	}
	add("perf/tokens", float64(r.Tokens))
	opt("val/loss", r.ValLoss)
	opt("head/diameter", r.Diameter)
	opt("head/head_lr", r.LR)
	opt("head/hilbert_rms", r.HilbertRMS)
	return s
}

// tbWriter appends a run's records to its event file as they are logged.
type tbWriter struct{ f *os.File }

// openTensorBoard opens the event file of the run whose metrics.jsonl is
// metricsPath for appending, keeping the records of updates <= keepSteps
// (keepSteps < 0: a fresh run, which starts an empty file). The kept
// records keep their wall times; the file is rewritten atomically.
func openTensorBoard(metricsPath string, keepSteps int) (*tbWriter, error) {
	dir := filepath.Join(filepath.Dir(metricsPath), TensorBoardDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("train: tensorboard: %w", err)
	}
	path := filepath.Join(dir, TensorBoardFile)
	var keep []tfevent.Event
	if keepSteps >= 0 {
		data, err := os.ReadFile(path)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("train: tensorboard: %w", err)
		}
		// A torn or damaged tail (a crash mid-append) is dropped: the
		// records of metrics.jsonl after the checkpoint are logged again.
		events, _, _ := tfevent.Decode(data)
		for _, e := range events {
			if e.FileVersion == "" && e.Step <= int64(keepSteps) {
				keep = append(keep, e)
			}
		}
	}
	var buf []byte
	buf = tfevent.AppendRecord(buf, tfevent.Event{WallTime: wallTime(time.Now()), FileVersion: tfevent.FileVersion}.Marshal())
	for _, e := range keep {
		buf = tfevent.AppendRecord(buf, e.Marshal())
	}
	if err := writeFileAtomic(path, buf); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("train: tensorboard: %w", err)
	}
	return &tbWriter{f: f}, nil
}

func wallTime(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// Write appends the record's scalars as one event, in one write so that a
// reader sees whole records.
func (w *tbWriter) Write(r Record) error {
	if w == nil {
		return nil
	}
	e := tfevent.Event{WallTime: wallTime(time.Now()), Step: int64(r.Step), Scalars: scalars(r)}
	if _, err := w.f.Write(tfevent.AppendRecord(nil, e.Marshal())); err != nil {
		return fmt.Errorf("train: tensorboard: %w", err)
	}
	return nil
}

// Close syncs and closes the file.
func (w *tbWriter) Close() error {
	if w == nil {
		return nil
	}
	return firstError(w.f.Sync(), w.f.Close())
}
