//go:build !amd64

package cpu

// gemvKernels maps a native kernel to its small-M kernel: none here.
var gemvKernels = map[*nativeKernel]*gemvKernel{}
