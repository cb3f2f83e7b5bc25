package train

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/hilbert-ml/hilbert/data"
	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/safetensors"
)

// writeOtherShards writes shards of the same sizes as writeTinyShards but
// other tokens (another corpus).
func writeOtherShards(t *testing.T, dir string) (train []string, val string) {
	t.Helper()
	gen := func(n, salt int) []int32 {
		out := make([]int32, n)
		for i := range out {
			out[i] = int32((i*11 + salt) % tinyVocab)
		}
		return out
	}
	for i := range 2 {
		p := filepath.Join(dir, "other_train_"+string(rune('0'+i))+".bin")
		if err := data.WriteShard(p, gen(3000, i), false); err != nil {
			t.Fatal(err)
		}
		train = append(train, p)
	}
	val = filepath.Join(dir, "other_val.bin")
	if err := data.WriteShard(val, gen(1000, 5), false); err != nil {
		t.Fatal(err)
	}
	return train, val
}

func resumeError(t *testing.T, cfg Config) error {
	t.Helper()
	tr, err := New(cpu.New(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	return tr.Resume()
}

// Every setting that changes the numbers, and the data, must match the
// checkpoint's; the error lists each difference with both values. Settings
// that only change what is logged may change, and the data may move.
func TestResumeListsEveryDifference(t *testing.T) {
	shards, val := writeTinyShards(t, t.TempDir())
	cfg := tinyConfig(t, t.TempDir(), shards, val)
	cfg.Steps = 4
	if _, err := runToEnd(t, cfg, false, 0); err != nil {
		t.Fatal(err)
	}
	otherShards, otherVal := writeOtherShards(t, t.TempDir())
	c := cfg
	c.ClipNorm, c.MuonLR, c.HeadLR, c.Autocast, c.ValTokens = 0.5, 0.01, 0.003, "bf16", 200
	c.Warmup, c.Seed, c.PanelSeqs, c.BlockRows = 2, 9, 2, 7
	c.TrainShards, c.ValShard = otherShards, otherVal
	err := resumeError(t, c)
	if err == nil {
		t.Fatal("resume accepted changed settings and data")
	}
	t.Log(err)
	for _, want := range []string{
		"clip: checkpoint 1, this run 0.5",
		"muon_lr: checkpoint 0.008, this run 0.01",
		"head_lr: checkpoint 0.0256, this run 0.003",
		"autocast: checkpoint off, this run bf16",
		"val_tokens: checkpoint 300, this run 200",
		"warmup: checkpoint 0, this run 2",
		"seed: checkpoint 1, this run 9",
		"panel_seqs: checkpoint 3, this run 2",
		"block_rows: checkpoint 0, this run 7",
		"train_data: checkpoint crc32c:",
		"val_data: checkpoint crc32c:",
		"differ from the checkpoint's in 11",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}

	// The same data elsewhere, and new logging intervals, are accepted.
	moved := t.TempDir()
	var movedShards []string
	for _, p := range append(append([]string{}, shards...), val) {
		b, _ := os.ReadFile(p)
		q := filepath.Join(moved, "x"+filepath.Base(p))
		os.WriteFile(q, b, 0o644)
		movedShards = append(movedShards, q)
	}
	if _, err := data.WriteManifest(moved); err != nil { // as `hilbert prepare -manifest` does
		t.Fatal(err)
	}
	c = cfg
	c.TrainShards, c.ValShard = movedShards[:2], movedShards[2]
	c.ValEvery, c.DiagEvery, c.LogEvery, c.CheckpointEvery = 1, 1, 2, 1
	if err := resumeError(t, c); err != nil {
		t.Errorf("resume refused moved data and new intervals: %v", err)
	}
}

// -steps may grow on resume: the schedule keeps its horizon (the run's
// original steps) and updates past it run at the final multiplier, exactly
// as in a run started with that horizon. Changed intervals leave the
// trained numbers as they were.
func TestResumeExtendsAFinishedRun(t *testing.T) {
	shards, val := writeTinyShards(t, t.TempDir())
	straight := tinyConfig(t, t.TempDir(), shards, val)
	straight.Steps, straight.ScheduleSteps = 12, 8
	want, err := runToEnd(t, straight, false, 0)
	if err != nil {
		t.Fatal(err)
	}

	cfg := tinyConfig(t, t.TempDir(), shards, val)
	cfg.Steps = 8
	if _, err := runToEnd(t, cfg, false, 0); err != nil {
		t.Fatal(err)
	}
	cfg.Steps = 12
	cfg.ValEvery, cfg.DiagEvery, cfg.CheckpointEvery = 3, 2, 5
	got, err := runToEnd(t, cfg, true, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got.Config().ScheduleSteps != 8 || got.Config().WarmupSteps() != 0 {
		t.Errorf("the resumed run's schedule is %d updates, warmup %d; want the checkpoint's 8, 0", got.Config().ScheduleSteps, got.Config().WarmupSteps())
	}
	byStep := map[int]Record{}
	for _, r := range want.History() {
		byStep[r.Step] = r
	}
	n := 0
	for _, r := range got.History() {
		w, ok := byStep[r.Step]
		if !ok || r.Step == 0 {
			continue
		}
		n++
		if r.Loss != w.Loss || r.GradNorm != w.GradNorm || r.LRScale != w.LRScale {
			t.Errorf("update %d: extended run loss %v grad %v lr scale %v, straight run %v %v %v", r.Step, r.Loss, r.GradNorm, r.LRScale, w.Loss, w.GradNorm, w.LRScale)
		}
		if r.Step > 8 && r.LRScale != 0.1 {
			t.Errorf("update %d past the schedule's horizon: lr scale %v, want 0.1", r.Step, r.LRScale)
		}
	}
	if n != 12 {
		t.Errorf("%d updates compared, want 12", n)
	}
	// Steps below the checkpoint's are refused.
	cfg.Steps = 5
	if err := resumeError(t, cfg); err == nil || !strings.Contains(err.Error(), "past steps = 5") {
		t.Errorf("resume with fewer steps than the checkpoint: %v", err)
	}
}

// A torn last line of metrics.jsonl (an append cut short) neither blocks a
// resume nor a fresh run; a damaged line before the last is an error.
func TestTornMetricsLine(t *testing.T) {
	shards, val := writeTinyShards(t, t.TempDir())
	straight, err := runToEnd(t, tinyConfig(t, t.TempDir(), shards, val), false, 0)
	if err != nil {
		t.Fatal(err)
	}
	cfg := tinyConfig(t, t.TempDir(), shards, val)
	if _, err := runToEnd(t, cfg, false, 6); !errors.Is(err, ErrInterrupted) {
		t.Fatal(err)
	}
	path := filepath.Join(cfg.RunsDir, cfg.Name, "metrics.jsonl")
	// Lines past the checkpoint (as a kill -9 leaves them), then a torn one.
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"step":7,"loss":3.1,"lr_scale":0.5}` + "\n" + `{"step":8,"loss":3.1,"lr_sc`)
	f.Close()
	tr, err := New(cpu.New(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Resume(); err != nil {
		t.Fatalf("a torn last line blocked resume: %v", err)
	}
	if w := tr.Warnings(); len(w) != 1 || !strings.Contains(w[0], "cut short") {
		t.Errorf("warnings %q", w)
	}
	tr.Close()
	resumed, err := runToEnd(t, cfg, true, 0)
	if err != nil {
		t.Fatal(err)
	}
	a, b := straight.History(), resumed.History()
	if len(a) != len(b) {
		t.Fatalf("%d records resumed, %d straight", len(b), len(a))
	}
	for i := range a {
		if !sameRecord(a[i], b[i]) {
			t.Errorf("update %d differs", a[i].Step)
		}
	}
	data, _ := os.ReadFile(path)
	if bytes.Contains(data, []byte(`"loss":3.1`)) || bytes.Count(data, []byte("\n")) != len(a) {
		t.Errorf("metrics.jsonl was not cut back to the checkpoint and rewritten without the torn line:\n%s", data)
	}

	// A fresh run over a torn file (a run that died before its first
	// checkpoint).
	fresh := tinyConfig(t, t.TempDir(), shards, val)
	fresh.Steps = 2
	os.MkdirAll(filepath.Join(fresh.RunsDir, fresh.Name), 0o755)
	os.WriteFile(filepath.Join(fresh.RunsDir, fresh.Name, "metrics.jsonl"), []byte("{\"step\":0,\"val_loss\":4.5}\n{\"step\":1,\"lo"), 0o644)
	if tr, err := runToEnd(t, fresh, false, 0); err != nil || len(tr.History()) != 3 {
		t.Errorf("fresh run over a torn metrics file: %v, %d records", err, len(tr.History()))
	}

	// A damaged line in the middle is an error naming it.
	os.WriteFile(path, []byte("{\"step\":0,\"val_loss\":4.5}\n{oops\n{\"step\":1,\"loss\":4}\n"), 0o644)
	tr, err = New(cpu.New(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if err := tr.Resume(); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("damaged middle line: %v", err)
	}
}

// rewriteTensor replaces one tensor's values in a safetensors file.
func rewriteTensor(t *testing.T, path, name string, edit func(v []float32)) {
	t.Helper()
	f, err := safetensors.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []safetensors.Tensor
	found := false
	for _, in := range f.Tensors() {
		v := make([]float32, in.Numel())
		if err := f.ReadFloat32(in.Name, in.Shape, v); err != nil {
			t.Fatal(err)
		}
		if in.Name == name {
			edit(v)
			found = true
		}
		out = append(out, safetensors.Tensor{Name: in.Name, DType: safetensors.F32, Shape: in.Shape, Data: safetensors.EncodeFloat32(v)})
	}
	meta := f.Metadata()
	f.Close()
	if !found {
		t.Fatalf("%s has no tensor %q", path, name)
	}
	if err := safetensors.Save(path, out, meta); err != nil {
		t.Fatal(err)
	}
}

// A checkpoint holding NaN or Inf (in a weight or an optimizer moment) is
// refused with the tensor's name, and the model is left as it was.
func TestResumeRefusesNonFiniteValues(t *testing.T) {
	shards, val := writeTinyShards(t, t.TempDir())
	cfg := tinyConfig(t, t.TempDir(), shards, val)
	cfg.Steps = 4
	ckpt := filepath.Join(cfg.RunsDir, cfg.Name, "checkpoints", "step-0000004")
	optimName := func() string {
		f, err := safetensors.Open(filepath.Join(ckpt, "optim.safetensors"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		for _, in := range f.Tensors() {
			if strings.Contains(in.Name, "head") {
				return in.Name
			}
		}
		return f.Tensors()[0].Name
	}
	for _, c := range []struct {
		file, tensor string
		value        float32
	}{
		{"model.safetensors", "blocks.0.attn.q.weight", float32(math.NaN())},
		{"model.safetensors", "head.weight", float32(math.Inf(-1))},
		{"optim.safetensors", "", float32(math.NaN())},
	} {
		os.RemoveAll(filepath.Join(cfg.RunsDir, cfg.Name))
		if _, err := runToEnd(t, cfg, false, 0); err != nil {
			t.Fatal(err)
		}
		name := c.tensor
		if name == "" {
			name = optimName()
		}
		rewriteTensor(t, filepath.Join(ckpt, c.file), name, func(v []float32) { v[len(v)/2] = c.value })
		tr, err := New(cpu.New(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		before := tr.Model().Parameters()[1].Float32s()
		err = tr.Resume()
		after := tr.Model().Parameters()[1].Float32s()
		tr.Close()
		if err == nil || !strings.Contains(err.Error(), `"`+name+`"`) || !strings.Contains(err.Error(), c.file) {
			t.Errorf("%s %s = %v: resume said %v", c.file, name, c.value, err)
		}
		if !reflect.DeepEqual(before, after) {
			t.Errorf("%s: the refused checkpoint changed the model", name)
		}
	}
}

// NoWarmup asks for no warmup; the default is floor(0.1 T).
func TestWarmupZeroMeansNone(t *testing.T) {
	shards, val := writeTinyShards(t, t.TempDir())
	for _, c := range []struct {
		warmup    int
		wantScale float64
		wantW     int
	}{{0, 0, 1}, {NoWarmup, 1, 0}, {3, 0, 3}} {
		cfg := tinyConfig(t, t.TempDir(), shards, val)
		cfg.Steps, cfg.Warmup = 10, c.warmup
		tr, err := runToEnd(t, cfg, false, 0)
		if err != nil {
			t.Fatal(err)
		}
		if got := tr.History()[1].LRScale; got != c.wantScale || tr.Config().WarmupSteps() != c.wantW {
			t.Errorf("warmup %d: update 1 at lr scale %v, warmup %d updates; want %v, %d", c.warmup, got, tr.Config().WarmupSteps(), c.wantScale, c.wantW)
		}
		// WithDefaults is idempotent.
		again, err := tr.Config().WithDefaults()
		if err != nil || again.Warmup != tr.Config().Warmup {
			t.Errorf("warmup %d: defaults applied twice give %d (%v)", c.warmup, again.Warmup, err)
		}
	}
}

// Negative intervals and panel sizes, and non-finite learning rates, are
// errors naming the field (a negative panel once panicked in validate).
func TestConfigRejectsOutOfRangeValues(t *testing.T) {
	base := Config{Preset: "cpu-128", TrainShards: []string{"x"}, ValShard: "y", Steps: 10}
	cases := []struct {
		mutate func(c *Config)
		want   string
	}{
		{func(c *Config) { c.PanelPositions = -5 }, "panel_positions = -5"},
		{func(c *Config) { c.PanelSeqs = -1 }, "panel_seqs = -1"},
		{func(c *Config) { c.ValEvery = -2 }, "val_every = -2"},
		{func(c *Config) { c.DiagEvery = -1 }, "diag_every = -1"},
		{func(c *Config) { c.LogEvery = -1 }, "log_every = -1"},
		{func(c *Config) { c.CheckpointEvery = -1 }, "checkpoint_every = -1"},
		{func(c *Config) { c.MuonLR = math.NaN() }, "muon_lr = NaN"},
		{func(c *Config) { c.HeadLR = -1 }, "head_lr = -1"},
		{func(c *Config) { c.EmbedLR = math.Inf(1) }, "embed_lr = +Inf"},
		{func(c *Config) { c.ClipNorm = -1 }, "clip = -1"},
		{func(c *Config) { c.BlockRows = -1 }, "block_rows = -1"},
		{func(c *Config) { c.Warmup = -3 }, "warmup = -3"},
		{func(c *Config) { c.Warmup = 10 }, "warmup = 10"},
	}
	for _, c := range cases {
		cfg := base
		c.mutate(&cfg)
		_, err := cfg.WithDefaults()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want mention of %q", err, c.want)
		}
	}
}

// Update 0's record is the initial validation alone, and reads back.
func TestUpdateZeroRecord(t *testing.T) {
	v := 10.5
	line, _ := json.Marshal(Record{Step: 0, ValLoss: &v, ElapsedS: 1.5})
	if string(line) != `{"step":0,"tokens":0,"elapsed_s":1.5,"val_loss":10.5}` {
		t.Errorf("update 0 is %s", line)
	}
	var r Record
	if err := json.Unmarshal(line, &r); err != nil || r.Step != 0 || *r.ValLoss != v {
		t.Errorf("read back %+v, %v", r, err)
	}
	line, _ = json.Marshal(Record{Step: 1, Loss: 3})
	if !strings.Contains(string(line), `"lr_scale":0`) {
		t.Errorf("update 1 lacks its fields: %s", line)
	}
}

// summary.md explains the run: settings, the first and final losses, the
// quantities and the bound, and a caveat for a short run.
func TestSummaryExplainsTheRun(t *testing.T) {
	shards, val := writeTinyShards(t, t.TempDir())
	cfg := tinyConfig(t, t.TempDir(), shards, val)
	tr, err := runToEnd(t, cfg, false, 0)
	if err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(tr.Dir(), "summary.md"))
	if err != nil {
		t.Fatal(err)
	}
	s := tr.Summary()
	for _, want := range []string{
		"## Settings", "| peak learning rates | Muon 0.008", "| schedule | linear warmup over 1 updates",
		fmt.Sprintf("| validation loss | %.4f (initial model) | %.4f (update 14) |", s.StartValLoss, s.ValLoss), "| training loss | ", "RowNorm bound 2·lr_T = ", "What the numbers mean",
		"**D(S_T)** is the row diameter", "**Hilbert RMS**", "A short run",
	} {
		if !strings.Contains(string(md), want) {
			t.Errorf("summary.md lacks %q:\n%s", want, md)
		}
	}
	if math.IsNaN(s.StartValLoss) || math.IsNaN(s.FirstLoss) || !(s.StartValLoss > s.ValLoss) {
		t.Errorf("summary %+v: want a starting validation loss above the final one", s)
	}
}

// The log axes are labelled even over less than a decade, and linear ones
// with enough digits to tell the labels apart.
func TestAxisLabels(t *testing.T) {
	n := 0
	for _, tk := range (logTicks{}).Ticks(1.4e-3, 2.6e-3) {
		if tk.Label != "" {
			n++
		}
	}
	if n < 2 {
		t.Errorf("%d labelled ticks on a log axis from 1.4e-3 to 2.6e-3", n)
	}
	seen := map[string]bool{}
	for _, tk := range (distinctTicks{}).Ticks(10.6, 10.9) {
		if tk.Label == "" {
			continue
		}
		if seen[tk.Label] {
			t.Errorf("label %q twice on a linear axis from 10.6 to 10.9", tk.Label)
		}
		seen[tk.Label] = true
	}
	if len(seen) < 2 {
		t.Errorf("labels %v", seen)
	}
}

// compare draws each head in one colour across its seeds, with one legend
// entry per head, and RowNorm's bound dashed.
func TestComparisonSeriesColourByHead(t *testing.T) {
	d, lr := 0.002, 0.001
	rec := []Record{{Step: 1, Diameter: &d, LR: &lr, ValLoss: &d, HilbertRMS: &d}}
	var runs []RunResult
	for _, h := range []string{"adamw", "rownorm"} {
		for seed := range uint64(3) {
			runs = append(runs, RunResult{Summary: Summary{Head: h, Seed: seed}, History: rec})
		}
	}
	val, diam, _ := comparisonSeries(runs)
	colours := map[string]map[any]bool{}
	labels := map[string]int{}
	for i, s := range val {
		h := runs[i].Summary.Head
		if colours[h] == nil {
			colours[h] = map[any]bool{}
		}
		colours[h][s.Color] = true
		if s.Label != "" {
			labels[h]++
		}
	}
	if len(colours["adamw"]) != 1 || len(colours["rownorm"]) != 1 || reflect.DeepEqual(colours["adamw"], colours["rownorm"]) {
		t.Errorf("colours by head: %v", colours)
	}
	if labels["adamw"] != 1 || labels["rownorm"] != 1 {
		t.Errorf("legend entries by head: %v", labels)
	}
	last := diam[len(diam)-1]
	if !last.Dashed || !strings.Contains(last.Label, "bound") {
		t.Errorf("the diameter plot's last series is %+v, want the dashed bound", last)
	}
}

// A version-1 checkpoint (no settings list, no data fingerprints) still
// resumes, compared on the settings it recorded.
func TestVersion1CheckpointResumes(t *testing.T) {
	shards, val := writeTinyShards(t, t.TempDir())
	cfg := tinyConfig(t, t.TempDir(), shards, val)
	cfg.Steps = 4
	if _, err := runToEnd(t, cfg, false, 0); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(cfg.RunsDir, cfg.Name, "checkpoints", "step-0000004", "state.json")
	var st map[string]any
	b, _ := os.ReadFile(path)
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	delete(st, "settings")
	delete(st, stateChecksumKey) // as old as version 1
	st["version"] = 1
	b, _ = json.Marshal(st)
	os.WriteFile(path, b, 0o644)
	if err := resumeError(t, cfg); err != nil {
		t.Errorf("version 1: %v", err)
	}
	c := cfg
	c.Head = "adamw"
	if err := resumeError(t, c); err == nil || !strings.Contains(err.Error(), "head: checkpoint rownorm, this run adamw") {
		t.Errorf("version 1, other head: %v", err)
	}
}

// An interrupted run writes its checkpoint, then summary.md (saying where
// it stopped) and the plots of what it has.
func TestInterruptedRunWritesItsReport(t *testing.T) {
	shards, val := writeTinyShards(t, t.TempDir())
	cfg := tinyConfig(t, t.TempDir(), shards, val)
	if _, err := runToEnd(t, cfg, false, 5); !errors.Is(err, ErrInterrupted) {
		t.Fatalf("run: %v, want ErrInterrupted", err)
	}
	dir := filepath.Join(cfg.RunsDir, cfg.Name)
	b, err := os.ReadFile(filepath.Join(dir, "summary.md"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "**Interrupted at update 5 of 14.**"; !strings.Contains(string(b), want) {
		t.Errorf("summary.md lacks %q:\n%s", want, b)
	}
	for _, f := range []string{"loss.png", "diameter.png", "hilbert_rms.png"} {
		if info, err := os.Stat(filepath.Join(dir, f)); err != nil || info.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	// The finished run's summary does not say so.
	c := cfg
	if _, err := runToEnd(t, c, true, 0); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "summary.md")); strings.Contains(string(b), "**Interrupted at") {
		t.Errorf("the finished run's summary says it was interrupted:\n%s", b)
	}
}
