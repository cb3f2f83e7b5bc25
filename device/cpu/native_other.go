//go:build !amd64

package cpu

// archKernels returns no assembly kernels: other architectures run the
// portable one.
func archKernels() []*nativeKernel { return nil }

// archBF16Kernels returns no bfloat16 kernels: bfloat16 products are
// widened to float32.
func archBF16Kernels() []*bf16Kernel { return nil }
