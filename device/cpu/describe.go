package cpu

import (
	"strconv"

	"github.com/hilbert-ml/hilbert/device"
)

// Description says what of the CPU backend changes its numbers: the GEMM
// in use (GemmName) and the thread count (Threads), which splits
// reductions. It implements device.Describer.
func (d *Device) Description() device.Description {
	return device.Description{Kind: "cpu", Settings: []device.Setting{
		{Name: "gemm", Value: GemmName()},
		{Name: "threads", Value: strconv.Itoa(Threads())},
	}}
}

// HostFloat32s returns the slice behind a CPU float32 buffer (Float32s
// without the panic): false for another backend's buffer or another dtype.
// It implements device.HostMemory.
func (d *Device) HostFloat32s(b device.Buffer) ([]float32, bool) {
	cb, ok := b.(*buffer)
	if !ok || cb.DType() != device.Float32 {
		return nil, false
	}
	return cb.f, true
}

// WrapFloat32s returns a CPU float32 buffer over s itself (NewFloat32).
// It implements device.HostMemory.
func (d *Device) WrapFloat32s(s []float32) device.Buffer { return NewFloat32(s) }
