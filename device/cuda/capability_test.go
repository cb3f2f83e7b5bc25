package cuda

import "github.com/hilbert-ml/hilbert/device"

// The CUDA backend has every capability, so device/compose takes its fused
// kernels, never the compositions.
var _ device.Fused = (*Device)(nil)
