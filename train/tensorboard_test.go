package train

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/hilbert-ml/hilbert/internal/tfevent"
)

// TestTensorBoardResume: the event file mirrors metrics.jsonl as records
// are logged, and a resume from update 3 keeps updates 0 to 3 (with their
// wall times) and appends the rest once.
func TestTensorBoardResume(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "metrics.jsonl")
	tbPath := filepath.Join(dir, TensorBoardDir, TensorBoardFile)
	val := 4.5
	rec := func(step int) Record {
		return Record{Step: step, Loss: 10 - float64(step), Tokens: int64(step) * 64, TokensPerS: 1000, ValLoss: &val}
	}
	read := func() []tfevent.Event {
		t.Helper()
		data, err := os.ReadFile(tbPath)
		if err != nil {
			t.Fatal(err)
		}
		events, n, err := tfevent.Decode(data)
		if err != nil || n != len(data) {
			t.Fatalf("%s: %d of %d bytes: %v", tbPath, n, len(data), err)
		}
		return events
	}
	m, err := createMetrics(path)
	if err != nil {
		t.Fatal(err)
	}
	for step := range 6 {
		if err := m.Write(rec(step)); err != nil {
			t.Fatal(err)
		}
		if got := len(read()); got != step+2 {
			t.Fatalf("after update %d: %d events, want %d (written as logged)", step, got, step+2)
		}
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	before := read()
	m, err = openMetrics(path, 3)
	if err != nil {
		t.Fatal(err)
	}
	for step := 4; step < 8; step++ {
		if err := m.Write(rec(step)); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	events := read()
	if events[0].FileVersion != tfevent.FileVersion {
		t.Fatalf("first event %+v, want the file version", events[0])
	}
	for i, e := range events[1:] {
		if e.Step != int64(i) || e.FileVersion != "" {
			t.Fatalf("event %d: step %d (version %q), want step %d once", i+1, e.Step, e.FileVersion, i)
		}
		if i <= 3 && e.WallTime != before[i+1].WallTime {
			t.Errorf("update %d: wall time %v, was %v before the resume", i, e.WallTime, before[i+1].WallTime)
		}
		want := map[string]float32{"perf/tokens": float32(i * 64), "val/loss": 4.5}
		if i > 0 {
			want["train/loss"] = float32(10 - i)
			want["perf/tokens_per_s"] = 1000
		}
		for _, s := range e.Scalars {
			if v, ok := want[s.Tag]; ok && v != s.Value {
				t.Errorf("update %d: %s = %v, want %v", i, s.Tag, s.Value, v)
			}
			delete(want, s.Tag)
		}
		if len(want) > 0 {
			t.Errorf("update %d: missing %v", i, want)
		}
	}
	if len(events) != 9 {
		t.Fatalf("%d events, want the version and updates 0 to 7", len(events))
	}
}
