package cuda

import (
	"github.com/hilbert-ml/hilbert/device"
)

// Buffer is a run of elements in one CUDA device's memory. A buffer from
// Alloc owns a block of the caching allocator; Slice gives views that share
// it.
type Buffer struct {
	dev   *Device
	dtype device.DType
	ptr   uint64 // device address of element 0
	n     int
	owner *block // nil for views and empty buffers
}

// Device returns the device that owns the memory.
func (b *Buffer) Device() device.Device { return b.dev }

// DType returns the element type.
func (b *Buffer) DType() device.DType { return b.dtype }

// Len returns the number of elements.
func (b *Buffer) Len() int { return b.n }

// Slice returns the view of n elements starting at element off.
func (b *Buffer) Slice(off, n int) device.Buffer {
	if off < 0 || n < 0 || off+n > b.n {
		panic("cuda: Buffer.Slice out of range")
	}
	return &Buffer{dev: b.dev, dtype: b.dtype, ptr: b.ptr + uint64(off*b.dtype.Size()), n: n}
}

// Ptr returns the device address of the buffer's first element.
func (b *Buffer) Ptr() uint64 { return b.ptr }

func (b *Buffer) bytes() uint64 { return uint64(b.n * b.dtype.Size()) }

// block is one cuMemAlloc'ed region of a size class.
type block struct {
	ptr  uint64
	size uint64
}

// allocator caches freed blocks in free lists keyed by size class, so a
// training loop that allocates the same shapes every step calls cuMemAlloc
// only during its first step.
type allocator struct {
	free   map[uint64][]*block
	cached uint64 // bytes held in free lists
	live   uint64 // bytes handed out
}

// sizeClass rounds a request up: powers of two (at least 512 bytes) below
// 1 MiB, multiples of 1 MiB above, so that waste stays bounded and
// repeated shapes land in the same list.
func sizeClass(n uint64) uint64 {
	const mib = 1 << 20
	if n <= 512 {
		return 512
	}
	if n < mib {
		c := uint64(512)
		for c < n {
			c <<= 1
		}
		return c
	}
	return (n + mib - 1) / mib * mib
}

// get returns a cached block of the class, if any.
func (a *allocator) get(class uint64) *block {
	l := a.free[class]
	if len(l) == 0 {
		return nil
	}
	b := l[len(l)-1]
	a.free[class] = l[:len(l)-1]
	a.cached -= class
	a.live += class
	return b
}

// put returns a block to its free list.
func (a *allocator) put(b *block) {
	if a.free == nil {
		a.free = map[uint64][]*block{}
	}
	a.free[b.size] = append(a.free[b.size], b)
	a.cached += b.size
	a.live -= b.size
}

// drain empties every free list and returns the blocks.
func (a *allocator) drain() []*block {
	var out []*block
	for c, l := range a.free {
		out = append(out, l...)
		delete(a.free, c)
	}
	a.cached = 0
	return out
}

// MemStats reports the caching allocator's bytes in use and cached.
type MemStats struct {
	// Live is the bytes in blocks handed out by Alloc and not yet freed.
	Live uint64
	// Cached is the bytes in freed blocks kept for reuse.
	Cached uint64
}

// MemStats returns the allocator's counters.
func (d *Device) MemStats() MemStats {
	d.mu.Lock()
	defer d.mu.Unlock()
	return MemStats{Live: d.alloc.live, Cached: d.alloc.cached}
}

// Alloc returns a zeroed buffer of n elements of dtype.
func (d *Device) Alloc(dtype device.DType, n int) (device.Buffer, error) {
	if dtype.Size() == 0 || n < 0 {
		return nil, &Error{Call: "Alloc", Code: -1, Message: "invalid dtype " + dtype.String() + " or negative length"}
	}
	if dtype == device.Float64 {
		// Refused until the kernels have float64 instantiations: a dtype
		// Alloc accepts is one the core ops implement.
		return nil, &Error{Call: "Alloc", Code: -1, Message: "float64 is not supported by the CUDA backend"}
	}
	buf := &Buffer{dev: d, dtype: dtype, n: n}
	if n == 0 {
		return buf, nil
	}
	d.enter()
	defer d.leave()
	class := sizeClass(buf.bytes())
	blk := d.alloc.get(class)
	if blk == nil {
		var p uint64
		r := d.drv.cuMemAlloc(&p, class)
		if r == cudaErrorOutOfMemory {
			// Give the cache back and try once more.
			if err := d.drv.check("cuStreamSynchronize", d.drv.cuStreamSynchronize(d.stream)); err != nil {
				return nil, err
			}
			for _, b := range d.alloc.drain() {
				d.drv.cuMemFree(b.ptr)
			}
			r = d.drv.cuMemAlloc(&p, class)
		}
		if err := d.drv.check("cuMemAlloc_v2", r); err != nil {
			return nil, err
		}
		blk = &block{ptr: p, size: class}
		d.alloc.live += class
	}
	buf.ptr, buf.owner = blk.ptr, blk
	d.zero(buf)
	return buf, nil
}

// Free returns a buffer's block to the cache. Freeing a view, a buffer of
// another device or a buffer twice is recorded as the device's error.
func (d *Device) Free(b device.Buffer) {
	cb, ok := b.(*Buffer)
	if !ok || cb.dev != d {
		d.fail(&Error{Call: "Free", Code: -1, Message: "buffer does not belong to " + d.Name()})
		return
	}
	if cb.n == 0 {
		return
	}
	if cb.owner == nil {
		d.fail(&Error{Call: "Free", Code: -1, Message: "view or already freed buffer"})
		return
	}
	d.mu.Lock()
	d.alloc.put(cb.owner)
	d.mu.Unlock()
	cb.owner = nil
}

// zero clears a buffer with a kernel (the caller holds the device).
func (d *Device) zero(b *Buffer) {
	nb := b.bytes()
	if nb%4 == 0 {
		d.launch1D("h_zero_u32", int64(nb/4), b.ptr, i64arg(int64(nb/4)))
	} else {
		d.launch1D("h_zero_u16", int64(nb/2), b.ptr, i64arg(int64(nb/2)))
	}
}
