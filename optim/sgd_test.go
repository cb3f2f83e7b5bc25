package optim

import (
	"strings"
	"testing"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/tensor"
)

// TestSGDConfigErrors: torch.optim.SGD's refusals, named.
func TestSGDConfigErrors(t *testing.T) {
	p := param(t, "w", []float64{1, 2}, 2)
	for _, c := range []struct {
		cfg  SGDConfig
		want string
	}{
		{SGDConfig{LR: -1}, "learning rate -1"},
		{SGDConfig{LR: 1, Momentum: -0.5}, "momentum -0.5"},
		{SGDConfig{LR: 1, Dampening: 2}, "dampening 2"},
		{SGDConfig{LR: 1, WeightDecay: -1}, "weight decay -1"},
		{SGDConfig{LR: 1, Nesterov: true}, "Nesterov needs a momentum"},
		{SGDConfig{LR: 1, Momentum: 0.9, Dampening: 0.1, Nesterov: true}, "zero dampening"},
	} {
		_, err := NewSGD(c.cfg, []*tensor.Tensor{p})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want one containing %q", c.cfg, err, c.want)
		}
	}
}

// TestSGDFloat32 runs the float32 (fused) path of the golden SGD cases
// and checks it against PyTorch's float64 values to float32 rounding.
func TestSGDFloat32(t *testing.T) {
	g := readGolden64(t)
	n := 0
	for _, c := range g.Cases {
		if c.Kind != "sgd" {
			continue
		}
		n++
		runFloat32Case(t, c, func(s int, ps []*tensor.Tensor) {
			for i, p := range ps {
				if d := maxRelDiff(f64(p.Float32s()), c.Want[s][i]); d > 1e-6 {
					t.Errorf("%s update %d: float32 %s differs from PyTorch by %.3g", c.Name, s, p.Name, d)
				}
			}
		})
	}
	if n == 0 {
		t.Fatal("no sgd case in testdata/golden64.json")
	}
}

// TestOptimizerDTypes: float32 and float64 parameters are taken, others
// refused with the parameter's name and dtype.
func TestOptimizerDTypes(t *testing.T) {
	for _, c := range []struct {
		dt   device.DType
		want string // "" for no error
	}{
		{device.Float32, ""},
		{device.Float64, ""},
		{device.BFloat16, "parameter w is bfloat16; optimizers update float32 and float64"},
		{device.Int32, "parameter w is int32"},
	} {
		p, err := tensor.NewOf(cpu.New(), c.dt, 2, 3)
		if err != nil {
			t.Fatal(err)
		}
		p.Name = "w"
		for _, cfg := range []Config{PaperAdamW(1e-3), PaperMuon(1e-3), PaperRowNorm(1e-3), SGDConfig{LR: 1e-3}, DefaultLion(1e-3)} {
			_, err := cfg.New([]*tensor.Tensor{p})
			switch {
			case c.want == "" && err != nil:
				t.Errorf("%T on %v: %v", cfg, c.dt, err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Errorf("%T on %v: error %v, want one containing %q", cfg, c.dt, err, c.want)
			}
		}
	}
}
