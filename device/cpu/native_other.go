//go:build !amd64

package cpu

// archKernels returns no assembly kernels: other architectures run the
// portable one.
func archKernels() []*nativeKernel { return nil }
