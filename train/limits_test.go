package train

import (
	"strings"
	"testing"

	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/models"
)

// Sizes past the machine's memory are refused before anything is
// allocated, naming the setting and the memory; the paper's scales and
// the CPU presets are not.
func TestSizeLimits(t *testing.T) {
	const gib = 1 << 30
	base := tinyConfig(t, t.TempDir(), []string{"x"}, "y")
	preset := func(name string, micro, seqLen int) Config {
		c := base
		c.Model, _ = models.Preset(name)
		c.MicroBatch, c.BatchSeqs, c.SeqLen = micro, micro, seqLen
		return c
	}
	for _, c := range []struct {
		name  string
		edit  func(c *Config)
		limit float64
		want  string // "" fits
	}{
		{"tiny", func(c *Config) {}, 1 * gib, ""},
		{"cpu-128", func(c *Config) { *c = preset("cpu-128", 8, 256) }, 4 * gib, ""},
		{"640m on a 128 GiB host", func(c *Config) { *c = preset("640m", 8, 2048) }, 128 * gib, ""},
		{"layers 1e9", func(c *Config) { c.Model.Layers = 1_000_000_000 }, 128 * gib, "layers = 1000000000"},
		{"dim 1e9", func(c *Config) { c.Model.Dim = 1_000_000_000 }, 128 * gib, "dim = 1000000000"},
		{"vocab 2e9", func(c *Config) { c.Model.Vocab = 2_000_000_000 }, 128 * gib, "2 x vocab = 2000000000"},
		{"context 1e9", func(c *Config) { c.Model.Context = 1_000_000_000 }, 128 * gib, "context = 1000000000"},
		{"micro_batch 1e8", func(c *Config) { c.MicroBatch, c.BatchSeqs = 100_000_000, 100_000_000 }, 128 * gib, "micro_batch = 100000000"},
		{"batch_seqs 1e10", func(c *Config) { c.BatchSeqs = 10_000_000_000 }, 128 * gib, "batch_seqs = 10000000000"},
		{"640m on an 8 GiB host", func(c *Config) { *c = preset("640m", 8, 2048) }, 8 * gib, "more than the 8.0 GiB this machine has"},
	} {
		cfg := base
		c.edit(&cfg)
		err := checkLimitsWithin(cfg, c.limit)
		if (c.want == "") != (err == nil) || err != nil && (!strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "would need at least")) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	// The check is in New: no model is built.
	cfg := base
	cfg.Model.Layers = 1_000_000_000
	if _, err := New(cpu.New(), cfg); err == nil || !strings.Contains(err.Error(), "layers = 1000000000") {
		t.Errorf("New with layers 1e9: %v", err)
	}
}
