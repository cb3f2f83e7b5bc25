package geometry

import (
	"fmt"
	"math"
	"runtime"
	"sync"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/compose"
)

// panelChunk is how many hidden states one GEMM of the Hilbert RMS
// handles.
const panelChunk = 256

// stepBlock is how many rows of the step one GEMM of the Hilbert RMS
// takes: the centred copy of a block and the logit tile are the scratch
// (stepBlock x d and panelChunk x stepBlock float32).
const stepBlock = 8192

// HilbertRMS returns the Hilbert RMS of a step s (v x d, row-major) over a
// panel of n hidden states h (n x d, row-major):
//
//	sqrt( (1/n) sum_k ||s h_k||_var^2 )
//
// the root-mean-square change, in Hilbert distance, of the softmax
// distributions at those positions. It is HilbertRMSDevice on dev: on the
// CPU on s and h in place; a device that does not keep its buffers in
// host memory gets copies of s and h.
func HilbertRMS(dev device.Core, s []float32, v, d int, h []float32, n int) (float64, error) {
	if v < 0 || d < 0 || n < 0 || len(s) != v*d || len(h) != n*d {
		return 0, fmt.Errorf("geometry: HilbertRMS: step of %d values for %d x %d, panel of %d values for %d x %d", len(s), v, d, len(h), n, d)
	}
	if n == 0 {
		return 0, fmt.Errorf("geometry: HilbertRMS: empty panel")
	}
	if v == 0 {
		return 0, nil
	}
	g, err := newHostGemm(dev, "HilbertRMS")
	if err != nil {
		return 0, err
	}
	defer g.free()
	sb, err := g.buffer(s, true)
	if err != nil {
		return 0, err
	}
	hb, err := g.buffer(h, true)
	if err != nil {
		return 0, err
	}
	return hilbertRMS(dev, "HilbertRMS", sb, v, d, hb, n)
}

// HilbertRMSDevice is HilbertRMS for a step s (v x d) and a panel h (n x d)
// that live on one device, both Float32 buffers: everything runs there,
// and each panel row's max and min logit change (per block of the step's
// rows; Reduce Max of z and of -z) and the step's column maxima and
// minima are the only values that come to the host.
//
// The quantity ignores a row common to every row of s (it shifts all of a
// position's logits alike), but a float32 product does not: a common row
// 1000 times the rows' spread costs about 1e-6 of the result and one 1e7
// times costs all of it. So where a column of the step is dominated by its
// common part, the step's column mean is removed first, block by block
// into a scratch copy (s itself is not changed); otherwise the products
// run on s itself. The squares are summed in float64.
//
// It allocates a min(n, 256) x v tile (or, when it centres, a stepBlock x
// d block and a min(n, 256) x stepBlock tile) and small vectors on the
// device and frees them before it returns.
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
	return hilbertRMS(dev, "HilbertRMSDevice", s, v, d, h, n)
}

// hilbertRMS is HilbertRMSDevice on dev, with op naming the caller in
// errors.
func hilbertRMS(dev device.Core, op string, s device.Buffer, v, d int, h device.Buffer, n int) (float64, error) {
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
			return nil, fmt.Errorf("geometry: %s: scratch of %d float32 on %s: %w", op, k, dev.Name(), err)
		}
		bufs = append(bufs, b)
		return b, nil
	}
	col, err := alloc(d)
	if err != nil {
		return 0, err
	}
	centre := commonRow(dev, s, v, d, col)
	// rowsOf returns rows [r0, r0+m) of s as the products take them: s
	// itself, or a copy less the common row.
	blockRows := v
	rowsOf := func(r0, m int) device.Buffer { return s.Slice(r0*d, m*d) }
	if centre != nil {
		blockRows = min(v, stepBlock)
		block, err := alloc(blockRows * d)
		if err != nil {
			return 0, err
		}
		dev.CopyFromHost(col, centre)
		rowsOf = func(r0, m int) device.Buffer {
			blk := block.Slice(0, m*d)
			dev.Copy(blk, s.Slice(r0*d, m*d))
			compose.AddRow(dev, blk, col, m, d, -1)
			return blk
		}
	}
	z, err := alloc(rows * blockRows)
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
	top, bottom := make([]float32, n), make([]float32, n) // max and -min of each panel row
	hh, hl := make([]float32, rows), make([]float32, rows)
	for r0 := 0; r0 < v; r0 += blockRows {
		m := min(blockRows, v-r0)
		blk := rowsOf(r0, m)
		for k0 := 0; k0 < n; k0 += rows {
			c := min(rows, n-k0)
			zm := z.Slice(0, c*m)
			// z (c x m) = h[k0:k0+c] (c x d) * blk^T (d x m)
			dev.Gemm(device.GemmArgs{TransB: true, M: c, N: m, K: d, Alpha: 1,
				A: h.Slice(k0*d, c*d), LDA: max(d, 1), B: blk, LDB: max(d, 1), C: zm, LDC: m})
			compose.Reduce(dev, device.Max, 1, hi.Slice(0, c), zm, c, m)
			compose.Scale(dev, zm, zm, -1)
			compose.Reduce(dev, device.Max, 1, negLo.Slice(0, c), zm, c, m)
			dev.CopyToHost(hh[:c], hi.Slice(0, c))
			dev.CopyToHost(hl[:c], negLo.Slice(0, c))
			for i := range c {
				top[k0+i] = pick(r0 == 0, hh[i], maxNaN(top[k0+i], hh[i]))
				bottom[k0+i] = pick(r0 == 0, hl[i], maxNaN(bottom[k0+i], hl[i]))
			}
		}
	}
	if err := dev.Synchronize(); err != nil {
		return 0, fmt.Errorf("geometry: %s: %w", op, err)
	}
	var sum float64
	for k := range n {
		r := float64(top[k]) + float64(bottom[k]) // max - min
		sum += r * r
	}
	return math.Sqrt(sum / float64(n)), nil
}

// commonRow returns the row to remove from every row of s (v x d) before
// the products, or nil when no column needs it: a column whose entries
// all sit further from 0 than their range is dominated by its common part,
// which costs a float32 product precision that the quantity does not
// ignore. The row is the column means (summed in float64 by ReduceAxis),
// each rounded to a multiple of the float32 ulp of its column's largest
// magnitude, so that subtracting it is exact wherever the difference is a
// float32 and otherwise rounds no coarser than the uncentred product did.
// col is d float32 of scratch.
func commonRow(dev device.Core, s device.Buffer, v, d int, col device.Buffer) []float32 {
	colOf := func(op device.ReduceOp) []float32 {
		out := make([]float32, d)
		dev.ReduceAxis(op, col, s, 1, v, d)
		dev.CopyToHost(out, col)
		return out
	}
	top, bottom := colOf(device.Max), colOf(device.Min)
	need := false
	for j := range d {
		spread := top[j] - bottom[j]
		need = need || bottom[j] > spread || -top[j] > spread
	}
	if !need {
		return nil
	}
	row := colOf(device.Sum)
	for j := range d {
		big := max(abs32(top[j]), abs32(bottom[j]))
		q := float64(math.Nextafter32(big, float32(math.Inf(1))) - big)
		mean := float64(row[j]) / float64(v)
		if big == 0 || math.IsNaN(mean) || math.IsInf(q, 0) || math.IsNaN(q) {
			row[j] = 0
			continue
		}
		row[j] = float32(q * math.Round(mean/q))
	}
	return row
}

// pick returns a when first, else b.
func pick(first bool, a, b float32) float32 {
	if first {
		return a
	}
	return b
}

// abs32 is |x|.
func abs32(x float32) float32 { return float32(math.Abs(float64(x))) }

// maxNaN is max that keeps a NaN from either side (as Reduce Max does).
func maxNaN(a, b float32) float32 {
	if a != a || b != b {
		return float32(math.NaN())
	}
	return max(a, b)
}

// HilbertRMSLogits returns sqrt((1/n) sum_k ||z_k||_var^2) for n logit
// changes z (n x v, row-major) computed elsewhere (on a device, say).
func HilbertRMSLogits(z []float32, n, v int) (float64, error) {
	if n <= 0 || v < 0 || len(z) != n*v {
		return 0, fmt.Errorf("geometry: HilbertRMSLogits: %d values for %d x %d", len(z), n, v)
	}
	return math.Sqrt(sumVarSquares(z, n, v) / float64(n)), nil
}

// sumVarSquares returns sum over rows of VarNorm(row)^2 in float64,
// parallel over row blocks.
func sumVarSquares(z []float32, m, v int) float64 {
	workers := min(runtime.GOMAXPROCS(0), m)
	if workers <= 1 || m*v < 1<<16 {
		var s float64
		for k := range m {
			r := VarNorm(z[k*v : (k+1)*v])
			s += r * r
		}
		return s
	}
	part := make([]float64, workers)
	var wg sync.WaitGroup
	chunk := (m + workers - 1) / workers
	for w := range workers {
		lo, hi := w*chunk, min((w+1)*chunk, m)
		wg.Add(1)
		go func() {
			defer wg.Done()
			var s float64
			for k := lo; k < hi; k++ {
				r := VarNorm(z[k*v : (k+1)*v])
				s += r * r
			}
			part[w] = s
		}()
	}
	wg.Wait()
	var s float64
	for _, p := range part {
		s += p
	}
	return s
}
