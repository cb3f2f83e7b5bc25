package models

import (
	"strings"
	"testing"

	"github.com/hilbert-ml/hilbert/autograd"
	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/optim"
	"github.com/hilbert-ml/hilbert/tensor"
)

// BenchmarkTrainStep times one forward+backward pass (no optimizer step)
// of the small presets at batch 8 x 256 tokens and reports tokens/s.
// scripts/parity/bench.sh prints it next to PyTorch's number for the same
// model on the same machine.
func BenchmarkTrainStep(b *testing.B) {
	const batch, seq = 8, 256
	// d128-l2 and d256-l4 are the configurations scripts/parity/bench.sh
	// compares with PyTorch (docs/development.md: the bench.sh line);
	// scripts/parity/bench.py builds the same ones.
	shapes := map[string][2]int{"d128-l2": {2, 128}, "d256-l4": {4, 256}}
	for _, preset := range []string{"d128-l2", "d256-l4", "cpu-128", "cpu-256"} {
		b.Run(preset, func(b *testing.B) {
			dev := cpu.New()
			cfg, _ := Preset("cpu-128")
			if s, ok := shapes[preset]; ok {
				cfg.Layers, cfg.Dim, cfg.MLPHidden = s[0], s[1], 4*s[1]
			} else {
				cfg, _ = Preset(preset)
			}
			m, err := New(dev, cfg, 1)
			if err != nil {
				b.Fatal(err)
			}
			inputs, targets := randomBatch(dev, 1, batch, seq, cfg.Vocab)
			g := autograd.New(dev)
			step := func() {
				g.Reset()
				tensor.ZeroGrad(m.Parameters())
				loss, _ := m.Forward(g, inputs, targets, ForwardOptions{})
				if err := g.Backward(loss); err != nil {
					b.Fatal(err)
				}
			}
			step() // warm the pool and the gradients
			b.ResetTimer()
			for b.Loop() {
				step()
			}
			b.ReportMetric(float64(batch*seq)*float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
		})
	}
}

// BenchmarkPaperUpdate times one full paper update of the small presets at
// batch 8 x 256 tokens: forward+backward, the global gradient norm clipped
// at 1.0, and the step of every group (Nesterov Muon on the blocks, AdamW
// on the embedding, RowNorm on the head), and reports tokens/s; the -bf16
// variants run the blocks' matrix products under bfloat16 autocast
// (-autocast bf16; on this CPU's bfloat16 GEMM, cpu.BFloat16Kernel).
// scripts/parity/bench.sh prints it next to PyTorch's full update
// (scripts/parity/bench.py -update [-autocast]) for the same model.
func BenchmarkPaperUpdate(b *testing.B) {
	const batch, seq = 8, 256
	shapes := map[string][2]int{"d128-l2": {2, 128}, "d256-l4": {4, 256}}
	for _, name := range []string{"d128-l2", "d256-l4", "d128-l2-bf16", "d256-l4-bf16"} {
		preset, autocast := strings.CutSuffix(name, "-bf16")
		b.Run(name, func(b *testing.B) {
			dev := cpu.New()
			cfg, _ := Preset("cpu-128")
			s := shapes[preset]
			cfg.Layers, cfg.Dim, cfg.MLPHidden = s[0], s[1], 4*s[1]
			m, err := New(dev, cfg, 1)
			if err != nil {
				b.Fatal(err)
			}
			set, err := optim.NewSet(optim.PaperRecipe(optim.PaperOptions{Width: cfg.Dim}), m.Parameters())
			if err != nil {
				b.Fatal(err)
			}
			inputs, targets := randomBatch(dev, 1, batch, seq, cfg.Vocab)
			g := autograd.New(dev)
			if autocast {
				g.SetAutocast(device.BFloat16)
			}
			update := func() {
				g.Reset()
				tensor.ZeroGrad(m.Parameters())
				loss, _ := m.Forward(g, inputs, targets, ForwardOptions{})
				if err := g.Backward(loss); err != nil {
					b.Fatal(err)
				}
				if _, err := optim.ClipGradNorm(m.Parameters(), 1); err != nil {
					b.Fatal(err)
				}
				if err := set.Step(0.5); err != nil {
					b.Fatal(err)
				}
			}
			update() // warm the pool, the gradients and the optimizer state
			b.ResetTimer()
			for b.Loop() {
				update()
			}
			b.ReportMetric(float64(batch*seq)*float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
		})
	}
}
