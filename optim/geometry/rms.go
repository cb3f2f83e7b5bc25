package geometry

import (
	"fmt"
	"math"
	"runtime"
	"sync"

	"github.com/hilbert-ml/hilbert/device"
)

// panelChunk is how many hidden states one GEMM of HilbertRMS handles.
const panelChunk = 256

// HilbertRMS returns the Hilbert RMS of a step s (v x d, row-major) over a
// panel of n hidden states h (n x d, row-major):
//
//	sqrt( (1/n) sum_k ||s h_k||_var^2 )
//
// the root-mean-square change, in Hilbert distance, of the softmax
// distributions at those positions. The logit changes s h_k come from the
// GEMM of dev in fp32 (on the CPU, on s and h in place), a chunk of the
// panel at a time; the squares are summed in float64. A device that does
// not keep its buffers in host memory gets copies of s and h.
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
	rows := min(n, panelChunk)
	z := make([]float32, rows*v)
	sb, err := g.buffer(s, true)
	if err != nil {
		return 0, err
	}
	hb, err := g.buffer(h, true)
	if err != nil {
		return 0, err
	}
	zb, err := g.buffer(z, false)
	if err != nil {
		return 0, err
	}
	var sum float64
	for k0 := 0; k0 < n; k0 += rows {
		m := min(rows, n-k0)
		// z (m x v) = h[k0:k0+m] (m x d) * s^T (d x v)
		g.abT(m, v, d, hb.Slice(k0*d, m*d), sb, zb, z)
		sum += sumVarSquares(z[:m*v], m, v)
	}
	return math.Sqrt(sum / float64(n)), nil
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
