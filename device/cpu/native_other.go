//go:build !amd64

package cpu

// archKernels returns no assembly kernels: other architectures run the
// portable one.
func archKernels() []*nativeKernel { return nil }

// archBF16Kernels returns no bfloat16 kernels: bfloat16 products are
// widened to float32.
func archBF16Kernels() []*bf16Kernel { return nil }

// toBFloat16Chunk and fromBFloat16Chunk convert in Go.
func toBFloat16Chunk(dst []uint16, src []float32) { toBFloat16Go(dst, src) }

func fromBFloat16Chunk(dst []float32, src []uint16) { fromBFloat16Go(dst, src) }

// dotBF16Fast reports false: there is no VDPBF16PS kernel here.
func dotBF16Fast() bool { return false }

// amxPermitted reports false: there is no AMX here.
func amxPermitted() bool { return false }
