// Package cuda is the NVIDIA GPU backend of Hilbert: it implements
// device.Device with CUDA so that a model written against the device
// interface trains on a GPU with no change above the device layer.
//
// The package builds with CGO_ENABLED=0. It binds the CUDA driver
// (libcuda.so.1), cuBLAS (libcublas.so.13, falling back to .12) and NVRTC
// (libnvrtc.so.13 / .12) at run time with purego, searching the directory
// list in HILBERT_CUDA_LIB_DIR, the system library paths and the nvidia/*/lib
// folders of Python site-packages (pip wheels). A machine without the
// libraries or without a GPU gets an error from New that lists what was
// searched, never a crash.
//
// Kernels are CUDA C sources in kernels/*.cu, embedded in the binary and
// compiled by NVRTC for the device's architecture when the device is opened;
// the resulting cubin is cached on disk (see CacheDir). Matrix products go
// to cuBLAS (cublasSgemmStridedBatched for float32, cublasGemmStridedBatchedEx
// with float32 accumulation for bfloat16 inputs).
//
// Kernels run asynchronously on one stream per device. A failed launch or
// an unsupported argument is recorded as the device's first (sticky) error
// and reported by Synchronize.
//
// Without a GPU, the tests run this package on internal/cudaemu, a CPU
// emulation of the three libraries whose NVRTC compiles the same kernel
// source with g++; TestEmulator compares every kernel with the CPU backend.
//
// This package depends only on device and device/compose. It imports
// compose (itself only on device) for one reason: attention at a head
// dimension without a fused kernel runs attention's composition from the
// Core, which is the definition devicetest checks the kernels against, so
// the fallback is that definition rather than a second copy of it.
package cuda
