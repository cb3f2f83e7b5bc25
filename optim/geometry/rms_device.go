package geometry

import (
	"fmt"
	"math"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/compose"
)

// HilbertRMSDevice is HilbertRMS for a step s (v x d) and a panel h (n x d)
// that live on one device, both Float32 buffers: the logit changes
// z = h s^T are Gemms there, panelChunk panel rows at a time, and each
// row's max and min (Reduce Max of z and of -z) are the only values that
// come to the host, 2 per panel row. The squares are summed in float64.
// Each max and min is the same float32 value HilbertRMS takes, so on
// equal products the two agree up to the order of the float64 sum.
//
// It allocates a min(n, 256) x v tile and two small vectors on the device
// and frees them before it returns.
func HilbertRMSDevice(s device.Buffer, v, d int, h device.Buffer, n int) (float64, error) {
	bad := func(b device.Buffer, rows int) bool {
		return b == nil || b.Len() != rows*d || b.DType() != device.Float32
	}
	if v < 0 || d < 0 || n < 0 || bad(s, v) || bad(h, n) {
		return 0, fmt.Errorf("geometry: HilbertRMSDevice: want float32 buffers of %d x %d (step) and %d x %d (panel)", v, d, n, d)
	}
	if n == 0 {
		return 0, fmt.Errorf("geometry: HilbertRMSDevice: empty panel")
	}
	if v == 0 {
		return 0, nil
	}
	dev := s.Device()
	if h.Device() != dev {
		return 0, fmt.Errorf("geometry: HilbertRMSDevice: step on %s, panel on %s", dev.Name(), h.Device().Name())
	}
	rows := min(n, panelChunk)
	var bufs []device.Buffer
	defer func() {
		_ = dev.Synchronize()
		for _, b := range bufs {
			dev.Free(b)
		}
	}()
	alloc := func(k int) (device.Buffer, error) {
		b, err := dev.Alloc(device.Float32, k)
		if err != nil {
			return nil, fmt.Errorf("geometry: HilbertRMSDevice: scratch of %d float32 on %s: %w", k, dev.Name(), err)
		}
		bufs = append(bufs, b)
		return b, nil
	}
	z, err := alloc(rows * v)
	if err != nil {
		return 0, err
	}
	hi, err := alloc(rows)
	if err != nil {
		return 0, err
	}
	negLo, err := alloc(rows)
	if err != nil {
		return 0, err
	}
	hh, hl := make([]float32, rows), make([]float32, rows)
	var sum float64
	for k0 := 0; k0 < n; k0 += rows {
		m := min(rows, n-k0)
		zm := z.Slice(0, m*v)
		// z (m x v) = h[k0:k0+m] (m x d) * s^T (d x v)
		dev.Gemm(device.GemmArgs{TransB: true, M: m, N: v, K: d, Alpha: 1,
			A: h.Slice(k0*d, m*d), LDA: max(d, 1), B: s, LDB: max(d, 1), C: zm, LDC: v})
		compose.Reduce(dev, device.Max, 1, hi.Slice(0, m), zm, m, v)
		compose.Scale(dev, zm, zm, -1)
		compose.Reduce(dev, device.Max, 1, negLo.Slice(0, m), zm, m, v)
		dev.CopyToHost(hh[:m], hi.Slice(0, m))
		dev.CopyToHost(hl[:m], negLo.Slice(0, m))
		for i := range m {
			r := float64(hh[i]) + float64(hl[i]) // max - min
			sum += r * r
		}
	}
	if err := dev.Synchronize(); err != nil {
		return 0, fmt.Errorf("geometry: HilbertRMSDevice: %w", err)
	}
	return math.Sqrt(sum / float64(n)), nil
}
