package cuda

import (
	"fmt"
	"unsafe"

	"github.com/ebitengine/purego"
)

// cuResult is a CUresult of the driver API (0 is CUDA_SUCCESS).
type cuResult int32

const (
	cudaSuccess          cuResult = 0
	cudaErrorOutOfMemory cuResult = 2
	cudaErrorNoDevice    cuResult = 100

	attrComputeCapabilityMajor = 75
	attrComputeCapabilityMinor = 76
	attrMultiprocessorCount    = 16
)

// driverAPI holds the long-stable entry points of libcuda.so.1 that this
// package uses. Pointers to device memory are uint64 (CUdeviceptr); handles
// are uintptr.
type driverAPI struct {
	lib *library

	cuInit                   func(flags uint32) cuResult
	cuDriverGetVersion       func(v *int32) cuResult
	cuDeviceGetCount         func(n *int32) cuResult
	cuDeviceGet              func(dev *int32, ordinal int32) cuResult
	cuDeviceGetName          func(name *byte, n int32, dev int32) cuResult
	cuDeviceGetAttribute     func(v *int32, attr int32, dev int32) cuResult
	cuDevicePrimaryCtxRetain func(ctx *uintptr, dev int32) cuResult
	cuDevicePrimaryCtxRel    func(dev int32) cuResult
	cuCtxSetCurrent          func(ctx uintptr) cuResult
	cuMemAlloc               func(p *uint64, size uint64) cuResult
	cuMemFree                func(p uint64) cuResult
	cuMemcpyHtoDAsync        func(dst uint64, src unsafe.Pointer, n uint64, stream uintptr) cuResult
	cuMemcpyDtoHAsync        func(dst unsafe.Pointer, src uint64, n uint64, stream uintptr) cuResult
	cuMemcpyDtoDAsync        func(dst, src uint64, n uint64, stream uintptr) cuResult
	cuModuleLoadData         func(mod *uintptr, image unsafe.Pointer) cuResult
	cuModuleUnload           func(mod uintptr) cuResult
	cuModuleGetFunction      func(fn *uintptr, mod uintptr, name string) cuResult
	cuLaunchKernel           func(fn uintptr, gx, gy, gz, bx, by, bz, shmem uint32, stream uintptr, params, extra unsafe.Pointer) cuResult
	cuStreamCreate           func(s *uintptr, flags uint32) cuResult
	cuStreamDestroy          func(s uintptr) cuResult
	cuStreamSynchronize      func(s uintptr) cuResult
	cuGetErrorString         func(r cuResult, s *uintptr) cuResult
}

// bindLibrary opens the library what (openLibrary) and resolves each
// symbol in it into the function pointed to by the paired pointer. The
// first name found among alternatives wins.
func bindLibrary(what string, names, dirs []string, syms []symbol) (*library, error) {
	lib, err := openLibrary(what, names, dirs)
	if err != nil {
		return nil, err
	}
	for _, s := range syms {
		var addr uintptr
		var err error
		for _, name := range s.names {
			if addr, err = purego.Dlsym(lib.handle, name); err == nil {
				break
			}
		}
		if err != nil {
			return nil, fmt.Errorf("cuda: %s has no symbol %s: %w", lib.path, s.names[0], err)
		}
		purego.RegisterFunc(s.fn, addr)
	}
	return lib, nil
}

// symbol pairs a function variable with the names it may be exported as.
type symbol struct {
	fn    any
	names []string
}

func sym(fn any, names ...string) symbol { return symbol{fn, names} }

// loadDriver opens libcuda and binds its entry points.
func loadDriver(dirs []string) (*driverAPI, error) {
	d := &driverAPI{}
	lib, err := bindLibrary("CUDA driver", driverLibNames, dirs, []symbol{
		sym(&d.cuInit, "cuInit"),
		sym(&d.cuDriverGetVersion, "cuDriverGetVersion"),
		sym(&d.cuDeviceGetCount, "cuDeviceGetCount"),
		sym(&d.cuDeviceGet, "cuDeviceGet"),
		sym(&d.cuDeviceGetName, "cuDeviceGetName"),
		sym(&d.cuDeviceGetAttribute, "cuDeviceGetAttribute"),
		sym(&d.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain"),
		sym(&d.cuDevicePrimaryCtxRel, "cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease"),
		sym(&d.cuCtxSetCurrent, "cuCtxSetCurrent"),
		sym(&d.cuMemAlloc, "cuMemAlloc_v2"),
		sym(&d.cuMemFree, "cuMemFree_v2"),
		sym(&d.cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2"),
		sym(&d.cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2"),
		sym(&d.cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2"),
		sym(&d.cuModuleLoadData, "cuModuleLoadData"),
		sym(&d.cuModuleUnload, "cuModuleUnload"),
		sym(&d.cuModuleGetFunction, "cuModuleGetFunction"),
		sym(&d.cuLaunchKernel, "cuLaunchKernel"),
		sym(&d.cuStreamCreate, "cuStreamCreate"),
		sym(&d.cuStreamDestroy, "cuStreamDestroy_v2", "cuStreamDestroy"),
		sym(&d.cuStreamSynchronize, "cuStreamSynchronize"),
		sym(&d.cuGetErrorString, "cuGetErrorString"),
	})
	if err != nil {
		return nil, err
	}
	d.lib = lib
	return d, nil
}

// check turns a CUresult into an error naming the call.
func (d *driverAPI) check(call string, r cuResult) error {
	if r == cudaSuccess {
		return nil
	}
	return &Error{Call: call, Code: int(r), Message: d.errorString(r)}
}

func (d *driverAPI) errorString(r cuResult) string {
	var p uintptr
	if d.cuGetErrorString(r, &p) != cudaSuccess || p == 0 {
		return "unknown error"
	}
	return goString(p)
}

// Error is a failed CUDA, cuBLAS or NVRTC call.
type Error struct {
	// Call is the library function that failed.
	Call string
	// Code is the status it returned.
	Code int
	// Message is the library's description of Code.
	Message string
}

// Error formats the call, the code and the message.
func (e *Error) Error() string {
	return fmt.Sprintf("cuda: %s failed: %s (%d)", e.Call, e.Message, e.Code)
}

// maxCString bounds the length goString looks for a NUL in.
const maxCString = 1 << 16

// goString copies a NUL-terminated string from the library's memory (or
// a Go byte array handed to it). The address is reinterpreted as a
// pointer rather than converted from uintptr, and walked with unsafe.Add
// from that pointer, which is the arithmetic go test -race's checkptr
// accepts: converting a uintptr to a pointer, or adding to a nil pointer,
// aborts under it when the address is Go memory.
func goString(p uintptr) string {
	if p == 0 {
		return ""
	}
	ptr := *(*unsafe.Pointer)(unsafe.Pointer(&p))
	n := 0
	for n < maxCString && *(*byte)(unsafe.Add(ptr, n)) != 0 {
		n++
	}
	return string(unsafe.Slice((*byte)(ptr), n))
}
