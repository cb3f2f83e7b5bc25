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
	defer g.release()
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
	r := &rmsRun{scratch: scratch{dev: dev, op: op}, s: s, v: v, d: d, h: h, n: n, rows: min(n, panelChunk)}
	defer r.release()
	if err := r.setup(); err != nil {
		return 0, err
	}
	for r0 := 0; r0 < v; r0 += r.blockRows {
		m := min(r.blockRows, v-r0)
		r.ranges(r0, m, r.rowsOf(r0, m))
	}
	if err := dev.Synchronize(); err != nil {
		return 0, fmt.Errorf("geometry: %s: %w", op, err)
	}
	var sum float64
	for k := range n {
		x := float64(r.top[k]) + float64(r.bottom[k]) // max - min
		sum += x * x
	}
	return math.Sqrt(sum / float64(n)), nil
}

// rmsRun is one hilbertRMS computation: the step s (v x d), the panel h
// (n x d) and the device scratch.
type rmsRun struct {
	scratch
	s, h      device.Buffer
	v, d, n   int
	rows      int           // panel rows per product
	blockRows int           // step rows per product
	col       device.Buffer // the common row removed, when centred
	block     device.Buffer // a centred block of the step, when centred
	centred   bool
	z         device.Buffer // rows x blockRows logit changes
	hi, negLo device.Buffer // per panel row: max of z and of -z
	// top and bottom are each panel row's max and -min over the blocks so
	// far; hh and hl one product's, on the host.
	top, bottom, hh, hl []float32
}

// setup decides whether to centre the step and allocates the scratch.
func (r *rmsRun) setup() error {
	var err error
	if r.col, err = r.alloc(device.Float32, r.d); err != nil {
		return err
	}
	r.blockRows = r.v
	if centre := commonRow(r.dev, r.s, r.v, r.d, r.col); centre != nil {
		r.centred, r.blockRows = true, min(r.v, stepBlock)
		if r.block, err = r.alloc(device.Float32, r.blockRows*r.d); err != nil {
			return err
		}
		r.dev.CopyFromHost(r.col, centre)
	}
	if r.z, err = r.alloc(device.Float32, r.rows*r.blockRows); err != nil {
		return err
	}
	if r.hi, err = r.alloc(device.Float32, r.rows); err != nil {
		return err
	}
	if r.negLo, err = r.alloc(device.Float32, r.rows); err != nil {
		return err
	}
	r.top, r.bottom = make([]float32, r.n), make([]float32, r.n)
	r.hh, r.hl = make([]float32, r.rows), make([]float32, r.rows)
	return nil
}

// rowsOf returns rows [r0, r0+m) of s as the products take them: s
// itself, or a copy less the common row.
func (r *rmsRun) rowsOf(r0, m int) device.Buffer {
	if !r.centred {
		return r.s.Slice(r0*r.d, m*r.d)
	}
	blk := r.block.Slice(0, m*r.d)
	r.dev.Copy(blk, r.s.Slice(r0*r.d, m*r.d))
	compose.AddRow(r.dev, blk, r.col, m, r.d, -1)
	return blk
}

// ranges folds the logit changes of step rows [r0, r0+m) (blk) into each
// panel row's max and -min.
func (r *rmsRun) ranges(r0, m int, blk device.Buffer) {
	d := r.d
	for k0 := 0; k0 < r.n; k0 += r.rows {
		c := min(r.rows, r.n-k0)
		zm := r.z.Slice(0, c*m)
		// z (c x m) = h[k0:k0+c] (c x d) * blk^T (d x m)
		r.dev.Gemm(device.GemmArgs{TransB: true, M: c, N: m, K: d, Alpha: 1,
			A: r.h.Slice(k0*d, c*d), LDA: max(d, 1), B: blk, LDB: max(d, 1), C: zm, LDC: m})
		compose.Reduce(r.dev, device.Max, 1, r.hi.Slice(0, c), zm, c, m)
		compose.Scale(r.dev, zm, zm, -1)
		compose.Reduce(r.dev, device.Max, 1, r.negLo.Slice(0, c), zm, c, m)
		r.dev.CopyToHost(r.hh[:c], r.hi.Slice(0, c))
		r.dev.CopyToHost(r.hl[:c], r.negLo.Slice(0, c))
		for i := range c {
			r.top[k0+i] = pick(r0 == 0, r.hh[i], maxNaN(r.top[k0+i], r.hh[i]))
			r.bottom[k0+i] = pick(r0 == 0, r.hl[i], maxNaN(r.bottom[k0+i], r.hl[i]))
		}
	}
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
