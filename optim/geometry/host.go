package geometry

import (
	"fmt"

	"github.com/hilbert-ml/hilbert/device"
)

// hostGemm runs the host functions' products on a device: c (m x n) =
// a (m x k) b^T (b is n x k), all row-major host slices. Where the device
// keeps its buffers in host memory (device.HostMemory: the CPU) the
// buffers are the slices themselves, so the product is the backend's GEMM
// on them with nothing copied; elsewhere the operands are copied to the
// device once (operand) and each product back (abT).
type hostGemm struct {
	scratch                   // the copies
	host    device.HostMemory // nil: copy
}

func newHostGemm(dev device.Core, op string) (*hostGemm, error) {
	if dev == nil {
		return nil, fmt.Errorf("geometry: %s: nil device", op)
	}
	h := &hostGemm{scratch: scratch{dev: dev, op: op}}
	h.host, _ = dev.(device.HostMemory)
	return h, nil
}

// buffer returns s as a Float32 buffer of the device: s itself, or a
// zeroed copy of its length (filled from s when fill is set).
func (h *hostGemm) buffer(s []float32, fill bool) (device.Buffer, error) {
	if h.host != nil {
		return h.host.WrapFloat32s(s), nil
	}
	b, err := h.alloc(device.Float32, len(s))
	if err != nil {
		return nil, err
	}
	if fill {
		h.dev.CopyFromHost(b, s)
	}
	return b, nil
}

// abT computes c[:m*n] = a b^T for a (m x k) and b (n x k) given as device
// buffers (views of buffer's results) and c's buffer cb, then brings the
// product to the host slice c.
func (h *hostGemm) abT(m, n, k int, a, b, cb device.Buffer, c []float32) {
	ld := max(k, 1)
	h.dev.Gemm(device.GemmArgs{TransB: true, M: m, N: n, K: k, Alpha: 1,
		A: a, LDA: ld, B: b, LDB: ld, C: cb.Slice(0, m*n), LDC: n})
	if h.host == nil {
		h.dev.CopyToHost(c[:m*n], cb.Slice(0, m*n))
	}
}

// scratch is the device memory of one computation, freed together; op
// names the computation in errors.
type scratch struct {
	dev  device.Core
	op   string
	bufs []device.Buffer
}

// alloc returns n values of dt that release frees.
func (s *scratch) alloc(dt device.DType, n int) (device.Buffer, error) {
	b, err := s.dev.Alloc(dt, n)
	if err != nil {
		return nil, fmt.Errorf("geometry: %s: scratch of %d %v on %s: %w", s.op, n, dt, s.dev.Name(), err)
	}
	s.bufs = append(s.bufs, b)
	return b, nil
}

// release frees the scratch once no kernel may still use it.
func (s *scratch) release() {
	if len(s.bufs) == 0 {
		return
	}
	_ = s.dev.Synchronize()
	for _, b := range s.bufs {
		s.dev.Free(b)
	}
	s.bufs = nil
}
