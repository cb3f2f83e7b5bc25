package train

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/hilbert-ml/hilbert/data"
	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/models"
	"github.com/hilbert-ml/hilbert/safetensors"
)

// tinyVocab keeps the diagnostics cheap; the data is a noisy repeating
// pattern, so a small model can learn it and the loss falls.
const tinyVocab = 97

func writeTinyShards(t testing.TB, dir string) (train []string, val string) {
	t.Helper()
	rng := rand.New(rand.NewPCG(3, 4))
	gen := func(n int) []int32 {
		out := make([]int32, n)
		for i := range out {
			if rng.IntN(10) == 0 {
				out[i] = int32(rng.IntN(tinyVocab))
			} else {
				out[i] = int32((i * 7) % tinyVocab)
			}
		}
		return out
	}
	for i := range 2 {
		p := filepath.Join(dir, "tiny_train_"+string(rune('0'+i))+".bin")
		if err := data.WriteShard(p, gen(3000), false); err != nil {
			t.Fatal(err)
		}
		train = append(train, p)
	}
	val = filepath.Join(dir, "tiny_val.bin")
	if err := data.WriteShard(val, gen(1000), false); err != nil {
		t.Fatal(err)
	}
	return train, val
}

func tinyConfig(t testing.TB, runs string, shards []string, val string) Config {
	return Config{
		Name: "tiny", RunsDir: runs,
		Model: models.Config{Layers: 2, Dim: 64, HeadDim: 32, MLPHidden: 128, Vocab: tinyVocab, Context: 16, RoPEBase: 10000, InitStd: 0.02},
		Head:  "rownorm", Seed: 1, DataSeed: 2,
		TrainShards: shards, ValShard: val,
		SeqLen: 16, MicroBatch: 2, BatchSeqs: 4,
		Steps: 14, ValEvery: 5, ValTokens: 300, DiagEvery: 3, PanelSeqs: 3, PanelPositions: 8,
		CheckpointEvery: 4,
	}
}

func runToEnd(t *testing.T, cfg Config, resume bool, stopAfter int) (*Trainer, error) {
	t.Helper()
	return runToEndOn(t, cpu.New(), cfg, resume, stopAfter)
}

// runToEndOn trains cfg on dev (resuming first if asked), cancelling as
// SIGINT would after update stopAfter (0: never), and returns the trainer,
// closed (its lock released) once the run returns.
func runToEndOn(t *testing.T, dev device.Device, cfg Config, resume bool, stopAfter int) (*Trainer, error) {
	t.Helper()
	tr, err := New(dev, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	if resume {
		if err := tr.Resume(); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hook := func(tr *Trainer, r Record) error {
		if stopAfter > 0 && r.Step == stopAfter {
			cancel() // as SIGINT would
		}
		return nil
	}
	err = tr.Run(ctx, hook)
	if cerr := tr.Close(); err == nil {
		err = cerr
	}
	return tr, err
}

func TestInterruptAndResumeMatchesUninterruptedRun(t *testing.T) {
	data := t.TempDir()
	shards, val := writeTinyShards(t, data)

	straightCfg := tinyConfig(t, t.TempDir(), shards, val)
	straight, err := runToEnd(t, straightCfg, false, 0)
	if err != nil {
		t.Fatal(err)
	}

	resumedCfg := tinyConfig(t, t.TempDir(), shards, val)
	_, err = runToEnd(t, resumedCfg, false, 6) // checkpoint at 4, interrupt after 6
	if !errors.Is(err, ErrInterrupted) {
		t.Fatalf("interrupted run: got %v, want ErrInterrupted", err)
	}
	if !HasCheckpoint(resumedCfg) {
		t.Fatal("no checkpoint after the interrupt")
	}
	resumed, err := runToEnd(t, resumedCfg, true, 0)
	if err != nil {
		t.Fatal(err)
	}

	a, b := straight.History(), resumed.History()
	// Update 0 (the initial validation) and every update.
	if len(a) != len(b) || len(a) != straightCfg.Steps+1 {
		t.Fatalf("records: uninterrupted %d, resumed %d, want %d", len(a), len(b), straightCfg.Steps+1)
	}
	if a[0].Step != 0 || a[0].ValLoss == nil || a[1].Step != 1 {
		t.Errorf("the first records are %+v, %+v: want update 0 with a validation loss, then update 1", a[0], a[1])
	}
	for i := range a {
		if !sameRecord(a[i], b[i]) {
			t.Errorf("update %d differs:\nuninterrupted %+v\nresumed       %+v", a[i].Step, a[i], b[i])
		}
	}
	// The model learned something and the diagnostics ran.
	s := straight.Summary()
	first := a[1].Loss
	if !(s.ValLoss < first-0.5) {
		t.Errorf("validation loss %.3f did not fall from the first training loss %.3f", s.ValLoss, first)
	}
	if math.IsNaN(s.Diameter) || math.IsNaN(s.HilbertRMS) {
		t.Errorf("diagnostics missing: %+v", s)
	}
	// RowNorm's guarantee holds on every logged step.
	for _, r := range a {
		if r.Diameter != nil && *r.Diameter > 2**r.LR*(1+1e-6) {
			t.Errorf("update %d: D(S_t) = %g > 2 lr_t = %g", r.Step, *r.Diameter, 2**r.LR)
		}
	}
	for _, f := range []string{"metrics.jsonl", "summary.md", "loss.png", "diameter.png", "hilbert_rms.png", "checkpoints/latest.json"} {
		if _, err := os.Stat(filepath.Join(resumed.Dir(), f)); err != nil {
			t.Errorf("missing output: %v", err)
		}
	}
}

// sameRecord compares two updates' records bit for bit: every loss, norm
// and diagnostic (not the timings).
func sameRecord(a, b Record) bool {
	return a.Loss == b.Loss && a.GradNorm == b.GradNorm && a.LRScale == b.LRScale &&
		reflect.DeepEqual(a.ValLoss, b.ValLoss) && reflect.DeepEqual(a.Diameter, b.Diameter) &&
		reflect.DeepEqual(a.HilbertRMS, b.HilbertRMS)
}

func TestResumeRefusesBadCheckpoints(t *testing.T) {
	data := t.TempDir()
	shards, val := writeTinyShards(t, data)
	cfg := tinyConfig(t, t.TempDir(), shards, val)
	cfg.Steps = 4
	if _, err := runToEnd(t, cfg, false, 0); err != nil {
		t.Fatal(err)
	}
	ckpt := filepath.Join(cfg.RunsDir, cfg.Name, "checkpoints", "step-0000004")
	resumeErr := func(cfg Config) error {
		tr, err := New(cpu.New(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer tr.Close()
		return tr.Resume()
	}
	var flipped string // the tensor a case damaged
	cases := []struct {
		name   string
		mutate func(c *Config)
		break_ func()
		want   []string
	}{
		{"other head", func(c *Config) { c.Head = "adamw" }, nil, []string{"head", "rownorm", "adamw"}},
		{"other width", func(c *Config) { c.Model.Dim = 96; c.Model.HeadDim = 32 }, nil, []string{"dim: checkpoint 64, this run 96"}},
		{"other batch", func(c *Config) { c.MicroBatch = 4 }, nil, []string{"micro_batch"}},
		{"corrupt state", nil, func() { os.WriteFile(filepath.Join(ckpt, "state.json"), []byte("{"), 0o644) }, []string{"state.json", "corrupt"}},
		{"truncated model", nil, func() { truncate(t, filepath.Join(ckpt, "model.safetensors")) }, []string{"model.safetensors"}},
		{"truncated optimizer", nil, func() { truncate(t, filepath.Join(ckpt, "optim.safetensors")) }, []string{"optim.safetensors"}},
		// One flipped bit, the lowest of a float's mantissa: the value
		// stays finite and plausible, only the checksum tells.
		{"bit flip in a parameter", nil, func() { flipped = flipBit(t, filepath.Join(ckpt, "model.safetensors"), "head.weight", 123) },
			[]string{"model.safetensors", `tensor "head.weight" is damaged`}},
		{"bit flip in an optimizer moment", nil, func() { flipped = flipBit(t, filepath.Join(ckpt, "optim.safetensors"), "", 7) },
			[]string{"optim.safetensors", "is damaged", "CRC-32C"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// Fresh checkpoint for each case.
			os.RemoveAll(filepath.Join(cfg.RunsDir, cfg.Name))
			if _, err := runToEnd(t, cfg, false, 0); err != nil {
				t.Fatal(err)
			}
			c2 := cfg
			if c.mutate != nil {
				c.mutate(&c2)
			}
			if c.break_ != nil {
				c.break_()
			}
			err := resumeErr(c2)
			if err == nil {
				t.Fatal("resume accepted a bad checkpoint")
			}
			want := c.want
			if flipped != "" {
				want = append(want, fmt.Sprintf("tensor %q is damaged", flipped))
				flipped = ""
			}
			for _, w := range want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

// flipBit flips the lowest bit of element i of the named tensor (the
// file's last tensor for ""), a float32, in a safetensors file, and
// returns the tensor's name.
func flipBit(t *testing.T, path, name string, i int64) string {
	t.Helper()
	f, err := safetensors.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	infos := f.Tensors()
	f.Close()
	in := infos[len(infos)-1]
	for _, x := range infos {
		if x.Name == name {
			in = x
		}
	}
	if name != "" && in.Name != name {
		t.Fatalf("%s has no tensor %q", path, name)
	}
	if in.Begin+4*i >= in.End {
		t.Fatalf("tensor %q has %d bytes", in.Name, in.End-in.Begin)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	header := int64(binary.LittleEndian.Uint64(b))
	b[8+header+in.Begin+4*i] ^= 1
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return in.Name
}

func truncate(t *testing.T, path string) {
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, info.Size()/2); err != nil {
		t.Fatal(err)
	}
}

func TestNonFiniteLossStopsWithoutOverwritingTheCheckpoint(t *testing.T) {
	data := t.TempDir()
	shards, val := writeTinyShards(t, data)
	cfg := tinyConfig(t, t.TempDir(), shards, val)
	tr, err := New(cpu.New(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	latest := filepath.Join(tr.Dir(), "checkpoints", "latest.json")
	var before []byte
	hook := func(tr *Trainer, r Record) error {
		if r.Step == 5 {
			before, _ = os.ReadFile(latest) // the checkpoint of step 4
			p := tr.Model().Parameters()[1] // a block weight
			v := p.Float32s()
			v[3] = float32(math.Inf(1))
			p.SetFloat32(v)
		}
		return nil
	}
	err = tr.Run(context.Background(), hook)
	if err == nil || !strings.Contains(err.Error(), "update 6") {
		t.Fatalf("got %v, want an error at update 6", err)
	}
	after, _ := os.ReadFile(latest)
	if string(before) != string(after) || !strings.Contains(string(after), "step-0000004") {
		t.Errorf("the last good checkpoint changed: %s -> %s", before, after)
	}
}

func TestConfigErrorsNameTheField(t *testing.T) {
	base := Config{Preset: "cpu-128", TrainShards: []string{"x"}, ValShard: "y", Steps: 10}
	cases := []struct {
		name   string
		mutate func(c *Config)
		want   string
	}{
		{"head", func(c *Config) { c.Head = "sgd" }, `head = "sgd"`},
		{"steps", func(c *Config) { c.Steps = 0 }, "steps = 0"},
		{"batch", func(c *Config) { c.MicroBatch, c.BatchSeqs = 3, 8 }, "batch_seqs = 8, micro_batch = 3"},
		{"seq", func(c *Config) { c.SeqLen = 5000 }, "seq_len = 5000"},
		{"preset", func(c *Config) { c.Preset = "1b" }, `"1b"`},
		{"shards", func(c *Config) { c.TrainShards = nil }, "train: no training shards"},
	}
	for _, c := range cases {
		cfg := base
		c.mutate(&cfg)
		_, err := cfg.WithDefaults()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want mention of %q", c.name, err, c.want)
		}
	}
}

func TestStatAndComparison(t *testing.T) {
	s := NewStat([]float64{1, 2, 3, 4})
	// mean 2.5, sample variance ((1.5^2+0.5^2)*2)/3 = 5/3
	if s.Mean != 2.5 || math.Abs(s.SD-math.Sqrt(5.0/3)) > 1e-15 || s.N != 4 {
		t.Errorf("NewStat = %+v", s)
	}
	if one := NewStat([]float64{7, math.NaN()}); one.Mean != 7 || one.SD != 0 || one.N != 1 {
		t.Errorf("single value: %+v", one)
	}
	runs := []RunResult{
		{Summary: Summary{Head: "adamw", Seed: 0, ValLoss: 3.0, Diameter: 0.03, HilbertRMS: 0.09}},
		{Summary: Summary{Head: "adamw", Seed: 1, ValLoss: 3.2, Diameter: 0.05, HilbertRMS: 0.11}},
		{Summary: Summary{Head: "rownorm", Seed: 0, ValLoss: 3.1, Diameter: 0.001, HilbertRMS: 0.01}},
		{Summary: Summary{Head: "rownorm", Seed: 1, ValLoss: 3.3, Diameter: 0.001, HilbertRMS: 0.01}},
	}
	c := Compare(runs)
	if len(c.Rows) != 2 || c.Rows[0].Head != "adamw" {
		t.Fatalf("rows %+v", c.Rows)
	}
	if math.Abs(c.DiameterRatio-40) > 1e-9 || math.Abs(c.RMSRatio-10) > 1e-9 || math.Abs(c.LossCost-0.1) > 1e-9 {
		t.Errorf("ratios: diameter %v, rms %v, loss cost %v", c.DiameterRatio, c.RMSRatio, c.LossCost)
	}
	md := c.Markdown()
	for _, want := range []string{"| adamw | 0,1 | 3.1 ± 0.14", "diameter 40x", "Hilbert RMS 10x", "+0.1000"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	// One head alone has no ratios: say so instead of printing NaN.
	if one := Compare(runs[:2]).Markdown(); strings.Contains(one, "NaN") || !strings.Contains(one, "ratios: none") {
		t.Errorf("one head's markdown:\n%s", one)
	}
}

func TestAutocastRunTrainsAndStaysCloseToFloat32(t *testing.T) {
	data := t.TempDir()
	shards, val := writeTinyShards(t, data)
	summary := func(autocast string) Summary {
		cfg := tinyConfig(t, t.TempDir(), shards, val)
		cfg.Autocast = autocast
		tr, err := runToEnd(t, cfg, false, 0)
		if err != nil {
			t.Fatal(err)
		}
		return tr.Summary()
	}
	f32, bf16 := summary("off"), summary("bf16")
	if math.Abs(bf16.ValLoss-f32.ValLoss) > 0.05*f32.ValLoss {
		t.Errorf("validation loss %.4f under bf16 autocast, %.4f in float32", bf16.ValLoss, f32.ValLoss)
	}
	if bf16.ValLoss == f32.ValLoss {
		t.Error("autocast changed nothing: was it applied?")
	}
}
