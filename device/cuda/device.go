package cuda

import (
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"unsafe"

	"github.com/hilbert-ml/hilbert/device"
)

// Device is one CUDA GPU. It implements device.Device; all its kernels run
// in order on one stream. It is safe for use by several goroutines, which
// it serialises.
type Device struct {
	ordinal int
	name    string // the GPU's product name
	arch    string // "sm_90"
	smCount int

	drv    *driverAPI
	blas   *cublasAPI
	nvrtc  *nvrtcAPI
	dev    int32
	ctx    uintptr
	stream uintptr
	handle uintptr // cuBLAS
	module uintptr

	mu     sync.Mutex
	funcs  map[string]uintptr
	args   *kernelArgs
	pin    runtime.Pinner
	alloc  allocator
	err    error // first error, sticky
	closed bool

	simtAttention bool // tests: the f32 SIMT attention kernels, forward and backward, for every head dim
}

var _ device.Device = (*Device)(nil)

// Libraries records which shared objects a Device loaded.
type Libraries struct {
	// Driver, Cublas and NVRTC are the paths (or bare names resolved by the
	// system loader) of the loaded libraries.
	Driver, Cublas, NVRTC string
}

// New opens CUDA device ordinal: it loads the libraries, retains the
// device's primary context, creates a stream and a cuBLAS handle, and
// compiles (or loads from the cache) the kernels for the device's
// architecture. Without the libraries or a GPU it returns an error that
// says what was searched.
func New(ordinal int) (*Device, error) {
	dirs := searchDirs()
	drv, count, err := startDriver(dirs)
	if err != nil {
		return nil, err
	}
	if ordinal < 0 || count <= ordinal {
		return nil, fmt.Errorf("cuda: device %d requested, %d present (driver %s)", ordinal, count, drv.lib.path)
	}
	blas, err := loadCublas(dirs)
	if err != nil {
		return nil, err
	}
	nv, err := loadNVRTC(dirs)
	if err != nil {
		return nil, err
	}
	d := &Device{ordinal: ordinal, drv: drv, blas: blas, nvrtc: nv, funcs: map[string]uintptr{}, args: &kernelArgs{}}
	d.pin.Pin(d.args)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := d.open(); err != nil {
		d.pin.Unpin()
		return nil, err
	}
	return d, nil
}

// Count returns the number of CUDA devices, or an error that says what was
// searched when the driver is missing or finds no device.
func Count() (int, error) {
	_, count, err := startDriver(searchDirs())
	return count, err
}

// startDriver loads the driver from dirs, initialises it and counts the
// devices.
func startDriver(dirs []string) (*driverAPI, int, error) {
	drv, err := loadDriver(dirs)
	if err != nil {
		return nil, 0, err
	}
	if r := drv.cuInit(0); r != cudaSuccess {
		return nil, 0, fmt.Errorf("no usable CUDA device (driver %s): %w", drv.lib.path, drv.check("cuInit", r))
	}
	var count int32
	if err := drv.check("cuDeviceGetCount", drv.cuDeviceGetCount(&count)); err != nil {
		return nil, 0, err
	}
	return drv, int(count), nil
}

// open does the driver work of New on a locked OS thread.
func (d *Device) open() error {
	drv := d.drv
	if err := drv.check("cuDeviceGet", drv.cuDeviceGet(&d.dev, int32(d.ordinal))); err != nil {
		return err
	}
	var major, minor, sms int32
	if err := errors.Join(
		drv.check("cuDeviceGetAttribute(major)", drv.cuDeviceGetAttribute(&major, attrComputeCapabilityMajor, d.dev)),
		drv.check("cuDeviceGetAttribute(minor)", drv.cuDeviceGetAttribute(&minor, attrComputeCapabilityMinor, d.dev)),
		drv.check("cuDeviceGetAttribute(SMs)", drv.cuDeviceGetAttribute(&sms, attrMultiprocessorCount, d.dev)),
	); err != nil {
		return err
	}
	d.arch = fmt.Sprintf("sm_%d%d", major, minor)
	d.smCount = max(int(sms), 1)
	name := make([]byte, 256)
	if drv.cuDeviceGetName(&name[0], int32(len(name)), d.dev) == cudaSuccess {
		d.name = goString(uintptr(unsafe.Pointer(&name[0])))
	}
	if err := drv.check("cuDevicePrimaryCtxRetain", drv.cuDevicePrimaryCtxRetain(&d.ctx, d.dev)); err != nil {
		return err
	}
	if err := drv.check("cuCtxSetCurrent", drv.cuCtxSetCurrent(d.ctx)); err != nil {
		return err
	}
	if err := drv.check("cuStreamCreate", drv.cuStreamCreate(&d.stream, 0)); err != nil {
		return err
	}
	if err := cublasCheck("cublasCreate_v2", d.blas.create(&d.handle)); err != nil {
		return err
	}
	if err := cublasCheck("cublasSetStream_v2", d.blas.setStream(d.handle, d.stream)); err != nil {
		return err
	}
	if tf32Enabled() {
		if err := cublasCheck("cublasSetMathMode", d.blas.setMathMode(d.handle, cublasTF32TensorMath)); err != nil {
			return err
		}
	}
	image, err := d.nvrtc.cubin(kernelSource(), d.arch)
	if err != nil {
		return fmt.Errorf("cuda: compiling kernels for %s: %w", d.arch, err)
	}
	if err := drv.check("cuModuleLoadData", drv.cuModuleLoadData(&d.module, unsafe.Pointer(&image[0]))); err != nil {
		return err
	}
	runtime.KeepAlive(image)
	return nil
}

// Name identifies the device as "cuda:N".
func (d *Device) Name() string { return fmt.Sprintf("cuda:%d", d.ordinal) }

// Describe names the GPU, its architecture and the loaded libraries.
func (d *Device) Describe() string {
	return fmt.Sprintf("%s %s (%s, %d SMs) driver=%s cublas=%s nvrtc=%s %d.%d",
		d.Name(), d.name, d.arch, d.smCount, d.drv.lib.path, d.blas.lib.path, d.nvrtc.lib.path, d.nvrtc.major, d.nvrtc.minor)
}

// Arch returns the architecture kernels are compiled for, e.g. "sm_90".
func (d *Device) Arch() string { return d.arch }

// Description says what of the device changes its numbers: the
// architecture (gpu_arch) and whether cuBLAS may use TF32 products
// (tf32, from HILBERT_CUDA_TF32). It implements device.Describer.
func (d *Device) Description() device.Description {
	return device.Description{Kind: "cuda", Settings: []device.Setting{
		{Name: "gpu_arch", Value: d.arch},
		{Name: "tf32", Value: strconv.FormatBool(tf32Enabled())},
	}}
}

// enter takes the device for the calling goroutine and makes its context
// current on the goroutine's (locked) OS thread.
func (d *Device) enter() {
	d.mu.Lock()
	runtime.LockOSThread()
	if r := d.drv.cuCtxSetCurrent(d.ctx); r != cudaSuccess {
		d.failLocked(d.drv.check("cuCtxSetCurrent", r))
	}
}

// leave releases what enter took.
func (d *Device) leave() {
	runtime.UnlockOSThread()
	d.mu.Unlock()
}

// fail records err as the device's error unless one is already recorded.
func (d *Device) fail(err error) {
	d.mu.Lock()
	d.failLocked(err)
	d.mu.Unlock()
}

func (d *Device) failLocked(err error) {
	if d.err == nil && err != nil {
		d.err = err
	}
}

// Synchronize waits for the queued kernels and returns the device's first
// error. The error is sticky: once a kernel failed, every later Synchronize
// reports it.
func (d *Device) Synchronize() error {
	d.enter()
	defer d.leave()
	d.failLocked(d.drv.check("cuStreamSynchronize", d.drv.cuStreamSynchronize(d.stream)))
	return d.err
}

// Close waits for the stream, frees the cached memory and releases the
// cuBLAS handle, the module, the stream and the primary context. Buffers
// still allocated must not be used afterwards.
func (d *Device) Close() error {
	d.enter()
	defer d.leave()
	if d.closed {
		return nil
	}
	d.closed = true
	err := d.drv.check("cuStreamSynchronize", d.drv.cuStreamSynchronize(d.stream))
	for _, b := range d.alloc.drain() {
		d.drv.cuMemFree(b.ptr)
	}
	err = errors.Join(err,
		cublasCheck("cublasDestroy_v2", d.blas.destroy(d.handle)),
		d.drv.check("cuModuleUnload", d.drv.cuModuleUnload(d.module)),
		d.drv.check("cuStreamDestroy", d.drv.cuStreamDestroy(d.stream)),
		d.drv.check("cuDevicePrimaryCtxRelease", d.drv.cuDevicePrimaryCtxRel(d.dev)))
	d.pin.Unpin()
	return err
}

// unsupported records that an op was called with arguments this backend
// does not handle (for example a dtype) and returns false.
func (d *Device) unsupported(op, why string) bool {
	d.failLocked(&Error{Call: op, Code: -1, Message: why})
	return false
}

// want checks that every buffer has one of the dtypes; it records an error
// naming op otherwise. The caller holds the device.
func (d *Device) want(op string, dtypes []device.DType, bufs ...device.Buffer) bool {
	for _, b := range bufs {
		if b == nil {
			continue
		}
		cb, ok := b.(*Buffer)
		if !ok || cb.dev != d {
			return d.unsupported(op, "buffer does not belong to "+d.Name())
		}
		found := false
		for _, t := range dtypes {
			found = found || cb.dtype == t
		}
		if !found {
			return d.unsupported(op, fmt.Sprintf("dtype %s not supported (want %v)", cb.dtype, dtypes))
		}
	}
	return true
}

var (
	f32Only = []device.DType{device.Float32}
	i32Only = []device.DType{device.Int32}
)
