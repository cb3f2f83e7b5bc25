package geometry

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/compose"
)

// maxDeviceCandidates bounds the near-maximal pairs RowDiameterDevice
// rechecks in float64 (see there); a variable so that tests can reach it.
var maxDeviceCandidates = 1 << 16

// RowDiameterDevice is RowDiameter for a step that lives on a device: s is
// a Float32 buffer of v x d values (row-major) on any backend, and the
// V^2 d / 2 multiply-adds run there, through the device interface only.
// What comes to the host is small: the squared norms and the per-row
// maxima (v values each), the Gram rows of the few near-maximal rows, and
// the rows of the near-maximal pairs, rechecked in float64; s itself never
// comes to the host. It returns the same Diameter, with the same
// guarantee, as RowDiameter.
//
// Method, with T = DiameterTile:
//
//  1. Centre: c = s - 1 m^T on the device, m the mean row (a 1 x v by
//     v x d Gemm with weights 1/v) rounded to float32, then scale c by a
//     power of two 2^k so that the largest squared row norm lies in
//     [1, 4). Any common m leaves the distances unchanged; each centred
//     entry is rounded once, relative to itself, and the scaling is
//     exact, so neither loses more than u = 2^-24 relative (plus 2^-149
//     absolute where a scaled entry underflows). The scaling keeps every
//     float32 product below away from overflow and underflow.
//  2. Squared norms n_i (Reduce SumSquares) and the running maximum over
//     j > i of x_ij = n_i + n_j - 2 c_i.c_j for every row i: one T x T
//     Gemm into a scratch tile and one PairDistanceMax per pair of row
//     tiles (column tile >= row tile). The v maxima come to the host; M
//     is the largest.
//  3. Bound: every computed x_ij is within e = (4d + 32) u R^2 (with the
//     (1 - (d+2) u) corrections, plus 2^-100) of the exact squared
//     distance of the scaled input rows, R^2 bounding the squared norms.
//     The terms: each squared norm and each dot product is off by at most
//     d u R^2 (any summation order, float32 or wider accumulation), the
//     centring moves a squared distance by at most 8 u R^2, and the two
//     float32 additions of x by 6 u R^2. (RowDiameter's e = (2d + 32) u R^2
//     counts its float64 norms; the device's Reduce may accumulate in
//     float32.) So the maximal pair (p, q) has x_pq >= M - 2e, and row p's
//     maximum is at least that.
//  4. Candidates: for each row i whose maximum is >= M - 2e (few, in
//     practice), gather its centred row, Gemm it against the rows j > i,
//     copy those products to the host and keep every pair with x_ij >=
//     M - 2e: by step 3 the maximal pair is among them.
//  5. Recheck: gather the rows of the kept pairs from s, copy them to the
//     host and compute each distance by direct subtraction in float64; the
//     largest is D, as in RowDiameter.
//
// If more than 65536 pairs qualify (rows that are near copies of one
// another), the largest 65536 by their float32 value are rechecked, Exact is
// false and Upper = sqrt(M + e) 2^-k bounds the diameter; likewise if more
// than 65536 rows qualify, when the farthest column each found in step 2 is
// rechecked.
//
// The guarantee assumes the device's float32 Gemm rounds like float32
// arithmetic (any summation order). TF32 tensor-core products (device/cuda
// with HILBERT_CUDA_TF32=1) are about 1e-3 relative and void it.
//
// Besides s (which it does not modify), it allocates on the device a v x d
// centred copy, a T x T tile, a T x d panel and a few v-element vectors,
// and frees them before it returns. Non-finite input is an error that
// names the first offending row and column.
func RowDiameterDevice(s device.Buffer, v, d int) (Diameter, error) {
	if s == nil || v < 0 || d < 0 || s.Len() != v*d || s.DType() != device.Float32 {
		what := "nil buffer"
		if s != nil {
			what = fmt.Sprintf("%d %v values", s.Len(), s.DType())
		}
		return Diameter{}, fmt.Errorf("geometry: RowDiameterDevice: %s for %d x %d float32", what, v, d)
	}
	if v < 2 {
		return Diameter{Exact: true}, nil
	}
	if d == 0 {
		return Diameter{I: 0, J: 1, Exact: true}, nil
	}
	if float64(d+2)*unit > 1.0/16 {
		return Diameter{}, fmt.Errorf("geometry: RowDiameterDevice: rows of %d values are too long for the float32 error bound", d)
	}
	r := &devRun{dev: s.Device(), s: s, v: v, d: d, t: max(1, DiameterTile)}
	defer r.release()
	return r.run()
}

// unit is the unit roundoff of float32.
const unit = 0x1p-24

// devRun is one RowDiameterDevice computation.
type devRun struct {
	dev  device.Device
	s    device.Buffer
	v, d int
	t    int // tile

	c, norms device.Buffer // centred, scaled rows (v x d) and their squared norms
	hn       []float32     // the norms on the host
	scale    int           // c = 2^scale (s - 1 m^T)

	g         device.Buffer // Gram tile, min(t, v)^2
	rows, idx device.Buffer // gathered rows (min(t, v) x d) and their indices
	scratch                 // the device memory, set up by run
}

func (r *devRun) run() (Diameter, error) {
	r.scratch = scratch{dev: r.dev, op: "RowDiameterDevice"}
	maxN, err := r.centre()
	if err != nil {
		return Diameter{}, err
	}
	if maxN == 0 { // every row the same
		return Diameter{I: 0, J: 1, Exact: true}, nil
	}
	// Step 3's bound, in the scaled units of c.
	d := float64(r.d)
	r2 := float64(maxN) / (1 - 2*(d+2)*unit)
	e := (4*d+32)*unit*r2/(1-(d+2)*unit) + 0x1p-100

	best, arg, err := r.rowMaxima()
	if err != nil {
		return Diameter{}, err
	}
	M := float32(math.Inf(-1))
	for _, x := range best {
		M = max(M, x)
	}
	if math.IsInf(float64(M), 0) || M != M {
		return Diameter{}, fmt.Errorf("geometry: RowDiameterDevice: no finite squared distance came back from %s (largest %v)", r.dev.Name(), M)
	}
	thr := float64(M) - 2*e
	var rows []int
	for i, x := range best {
		if float64(x) >= thr {
			rows = append(rows, i)
		}
	}

	var cands []candidate
	overflow := false
	if len(rows) > maxDeviceCandidates {
		// Too many rows qualify for the pair search: recheck the farthest
		// column of the rows with the largest maxima.
		slices.SortFunc(rows, func(a, b int) int { return cmp.Compare(best[b], best[a]) })
		for _, i := range rows[:maxDeviceCandidates] {
			cands = append(cands, candidate{v: best[i], i: int32(i), j: arg[i]})
		}
		overflow = true
	} else if cands, overflow, err = r.pairsAbove(rows, thr); err != nil {
		return Diameter{}, err
	}

	res, err := r.recheck(cands)
	if err != nil {
		return Diameter{}, err
	}
	res.Exact = !overflow
	res.Upper = res.D
	if overflow {
		res.Upper = max(res.D, math.Ldexp(math.Sqrt(max(0, float64(M)+e)), -r.scale))
	}
	return res, nil
}

// centre fills r.c with the centred rows scaled by 2^r.scale and r.norms
// (and r.hn) with their squared norms, and returns the largest norm, in
// [1, 4) unless every row is the same (0).
func (r *devRun) centre() (float32, error) {
	v, d := r.v, r.d
	w, err := r.alloc(device.Float32, v)
	if err != nil {
		return 0, err
	}
	mean, err := r.alloc(device.Float32, d)
	if err != nil {
		return 0, err
	}
	if r.c, err = r.alloc(device.Float32, v*d); err != nil {
		return 0, err
	}
	if r.norms, err = r.alloc(device.Float32, v); err != nil {
		return 0, err
	}
	r.hn = make([]float32, v)
	// mean (1 x d) = (1/v) 1^T s: the weights, not alpha, carry 1/v so that
	// large rows do not overflow the sum.
	r.dev.Fill(w, float32(1/float64(v)))
	r.dev.Gemm(device.GemmArgs{M: 1, N: d, K: v, Alpha: 1, A: w, LDA: v, B: r.s, LDB: d, C: mean, LDC: d})
	r.dev.Copy(r.c, r.s)
	compose.AddRow(r.dev, r.c, mean, v, d, -1)

	// Scale by powers of two until the norms are finite and not all zero
	// (float32 squares of the entries may overflow or underflow), then so
	// that the largest lies in [1, 4).
	var maxN float32
	for try := 0; ; try++ {
		var nan bool
		if maxN, nan, err = r.measure(); err != nil {
			return 0, err
		}
		switch {
		case nan:
			return 0, r.nonFinite()
		case math.IsInf(float64(maxN), 1) && try == 0:
			// Finite entries are below 2^128: 2^-100 brings their
			// squares into range.
			r.rescale(-100)
			continue
		case math.IsInf(float64(maxN), 1):
			return 0, r.nonFinite()
		case maxN == 0 && try == 0:
			// A nonzero entry is at least 2^-149: 2^100 makes its square
			// a normal float32. No nonzero entry means equal rows (the
			// subtraction of equal floats alone gives 0).
			r.rescale(100)
			continue
		}
		break
	}
	if maxN == 0 {
		return 0, nil
	}
	_, ex := math.Frexp(float64(maxN)) // maxN in [2^(ex-1), 2^ex)
	if j := -((ex - 1) >> 1); j != 0 {
		r.rescale(j)
		if maxN, _, err = r.measure(); err != nil {
			return 0, err
		}
	}
	return maxN, nil
}

// rescale multiplies the centred rows by 2^k.
func (r *devRun) rescale(k int) {
	compose.Scale(r.dev, r.c, r.c, float32(math.Ldexp(1, k)))
	r.scale += k
}

// measure computes the squared norms of the centred rows, copies them to
// the host and returns the largest and whether one is NaN.
func (r *devRun) measure() (maxN float32, nan bool, err error) {
	compose.Reduce(r.dev, device.SumSquares, 1, r.norms, r.c, r.v, r.d)
	r.dev.CopyToHost(r.hn, r.norms)
	if err := r.dev.Synchronize(); err != nil {
		return 0, false, fmt.Errorf("geometry: RowDiameterDevice: %w", err)
	}
	for _, n := range r.hn {
		if n != n {
			return 0, true, nil
		}
		maxN = max(maxN, n)
	}
	return maxN, false, nil
}

// nonFinite names the first non-finite input value (an error path: it
// reduces s on the device and copies one row).
func (r *devRun) nonFinite() error {
	sq, err := r.alloc(device.Float32, r.v)
	if err != nil {
		return err
	}
	compose.Reduce(r.dev, device.SumSquares, 1, sq, r.s, r.v, r.d)
	h := make([]float32, r.v)
	r.dev.CopyToHost(h, sq)
	row := make([]float32, r.d)
	for i, x := range h {
		if !math.IsNaN(float64(x)) && !math.IsInf(float64(x), 0) {
			continue
		}
		r.dev.CopyToHost(row, r.s.Slice(i*r.d, r.d))
		for k, y := range row {
			if math.IsNaN(float64(y)) || math.IsInf(float64(y), 0) {
				return fmt.Errorf("geometry: RowDiameterDevice: non-finite value %v at row %d, column %d", y, i, k)
			}
		}
	}
	if err := r.dev.Synchronize(); err != nil {
		return fmt.Errorf("geometry: RowDiameterDevice: %w", err)
	}
	return fmt.Errorf("geometry: RowDiameterDevice: the centred rows overflow float32")
}

// rowMaxima runs step 2 and returns, for every row i, the largest x_ij
// over j > i and that j (-Inf and 0 for the last row).
func (r *devRun) rowMaxima() ([]float32, []int32, error) {
	v, d, t := r.v, r.d, r.t
	best, err := r.alloc(device.Float32, v)
	if err != nil {
		return nil, nil, err
	}
	arg, err := r.alloc(device.Int32, v)
	if err != nil {
		return nil, nil, err
	}
	if r.g, err = r.alloc(device.Float32, min(t, v)*min(t, v)); err != nil {
		return nil, nil, err
	}
	g := r.g
	r.dev.Fill(best, float32(math.Inf(-1)))
	for a0 := 0; a0 < v; a0 += t {
		ra := min(t, v-a0)
		for b0 := a0; b0 < v; b0 += t {
			rb := min(t, v-b0)
			tile := g.Slice(0, ra*rb)
			r.dev.Gemm(device.GemmArgs{TransB: true, M: ra, N: rb, K: d, Alpha: 1,
				A: r.c.Slice(a0*d, ra*d), LDA: d, B: r.c.Slice(b0*d, rb*d), LDB: d, C: tile, LDC: rb})
			if err := pairDistanceMax(r.dev, best.Slice(a0, ra), arg.Slice(a0, ra), tile, r.norms.Slice(a0, ra), r.norms.Slice(b0, rb), ra, rb, a0, b0); err != nil {
				return nil, nil, err
			}
		}
	}
	hb, ha := make([]float32, v), make([]int32, v)
	r.dev.CopyToHost(hb, best)
	r.dev.CopyInt32ToHost(ha, arg)
	if err := r.dev.Synchronize(); err != nil {
		return nil, nil, fmt.Errorf("geometry: RowDiameterDevice: %w", err)
	}
	return hb, ha, nil
}

// pairsAbove runs step 4: every pair (i, j), i in rows (ascending), j > i,
// whose float32 x_ij is at least thr, keeping the largest
// maxDeviceCandidates (overflow reports that some were dropped).
func (r *devRun) pairsAbove(rows []int, thr float64) (cands []candidate, overflow bool, err error) {
	v, d, t := r.v, r.d, r.t
	panel, idx, err := r.panel()
	if err != nil {
		return nil, false, err
	}
	g := r.g
	t = min(t, v)
	host := make([]float32, t*t)
	ids := make([]int32, t)
	floor := float32(math.Inf(-1))
	for k0 := 0; k0 < len(rows); k0 += t {
		blk := rows[k0:min(k0+t, len(rows))]
		n := len(blk)
		for k, i := range blk {
			ids[k] = int32(i)
		}
		r.dev.CopyInt32FromHost(idx.Slice(0, n), ids[:n])
		compose.Gather(r.dev, panel.Slice(0, n*d), r.c, idx.Slice(0, n), d)
		for j0 := blk[0] + 1; j0 < v; j0 += t {
			w := min(t, v-j0)
			r.dev.Gemm(device.GemmArgs{TransB: true, M: n, N: w, K: d, Alpha: 1,
				A: panel.Slice(0, n*d), LDA: d, B: r.c.Slice(j0*d, w*d), LDB: d, C: g.Slice(0, n*w), LDC: w})
			r.dev.CopyToHost(host[:n*w], g.Slice(0, n*w))
			nb := r.hn[j0 : j0+w]
			for k, i := range blk {
				ni, row := r.hn[i], host[k*w:(k+1)*w]
				for j := max(0, i+1-j0); j < w; j++ {
					x := ni + nb[j] - 2*row[j]
					if float64(x) >= thr && x >= floor {
						cands = append(cands, candidate{v: x, i: int32(i), j: int32(j0 + j)})
					}
				}
				if len(cands) > 2*maxDeviceCandidates {
					cands, floor = keepLargest(cands)
					overflow = true
				}
			}
		}
	}
	if err := r.dev.Synchronize(); err != nil {
		return nil, false, fmt.Errorf("geometry: RowDiameterDevice: %w", err)
	}
	if len(cands) > maxDeviceCandidates {
		cands, _ = keepLargest(cands)
		overflow = true
	}
	return cands, overflow, nil
}

// keepLargest keeps the maxDeviceCandidates largest candidates and returns
// the value a later candidate must exceed to matter.
func keepLargest(cands []candidate) ([]candidate, float32) {
	slices.SortFunc(cands, func(a, b candidate) int { return cmp.Compare(b.v, a.v) })
	cands = cands[:maxDeviceCandidates]
	return cands, math.Nextafter32(cands[len(cands)-1].v, float32(math.Inf(1)))
}

// panel returns the scratch for min(T, v) gathered rows and their
// indices, allocated on first use.
func (r *devRun) panel() (rows, idx device.Buffer, err error) {
	if r.rows == nil {
		n := min(r.t, r.v)
		if r.rows, err = r.alloc(device.Float32, n*r.d); err != nil {
			return nil, nil, err
		}
		if r.idx, err = r.alloc(device.Int32, n); err != nil {
			return nil, nil, err
		}
	}
	return r.rows, r.idx, nil
}

// recheck runs step 5: the rows of the candidate pairs are gathered from s
// on the device, copied to the host, and each pair's distance recomputed
// in float64; the largest wins (the first in (i, j) order on a tie).
func (r *devRun) recheck(cands []candidate) (Diameter, error) {
	d := r.d
	slices.SortFunc(cands, func(a, b candidate) int { return cmp.Or(cmp.Compare(a.i, b.i), cmp.Compare(a.j, b.j)) })
	var uniq []int32
	for _, c := range cands {
		uniq = append(uniq, c.i, c.j)
	}
	slices.Sort(uniq)
	uniq = slices.Compact(uniq)
	panel, idx, err := r.panel()
	if err != nil {
		return Diameter{}, err
	}
	t := min(r.t, r.v)
	host := make([]float32, len(uniq)*d)
	for k0 := 0; k0 < len(uniq); k0 += t {
		n := min(t, len(uniq)-k0)
		r.dev.CopyInt32FromHost(idx.Slice(0, n), uniq[k0:k0+n])
		compose.Gather(r.dev, panel.Slice(0, n*d), r.s, idx.Slice(0, n), d)
		r.dev.CopyToHost(host[k0*d:(k0+n)*d], panel.Slice(0, n*d))
	}
	if err := r.dev.Synchronize(); err != nil {
		return Diameter{}, fmt.Errorf("geometry: RowDiameterDevice: %w", err)
	}
	rowOf := func(i int32) []float32 {
		k, _ := slices.BinarySearch(uniq, i)
		return host[k*d : (k+1)*d]
	}
	res := Diameter{D: -1, Candidates: len(cands)}
	for _, c := range cands {
		if dist := pairDistance(rowOf(c.i), rowOf(c.j)); dist > res.D {
			res.D, res.I, res.J = dist, int(c.i), int(c.j)
		}
	}
	return res, nil
}
