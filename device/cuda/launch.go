package cuda

import (
	"math"
	"unsafe"

	"github.com/hilbert-ml/hilbert/device"
)

// maxKernelArgs bounds the parameters of one kernel.
const maxKernelArgs = 16

// kernelArgs is the parameter block handed to cuLaunchKernel: each value
// sits in its own 8-byte slot (a 4-byte int or float in the low half, which
// is what the kernel reads on a little-endian machine) and ptrs[i] points
// at vals[i]. It lives inside the Device and is pinned for its lifetime.
type kernelArgs struct {
	vals [maxKernelArgs]uint64
	ptrs [maxKernelArgs]uintptr
	// geo holds a struct Geo parameter (kernels/core.cu) passed by value:
	// the first parameter of the strided core kernels.
	geo geoWords
}

// Argument encoders for kernel parameters.
func i64arg(n int64) uint64   { return uint64(n) }
func i32arg(n int) uint64     { return uint64(uint32(int32(n))) }
func f32arg(x float32) uint64 { return uint64(math.Float32bits(x)) }

// ptrArg returns the device address of a buffer (0 for a nil buffer).
func ptrArg(b any) uint64 {
	if b == nil {
		return 0
	}
	if cb, ok := b.(*Buffer); ok && cb != nil {
		return cb.ptr
	}
	return 0
}

// function returns the kernel by name, loading it from the module on
// first use.
func (d *Device) function(name string) (uintptr, error) {
	if f, ok := d.funcs[name]; ok {
		return f, nil
	}
	var f uintptr
	if err := d.drv.check("cuModuleGetFunction("+name+")", d.drv.cuModuleGetFunction(&f, d.module, name)); err != nil {
		return 0, err
	}
	d.funcs[name] = f
	return f, nil
}

// launch queues kernel name on the device's stream. The caller holds the
// device (enter). A failure becomes the device's sticky error.
func (d *Device) launch(name string, grid, block [3]uint32, shmem uint32, args ...uint64) {
	d.launchArgs(name, grid, block, shmem, false, args)
}

// launchArgs is launch; with geo set, the kernel's first parameter is the
// struct in d.args.geo and args are the ones after it.
func (d *Device) launchArgs(name string, grid, block [3]uint32, shmem uint32, geo bool, args []uint64) {
	first := 0
	if geo {
		first = 1
	}
	if first+len(args) > maxKernelArgs {
		panic("cuda: too many kernel arguments for " + name)
	}
	f, err := d.function(name)
	if err != nil {
		d.failLocked(err)
		return
	}
	a := d.args
	if geo {
		a.ptrs[0] = uintptr(unsafe.Pointer(&a.geo[0]))
	}
	for i, v := range args {
		a.vals[first+i] = v
		a.ptrs[first+i] = uintptr(unsafe.Pointer(&a.vals[first+i]))
	}
	r := d.drv.cuLaunchKernel(f, grid[0], grid[1], grid[2], block[0], block[1], block[2], shmem, d.stream,
		unsafe.Pointer(&a.ptrs[0]), nil)
	if err := d.drv.check("cuLaunchKernel("+name+")", r); err != nil {
		d.failLocked(err)
	}
}

// launch1D queues an elementwise kernel over n items with a grid-stride
// loop; the first argument is the device pointer, then the rest.
func (d *Device) launch1D(name string, n int64, args ...uint64) {
	if n <= 0 {
		return
	}
	grid, block := d.grid1D(n)
	d.launch(name, grid, block, 0, args...)
}

// grid1D is the launch shape of a grid-stride loop over n items.
func (d *Device) grid1D(n int64) (grid, block [3]uint32) {
	const threads = 256
	blocks := (n + threads - 1) / threads
	if limit := int64(d.smCount) * 32; blocks > limit {
		blocks = limit
	}
	return [3]uint32{uint32(blocks), 1, 1}, [3]uint32{threads, 1, 1}
}

// launchRows queues a kernel with one block per row.
func (d *Device) launchRows(name string, rows int, threads uint32, args ...uint64) {
	if rows <= 0 {
		return
	}
	d.launch(name, [3]uint32{uint32(rows), 1, 1}, [3]uint32{threads, 1, 1}, 0, args...)
}

// kernel1D is the whole body of an op that runs one float32 grid-stride
// kernel over n items: it takes the device, checks that bufs are float32
// and idx int32 buffers of d (nil ones allowed), and launches name with
// the addresses of bufs, then of idx, then scalars as its arguments.
func (d *Device) kernel1D(op, name string, n int64, bufs, idx []device.Buffer, scalars ...uint64) {
	d.enter()
	defer d.leave()
	var args [maxKernelArgs]uint64
	if a, ok := d.kernelArgs(op, args[:0], bufs, idx, scalars); ok {
		d.launch1D(name, n, a...)
	}
}

// kernelRows is kernel1D for a kernel with one block of threads per row.
func (d *Device) kernelRows(op, name string, rows int, threads uint32, bufs, idx []device.Buffer, scalars ...uint64) {
	d.enter()
	defer d.leave()
	var args [maxKernelArgs]uint64
	if a, ok := d.kernelArgs(op, args[:0], bufs, idx, scalars); ok {
		d.launchRows(name, rows, threads, a...)
	}
}

// kernelArgs checks the buffers of kernel1D and kernelRows and appends
// their arguments to args; false means an error naming op is recorded.
func (d *Device) kernelArgs(op string, args []uint64, bufs, idx []device.Buffer, scalars []uint64) ([]uint64, bool) {
	if !d.want(op, f32Only, bufs...) || !d.want(op, i32Only, idx...) {
		return nil, false
	}
	for _, list := range [2][]device.Buffer{bufs, idx} {
		for _, b := range list {
			args = append(args, ptrArg(b))
		}
	}
	return append(args, scalars...), true
}
