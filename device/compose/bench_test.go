package compose_test

import (
	"testing"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/compose"
	"github.com/hilbert-ml/hilbert/device/cpu"
)

// BenchmarkDispatch compares a fused kernel called on the concrete CPU
// device with the same kernel reached through compose's interface
// assertion, and through compose.Run (the dispatch of capabilities
// declared outside package device), on small buffers where a per-call
// cost would show most.
func BenchmarkDispatch(b *testing.B) {
	c := cpu.New()
	var dev device.Device = c
	x, _ := dev.Alloc(device.Float32, 256)
	y, _ := dev.Alloc(device.Float32, 256)
	rstd, _ := dev.Alloc(device.Float32, 4)
	b.Run("Axpby/direct", func(b *testing.B) {
		for b.Loop() {
			c.Axpby(y, x, 0.5, 1)
		}
	})
	b.Run("Axpby/compose", func(b *testing.B) {
		for b.Loop() {
			compose.Axpby(dev, y, x, 0.5, 1)
		}
	})
	b.Run("Axpby/Run", func(b *testing.B) {
		for b.Loop() {
			compose.Run(dev, "Axpby", func(k device.Axpbyer) { k.Axpby(y, x, 0.5, 1) },
				func(d device.Core) { compose.Axpby(d, y, x, 0.5, 1) })
		}
	})
	b.Run("RMSNorm/direct", func(b *testing.B) {
		for b.Loop() {
			c.RMSNorm(y, rstd, x, 4, 64, 1e-6)
		}
	})
	b.Run("RMSNorm/compose", func(b *testing.B) {
		for b.Loop() {
			compose.RMSNorm(dev, y, rstd, x, 4, 64, 1e-6)
		}
	})
}
