package cpu_test

import (
	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/cpu"
)

// The CPU backend has every capability, so device/compose takes its fused
// kernels, never the compositions.
var _ device.Fused = (*cpu.Device)(nil)
