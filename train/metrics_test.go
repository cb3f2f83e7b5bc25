package train

import (
	"math"
	"path/filepath"
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
