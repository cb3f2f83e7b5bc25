package train

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hilbert-ml/hilbert/device/cpu"
)

// A run that diverges says so, naming the metric and the update, where
// the JSON encoder would say "unsupported value: NaN": at a validation
// (the first place an exploding learning rate shows) and at any record.
func TestDivergenceIsNamed(t *testing.T) {
	shards, val := writeTinyShards(t, t.TempDir())
	cfg := tinyConfig(t, t.TempDir(), shards, val)
	tr, err := New(cpu.New(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	p := tr.Model().Parameters()[0]
	v := p.Float32s()
	for i := range v {
		v[i] = float32(math.Inf(1))
	}
	p.SetFloat32(v)
	r := Record{Step: 7}
	err = tr.validate(&r)
	if err == nil || !strings.Contains(err.Error(), "validation loss is NaN at update 7: the run diverged; lower the learning rates") {
		t.Errorf("validation of a diverged model: %v", err)
	}

	m, err := createMetrics(filepath.Join(t.TempDir(), "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	inf, nan := math.Inf(1), math.NaN()
	for _, c := range []struct {
		r    Record
		want string
	}{
		{Record{Step: 3, Loss: nan}, "training loss is NaN at update 3"},
		{Record{Step: 4, Loss: 1, GradNorm: inf}, "gradient norm is +Inf at update 4"},
		{Record{Step: 5, Loss: 1, Diameter: &inf}, "D(S_t) is +Inf at update 5"},
		{Record{Step: 6, Loss: 1, ValLoss: &nan}, "validation loss is NaN at update 6"},
		{Record{Step: 7, Loss: 1}, ""},
	} {
		err := m.Write(c.r)
		if (c.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), c.want) {
			t.Errorf("Write(%+v): %v, want %q", c.r, err, c.want)
		}
	}
}

// A resume whose metrics.jsonl lost records (deleted, emptied, lines
// removed) warns, naming the file and the updates.
func TestResumeWarnsOfMissingRecords(t *testing.T) {
	shards, val := writeTinyShards(t, t.TempDir())
	cfg := tinyConfig(t, t.TempDir(), shards, val)
	cfg.Steps = 8 // records of updates 0 to 8
	metrics := filepath.Join(cfg.RunsDir, cfg.Name, "metrics.jsonl")
	state := filepath.Join(cfg.RunsDir, cfg.Name, "checkpoints", "step-0000008", "state.json")
	dropLines := func(steps ...int) func() {
		return func() {
			b, _ := os.ReadFile(metrics)
			lines := strings.SplitAfter(string(b), "\n")
			var out []string
			for i, l := range lines {
				if !slices.Contains(steps, i) {
					out = append(out, l)
				}
			}
			os.WriteFile(metrics, []byte(strings.Join(out, "")), 0o644)
		}
	}
	for _, c := range []struct {
		name   string
		damage func()
		want   string
	}{
		{"intact", func() {}, ""},
		{"lines removed", dropLines(3, 4, 6), "lacks 3 of the 9 records logged up to update 8, those of updates 3-4, 6"},
		{"first line removed", dropLines(0), "those of updates 0"},
		{"deleted", func() { os.Remove(metrics) }, "holds no record up to the checkpoint's update 8"},
		{"emptied", func() { os.WriteFile(metrics, nil, 0o644) }, "holds no record"},
		{"an older checkpoint, lines removed", func() {
			dropLines(5)()
			editState(t, state, func(m map[string]any) { delete(m, "metrics_records"); delete(m, stateChecksumKey) })
		}, "lacks the records of updates 5 (every 1 up to the checkpoint's update 8)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			os.RemoveAll(filepath.Join(cfg.RunsDir, cfg.Name))
			if _, err := runToEnd(t, cfg, false, 0); err != nil {
				t.Fatal(err)
			}
			c.damage()
			tr, err := New(cpu.New(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			if err := tr.Resume(); err != nil {
				t.Fatal(err)
			}
			var got string
			for _, w := range tr.Warnings() {
				if strings.Contains(w, "metrics.jsonl") {
					got += w
				}
			}
			if (c.want == "") != (got == "") || !strings.Contains(got, c.want) || c.want != "" && !strings.Contains(got, metrics) {
				t.Errorf("warning %q, want %q", got, c.want)
			}
		})
	}
}

func TestMissingRecordsRanges(t *testing.T) {
	recs := func(steps ...int) []Record {
		var out []Record
		for _, s := range steps {
			out = append(out, Record{Step: s})
		}
		return out
	}
	for _, c := range []struct {
		hist        []Record
		step, every int
		want        string
	}{
		{recs(0, 10, 20, 30), 35, 10, ""},
		{recs(0, 10, 30), 35, 10, "updates 20 (every 10"},
		{recs(0, 30), 35, 10, "updates 10-20 (every 10"},
		{recs(0, 10), 35, 10, "updates 20-30 (every 10"},
		{recs(10, 11, 12), 12, 1, "updates 0-9 (every 1"},
		{recs(0, 2, 4, 6, 8, 10, 12, 14), 14, 1, "updates 1, 3, 5, 7, 9, ... (every 1"},
		{recs(0), 0, 1, ""},
	} {
		got := missingRecords("m.jsonl", c.hist, c.step, 0, c.every)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%v up to %d every %d: %q, want %q", c.hist, c.step, c.every, got, c.want)
		}
	}
}
