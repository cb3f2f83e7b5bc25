package train

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hilbert-ml/hilbert/data"
	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/models"
	"github.com/hilbert-ml/hilbert/models/hf"
)

// TestInitHF: a Config with InitHF alone takes the directory's family
// and configuration (a tied Qwen2, untied here; a GPT-2 with its own
// lm_head is untied by itself), New's model holds the directory's weights
// exactly (those hf.Load reads), and the fingerprint is the setting
// init_hf; a preset, another family or a paper model beside it, and a
// GPT-2 whose LayerNorm epsilon the run could not record, are errors
// naming them.
func TestInitHF(t *testing.T) {
	dataDir := t.TempDir() // ids below the fixtures' vocabulary of 64
	shards, val := []string{filepath.Join(dataDir, "train.bin")}, filepath.Join(dataDir, "val.bin")
	for _, f := range []struct {
		path string
		n    int
	}{{shards[0], 2000}, {val, 400}} {
		toks := make([]int32, f.n)
		for i := range toks {
			toks[i] = int32(i*7%61 + i%3)
		}
		if err := data.WriteShard(f.path, toks, false); err != nil {
			t.Fatal(err)
		}
	}
	fixture := func(name string) string { return filepath.Join("..", "models", "hf", "testdata", name) }
	untied := t.TempDir() // the gpt2 fixture saved with a head of its own
	{
		m, _, err := hf.Load(cpu.New(), fixture("gpt2"), hf.Options{UntieHead: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := hf.Save(untied, m, ""); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		dir        string
		untie      bool
		family     string
		untiedHead bool
	}{
		{fixture("qwen2"), true, "llama", true},
		{fixture("gpt2"), false, "gpt2", false},
		{untied, false, "gpt2", true},
	} {
		cfg := Config{Name: "hf", RunsDir: t.TempDir(), InitHF: c.dir, UntieHead: c.untie, Head: "adamw",
			TrainShards: shards, ValShard: val, SeqLen: 16, MicroBatch: 2, Steps: 1, ValTokens: 300}
		tr, err := New(cpu.New(), cfg)
		if err != nil {
			t.Fatalf("%s: %v", c.dir, err)
		}
		got := tr.Config()
		if got.Family != c.family || (tr.Head() != nil) != c.untiedHead {
			t.Errorf("%s: family %q, untied head %v; want %q, %v", c.dir, got.Family, tr.Head() != nil, c.family, c.untiedHead)
		}
		want, _, err := hf.Load(cpu.New(), c.dir, hf.Options{UntieHead: c.untie})
		if err != nil {
			t.Fatal(err)
		}
		ps, ws := tr.Model().Parameters(), want.Parameters()
		if len(ps) != len(ws) {
			t.Fatalf("%s: %d parameters, hf.Load %d", c.dir, len(ps), len(ws))
		}
		for i := range ps {
			a, b := ps[i].Float32s(), ws[i].Float32s()
			for j := range a {
				if a[j] != b[j] {
					t.Fatalf("%s: %s[%d] = %g, the directory's %g", c.dir, ps[i].Name, j, a[j], b[j])
				}
			}
		}
		settings, err := tr.settings()
		if err != nil {
			t.Fatal(err)
		}
		var id string
		for _, s := range settings {
			if s.name == "init_hf" {
				id = s.value
			}
		}
		if !strings.HasPrefix(id, "crc32c:") || id != tr.InitHF() {
			t.Errorf("%s: setting init_hf %q, InitHF() %q", c.dir, id, tr.InitHF())
		}
		tr.Close()
	}

	// A changed byte changes the fingerprint; the path does not.
	a, err := hfFingerprint(fixture("gpt2"))
	if err != nil {
		t.Fatal(err)
	}
	moved := t.TempDir()
	for _, f := range []string{"config.json", "model.safetensors"} {
		b, _ := os.ReadFile(filepath.Join(fixture("gpt2"), f))
		os.WriteFile(filepath.Join(moved, f), b, 0o644)
	}
	if b, _ := hfFingerprint(moved); b != a {
		t.Errorf("a copy elsewhere: fingerprint %q, the original's %q", b, a)
	}
	cj := filepath.Join(moved, "config.json")
	b, _ := os.ReadFile(cj)
	os.WriteFile(cj, []byte(strings.Replace(string(b), `"layer_norm_epsilon": 1e-05`, `"layer_norm_epsilon": 1e-06`, 1)), 0o644)
	if c, _ := hfFingerprint(moved); c == a {
		t.Errorf("config.json changed, fingerprint %q unchanged", c)
	}

	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{InitHF: fixture("gpt2"), Preset: "gpt2-tiny"}, `preset "gpt2-tiny" is set too`},
		{Config{InitHF: fixture("gpt2"), Family: "llama"}, `is a GPT2LMHeadModel (model "gpt2"); model is "llama"`},
		{Config{InitHF: fixture("gpt2"), Model: models.Config{Layers: 1}}, "Model (the paper's) is set"},
		{Config{InitHF: moved}, "layer_norm_epsilon 1e-06"},
		{Config{InitHF: t.TempDir()}, "config.json"},
	} {
		c.cfg.TrainShards, c.cfg.ValShard, c.cfg.Steps, c.cfg.Head = shards, val, 1, "adamw"
		if _, err := c.cfg.WithDefaults(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v; want an error naming %q", c.cfg, err, c.want)
		}
	}
}
