package geometry

import (
	"fmt"
	"math"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/hilbert-ml/hilbert/device"
)

// DiameterTile is the number of rows per tile of RowDiameter's blocked Gram
// product: each tile pair is one Gemm of DiameterTile x DiameterTile x d.
var DiameterTile = 1024

// maxCandidates bounds the near-maximal pairs one scanning goroutine keeps for the
// float64 recheck (see RowDiameter).
const maxCandidates = 1 << 15

// Diameter is the result of RowDiameter.
type Diameter struct {
	// D is ||s_I - s_J||_2, recomputed in float64 by direct subtraction of
	// the input rows.
	D float64
	// I < J are the rows attaining D (0, 0 when there are fewer than two
	// rows).
	I, J int
	// Exact reports that D is the diameter up to float64 rounding: every
	// pair whose fp32 Gram value came within the rounding bound of the
	// maximum was rechecked. It is false only when more near-ties than the
	// candidate buffers hold occurred; D is then a true pair distance and
	// Upper bounds the diameter.
	Exact bool
	// Upper is a certified upper bound on the diameter (equal to D when
	// Exact).
	Upper float64
	// Candidates is the number of pairs rechecked in float64.
	Candidates int
}

type candidate struct {
	v    float32
	i, j int32
}

// RowDiameter returns D(S) = max_{i<j} ||s_i - s_j||_2 of the rows of s
// (v x d, row-major), exactly, over all pairs. The Gram products run on
// dev's GEMM: on the CPU, on RowDiameter's host slices in place; on a
// device without host memory, on a copy of the centred rows (the v x d
// rows are copied there once and each tile's product back).
//
// Method: rows are centred (the mean row subtracted in float64, then
// stored in fp32: without it, fp32 cancellation in ||a||^2 + ||b||^2 - 2 a.b
// ruins rows far from the origin). When the largest centred squared norm
// lies outside [2^-60, 2^60] the centred rows are also scaled by a power
// of two (exactly, before the one rounding to fp32) to bring it near 1, so
// that fp32 squares and products neither overflow nor underflow. Squared
// distances n_i + n_j - 2 G_ij come from a blocked Gram product, one Gemm
// per pair of row tiles (j tile >= i tile). Each tile's GEMM runs on every core (the CPU's threads);
// its scan (max of n_i + n_j - 2 G_ij, and the near-maximal pairs) is
// split over GOMAXPROCS goroutines by row blocks. (Running several
// OpenBLAS GEMMs concurrently, one per goroutine, oversubscribes the
// cores and measured 1.4x slower here.)
//
// Guarantee: with R^2 the largest centred squared norm, every fp32 squared
// distance is within e = (2d + 32) u R^2 (u = 2^-24) of the exact squared
// distance of the input rows (a dot product's rounding is at most d u
// ||a|| ||b||; the other terms cover the centring and the three fp32
// roundings). So the true maximal pair has fp32 value >= M - 2e, M the
// largest fp32 value. Every pair above that threshold is kept and
// rechecked by direct subtraction in float64, and the largest recheck is
// returned: the exact diameter up to float64 rounding, whatever near-ties
// fp32 mis-orders. Only if a scanning goroutine sees more than 32768 near-ties
// (rows that are near copies of one another) does it keep the largest
// 32768; Exact is then false and Upper = sqrt(M + e) bounds the answer.
//
// Non-finite input is an error.
func RowDiameter(dev device.Core, s []float32, v, d int) (Diameter, error) {
	if v < 0 || d < 0 || len(s) != v*d {
		return Diameter{}, fmt.Errorf("geometry: RowDiameter: %d values for %d x %d", len(s), v, d)
	}
	for i, x := range s {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return Diameter{}, fmt.Errorf("geometry: RowDiameter: non-finite value %v at row %d, column %d", x, i/d, i%d)
		}
	}
	if v < 2 {
		return Diameter{Exact: true}, nil
	}
	if d == 0 {
		return Diameter{I: 0, J: 1, Exact: true}, nil
	}

	c, norms, r2, k := centre(s, v, d)
	if r2 == 0 { // every row the same
		return Diameter{I: 0, J: 1, Exact: true}, nil
	}
	u := math.Ldexp(1, -24)
	e := float64(2*d+32) * u * r2
	gemm, err := newHostGemm(dev, "RowDiameter")
	if err != nil {
		return Diameter{}, err
	}
	defer gemm.release()
	r := &diamRun{c: c, norms: norms, v: v, d: d, tile: max(1, DiameterTile), margin: float32(2 * e), gemm: gemm}
	r.best.Store(math.Float32bits(float32(math.Inf(-1))))
	cands, overflow, err := r.run()
	if err != nil {
		return Diameter{}, err
	}

	// Recheck every candidate within the margin of the final maximum.
	M := math.Float32frombits(r.best.Load())
	thr := M - r.margin
	res := Diameter{D: -1, Exact: !overflow}
	for _, cd := range cands {
		if cd.v < thr {
			continue
		}
		res.Candidates++
		if dist := rowDistance(s, d, int(cd.i), int(cd.j)); dist > res.D {
			res.D, res.I, res.J = dist, int(cd.i), int(cd.j)
		}
	}
	if res.I > res.J {
		res.I, res.J = res.J, res.I
	}
	res.Upper = res.D
	if !res.Exact {
		res.Upper = max(res.D, math.Ldexp(math.Sqrt(max(0, float64(M)+e)), -k))
	}
	return res, nil
}

// centre returns the rows minus their mean (mean in float64), times 2^k,
// in fp32, the squared norms of those fp32 rows, the largest of them, and
// k: 0 unless the largest centred squared norm (in float64) lies outside
// [2^-60, 2^60], and then chosen to bring it into [1, 4).
func centre(s []float32, v, d int) (c, norms []float32, r2 float64, k int) {
	mean := make([]float64, d)
	for i := range v {
		for col, x := range s[i*d : (i+1)*d] {
			mean[col] += float64(x)
		}
	}
	for col := range mean {
		mean[col] /= float64(v)
	}
	c = make([]float32, v*d)
	norms = make([]float32, v)
	maxN := make([]float64, v)   // squared norms of the fp32 rows
	exactN := make([]float64, v) // and of the float64 centred rows
	fill := func(scale float64) {
		parallelRows(v, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				var n, n64 float64
				row := c[i*d : (i+1)*d]
				for col, x := range s[i*d : (i+1)*d] {
					z := (float64(x) - mean[col]) * scale
					y := float32(z)
					row[col] = y
					n += float64(y) * float64(y)
					n64 += z * z
				}
				norms[i] = float32(n)
				maxN[i], exactN[i] = n, n64
			}
		})
	}
	fill(1)
	var n64 float64
	for _, n := range exactN {
		n64 = max(n64, n)
	}
	if n64 > 0 && (n64 < 0x1p-60 || n64 > 0x1p60) {
		_, ex := math.Frexp(n64) // n64 in [2^(ex-1), 2^ex)
		k = -((ex - 1) >> 1)
		fill(math.Ldexp(1, k))
	}
	for _, n := range maxN {
		r2 = max(r2, n)
	}
	return c, norms, r2, k
}

// rowDistance is ||s_i - s_j||_2 by direct subtraction in float64.
func rowDistance(s []float32, d, i, j int) float64 {
	return pairDistance(s[i*d:(i+1)*d], s[j*d:(j+1)*d])
}

// pairDistance is ||a - b||_2 by direct subtraction in float64 (the same
// operations in the same order for RowDiameter and RowDiameterDevice).
func pairDistance(a, b []float32) float64 {
	var sum float64
	b = b[:len(a)]
	for k := range a {
		x := float64(a[k]) - float64(b[k])
		sum += x * x
	}
	return math.Sqrt(sum)
}

// diamRun is one RowDiameter computation shared by its scanning goroutines.
type diamRun struct {
	c      []float32
	norms  []float32
	v, d   int
	tile   int
	margin float32
	gemm   *hostGemm
	best   atomic.Uint32 // float32 bits of the largest fp32 value so far
}

// raise lifts the shared maximum to at least x and returns the current
// maximum.
func (r *diamRun) raise(x float32) float32 {
	for {
		old := r.best.Load()
		cur := math.Float32frombits(old)
		if x <= cur {
			return cur
		}
		if r.best.CompareAndSwap(old, math.Float32bits(x)) {
			return x
		}
	}
}

func (r *diamRun) run() ([]candidate, bool, error) {
	t, d := r.tile, r.d
	g := make([]float32, t*t)
	cb, err := r.gemm.buffer(r.c, true)
	if err != nil {
		return nil, false, err
	}
	gb, err := r.gemm.buffer(g, false)
	if err != nil {
		return nil, false, err
	}
	workers := max(1, runtime.GOMAXPROCS(0))
	scans := make([]scanner, workers)
	for i := range scans {
		scans[i].floor = float32(math.Inf(-1))
	}
	var wg sync.WaitGroup
	for a0 := 0; a0 < r.v; a0 += t {
		for b0 := a0; b0 < r.v; b0 += t {
			ra, rb := min(t, r.v-a0), min(t, r.v-b0)
			// g (ra x rb) = c[a0:] c[b0:]^T, one GEMM using every core.
			r.gemm.abT(ra, rb, d, cb.Slice(a0*d, ra*d), cb.Slice(b0*d, rb*d), gb, g)
			// Scan the tile's rows in parallel blocks.
			chunk := (ra + workers - 1) / workers
			for w := range workers {
				lo, hi := w*chunk, min((w+1)*chunk, ra)
				if lo >= hi {
					break
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					scans[w].scan(r, g[lo*rb:hi*rb], a0+lo, b0, hi-lo, rb)
				}()
			}
			wg.Wait()
		}
	}
	var all []candidate
	overflow := false
	for _, sc := range scans {
		all = append(all, sc.cands...)
		overflow = overflow || sc.overflow
	}
	return all, overflow, nil
}

// scanner holds one scanning goroutine's near-maximal pairs.
type scanner struct {
	cands    []candidate
	overflow bool
	// floor is the smallest kept value once the buffer has overflowed:
	// from then on only larger values are worth keeping.
	floor float32
}

// scan looks at the rows a0..a0+ra of a Gram tile against columns
// b0..b0+rb (g is ra x rb): it raises the shared maximum and keeps the
// pairs within the margin of it.
func (sc *scanner) scan(r *diamRun, g []float32, a0, b0, ra, rb int) {
	na, nb := r.norms[a0:a0+ra], r.norms[b0:b0+rb]
	m := tileMaximum(g, na, nb, rb, a0-b0)
	cur := r.raise(m)
	thr := max(cur-r.margin, sc.floor)
	if m < thr {
		return
	}
	sc.cands = collect(sc.cands, g, na, nb, rb, a0-b0, thr, a0, b0)
	if len(sc.cands) > maxCandidates {
		sc.cands = prune(sc.cands, math.Float32frombits(r.best.Load())-r.margin)
		if len(sc.cands) > maxCandidates {
			sort.Slice(sc.cands, func(x, y int) bool { return sc.cands[x].v > sc.cands[y].v })
			sc.cands = sc.cands[:maxCandidates]
			sc.floor = math.Nextafter32(sc.cands[len(sc.cands)-1].v, float32(math.Inf(1)))
			sc.overflow = true
		}
	}
}

// firstColumn is the first column j of tile row i that pairs with it
// (b0 + j > a0 + i, off = a0 - b0).
func firstColumn(i, off int) int { return max(0, i+off+1) }

// tileMaximum returns the largest na_i + nb_j - 2 g_ij over the pairs of a
// tile block (j > i + off).
func tileMaximum(g, na, nb []float32, rb int, off int) float32 {
	m := float32(math.Inf(-1))
	for i, ni := range na {
		j0 := min(firstColumn(i, off), rb)
		row := g[i*rb+j0 : (i+1)*rb]
		nbr := nb[j0:rb]
		nbr = nbr[:len(row)]
		for j, gij := range row {
			if x := ni + nbr[j] - 2*gij; x > m {
				m = x
			}
		}
	}
	return m
}

// collect appends the pairs of a tile whose value is at least thr.
func collect(cands []candidate, g, na, nb []float32, rb int, off int, thr float32, a0, b0 int) []candidate {
	for i, ni := range na {
		row := g[i*rb : (i+1)*rb]
		for j := firstColumn(i, off); j < rb; j++ {
			if x := ni + nb[j] - 2*row[j]; x >= thr {
				cands = append(cands, candidate{v: x, i: int32(a0 + i), j: int32(b0 + j)})
			}
		}
	}
	return cands
}

// prune drops candidates below thr, in place.
func prune(cands []candidate, thr float32) []candidate {
	k := 0
	for _, c := range cands {
		if c.v >= thr {
			cands[k] = c
			k++
		}
	}
	return cands[:k]
}

// parallelRows runs body over [0, n) in GOMAXPROCS contiguous blocks.
func parallelRows(n int, body func(lo, hi int)) {
	workers := min(runtime.GOMAXPROCS(0), max(1, n/256))
	if workers <= 1 {
		body(0, n)
		return
	}
	var wg sync.WaitGroup
	chunk := (n + workers - 1) / workers
	for lo := 0; lo < n; lo += chunk {
		wg.Add(1)
		go func(lo, hi int) {
			defer wg.Done()
			body(lo, hi)
		}(lo, min(lo+chunk, n))
	}
	wg.Wait()
}
