package cuda

import (
	"math"
	"unsafe"

	"github.com/hilbert-ml/hilbert/device"
)

// bf16FromFloat32 rounds to nearest even; NaN stays a (quiet) NaN.
func bf16FromFloat32(f float32) uint16 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 {
		return uint16(u>>16) | 0x40
	}
	u += 0x7fff + (u>>16)&1
	return uint16(u >> 16)
}

// float32FromBF16 widens a bfloat16.
func float32FromBF16(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// CopyFromHost copies src into dst, converting to bfloat16 for BFloat16
// buffers. The host slice may be reused as soon as the call returns.
func (d *Device) CopyFromHost(dst device.Buffer, src []float32) {
	d.enter()
	defer d.leave()
	b := dst.(*Buffer)
	if len(src) == 0 {
		return
	}
	switch b.dtype {
	case device.Float32:
		d.htod(b, unsafe.Pointer(&src[0]))
	case device.BFloat16:
		h := make([]uint16, len(src))
		for i, v := range src {
			h[i] = bf16FromFloat32(v)
		}
		d.htod(b, unsafe.Pointer(&h[0]))
	default:
		d.unsupported("CopyFromHost", "float32 data into a "+b.dtype.String()+" buffer")
	}
}

// CopyToHost copies src into dst, widening bfloat16, and waits.
func (d *Device) CopyToHost(dst []float32, src device.Buffer) {
	d.enter()
	defer d.leave()
	b := src.(*Buffer)
	if len(dst) == 0 {
		return
	}
	switch b.dtype {
	case device.Float32:
		d.dtoh(unsafe.Pointer(&dst[0]), b)
	case device.BFloat16:
		h := make([]uint16, len(dst))
		d.dtoh(unsafe.Pointer(&h[0]), b)
		for i, v := range h {
			dst[i] = float32FromBF16(v)
		}
	default:
		d.unsupported("CopyToHost", "a "+b.dtype.String()+" buffer into float32 data")
	}
}

// CopyInt32FromHost copies token ids into an Int32 buffer.
func (d *Device) CopyInt32FromHost(dst device.Buffer, src []int32) {
	d.enter()
	defer d.leave()
	b := dst.(*Buffer)
	if len(src) == 0 || !d.want("CopyInt32FromHost", i32Only, b) {
		return
	}
	d.htod(b, unsafe.Pointer(&src[0]))
}

// CopyInt32ToHost copies an Int32 buffer to the host and waits.
func (d *Device) CopyInt32ToHost(dst []int32, src device.Buffer) {
	d.enter()
	defer d.leave()
	b := src.(*Buffer)
	if len(dst) == 0 || !d.want("CopyInt32ToHost", i32Only, b) {
		return
	}
	d.dtoh(unsafe.Pointer(&dst[0]), b)
}

// Copy copies src to dst on the device.
func (d *Device) Copy(dst, src device.Buffer) {
	d.enter()
	defer d.leave()
	db, sb := dst.(*Buffer), src.(*Buffer)
	if db.n == 0 {
		return
	}
	if db.dtype != sb.dtype {
		d.unsupported("Copy", "dtypes differ: "+db.dtype.String()+" <- "+sb.dtype.String())
		return
	}
	d.failLocked(d.drv.check("cuMemcpyDtoDAsync_v2", d.drv.cuMemcpyDtoDAsync(db.ptr, sb.ptr, db.bytes(), d.stream)))
}

// htod queues a host-to-device copy of b's size. For pageable host memory
// the driver has staged the data when the call returns, so the host memory
// may be reused.
func (d *Device) htod(b *Buffer, src unsafe.Pointer) {
	d.failLocked(d.drv.check("cuMemcpyHtoDAsync_v2", d.drv.cuMemcpyHtoDAsync(b.ptr, src, b.bytes(), d.stream)))
}

// dtoh copies b to host memory and waits for the stream.
func (d *Device) dtoh(dst unsafe.Pointer, b *Buffer) {
	d.failLocked(d.drv.check("cuMemcpyDtoHAsync_v2", d.drv.cuMemcpyDtoHAsync(dst, b.ptr, b.bytes(), d.stream)))
	d.failLocked(d.drv.check("cuStreamSynchronize", d.drv.cuStreamSynchronize(d.stream)))
}
