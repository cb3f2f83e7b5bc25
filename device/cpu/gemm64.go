package cpu

import "github.com/hilbert-ml/hilbert/device"

// The float64 GEMM, for reference runs and gradient checks: blocked pure
// Go, separate from the float32 paths (native, OpenBLAS, gonum) so that
// they are untouched. op(B) is packed a kc x nc panel at a time into a
// contiguous buffer, and rows of C are updated four at a time from it
// (each packed row of B is loaded once for four rows of A), the rows split
// across workers.

// Panel sizes of the float64 GEMM: a kc x nc panel of op(B) is 256 KiB,
// which stays in L2 while every row block of C streams past it.
const (
	dgemmKC = 128
	dgemmNC = 256
)

// gemm64 runs a float64 strided batched product; A, B and C must all be
// float64.
func (d *Device) gemm64(g *device.GemmArgs) {
	a, b, c := Float64s(g.A), Float64s(g.B), Float64s(g.C)
	batch := max(g.Batch, 1)
	rowsA, colsA, rowsB, colsB := operandShapes(g)
	for i := 0; i < batch; i++ {
		Dgemm(g.TransA, g.TransB, g.M, g.N, g.K, float64(g.Alpha),
			window64(a, i*g.StrideA, rowsA, colsA, g.LDA), g.LDA,
			window64(b, i*g.StrideB, rowsB, colsB, g.LDB), g.LDB,
			float64(g.Beta), window64(c, i*g.StrideC, g.M, g.N, g.LDC), g.LDC)
	}
}

// window64 is window for float64 slices.
func window64(s []float64, off, rows, cols, ld int) []float64 {
	if rows == 0 || cols == 0 {
		return s[off:off]
	}
	return s[off : off+(rows-1)*ld+cols]
}

// Dgemm computes C = alpha*op(A)*op(B) + beta*C in float64 on row-major
// host slices: op(A) is m x k (A stored k x m with row pitch lda when tA),
// op(B) is k x n, C is m x n with row pitch ldc. With beta 0, C is not read
// (NaNs in it are dropped); with k 0 or alpha 0, C is only scaled by beta.
// NaN and Inf in A and B propagate as in the unblocked sum (no term is
// skipped for a zero factor).
func Dgemm(tA, tB bool, m, n, k int, alpha float64, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int) {
	if m <= 0 || n <= 0 {
		return
	}
	scaleMatrix(c, m, n, ldc, beta)
	if k <= 0 || alpha == 0 {
		return
	}
	kc, nc := min(k, dgemmKC), min(n, dgemmNC)
	panel := make([]float64, kc*nc)
	for p0 := 0; p0 < k; p0 += kc {
		pk := min(kc, k-p0)
		for j0 := 0; j0 < n; j0 += nc {
			nb := min(nc, n-j0)
			packB64(panel[:pk*nb], b, ldb, tB, p0, pk, j0, nb)
			bp := panel[:pk*nb]
			// Rows of C in blocks of 4, a few blocks per worker.
			blocks := (m + 3) / 4
			grain := max(1, (1<<15)/max(1, 4*pk*nb))
			parallelFor(blocks, grain, func(lo, hi int) {
				var ap [4][dgemmKC]float64
				for blk := lo; blk < hi; blk++ {
					i0 := blk * 4
					rows := min(4, m-i0)
					for r := range rows {
						packA64(ap[r][:pk], a, lda, tA, i0+r, p0, alpha)
					}
					if rows == 4 {
						dgemmKernel4(bp, pk, nb, &ap,
							c[(i0)*ldc+j0:][:nb], c[(i0+1)*ldc+j0:][:nb],
							c[(i0+2)*ldc+j0:][:nb], c[(i0+3)*ldc+j0:][:nb])
						continue
					}
					for r := range rows {
						dgemmKernel1(bp, pk, nb, ap[r][:pk], c[(i0+r)*ldc+j0:][:nb])
					}
				}
			})
		}
	}
}

// packB64 copies op(B)[p0:p0+pk, j0:j0+nb] row-major into dst (pk x nb).
func packB64(dst, b []float64, ldb int, tB bool, p0, pk, j0, nb int) {
	for p := range pk {
		row := dst[p*nb : (p+1)*nb]
		if !tB {
			copy(row, b[(p0+p)*ldb+j0:][:nb])
			continue
		}
		for j := range row {
			row[j] = b[(j0+j)*ldb+p0+p]
		}
	}
}

// packA64 copies alpha * op(A)[i, p0:p0+len(dst)] into dst.
func packA64(dst, a []float64, lda int, tA bool, i, p0 int, alpha float64) {
	if !tA {
		for p, v := range a[i*lda+p0:][:len(dst)] {
			dst[p] = alpha * v
		}
		return
	}
	for p := range dst {
		dst[p] = alpha * a[(p0+p)*lda+i]
	}
}

// dgemmKernel4 adds ap[r] * bp (a 1 x pk by pk x nb product) to row r of
// C for four rows at once.
func dgemmKernel4(bp []float64, pk, nb int, ap *[4][dgemmKC]float64, c0, c1, c2, c3 []float64) {
	c1, c2, c3 = c1[:len(c0)], c2[:len(c0)], c3[:len(c0)]
	for p := range pk {
		a0, a1, a2, a3 := ap[0][p], ap[1][p], ap[2][p], ap[3][p]
		row := bp[p*nb : (p+1)*nb]
		row = row[:len(c0)]
		for j, bv := range row {
			c0[j] += a0 * bv
			c1[j] += a1 * bv
			c2[j] += a2 * bv
			c3[j] += a3 * bv
		}
	}
}

// dgemmKernel1 adds ap * bp to one row of C.
func dgemmKernel1(bp []float64, pk, nb int, ap, c []float64) {
	for p := range pk {
		av := ap[p]
		row := bp[p*nb : (p+1)*nb]
		row = row[:len(c)]
		for j, bv := range row {
			c[j] += av * bv
		}
	}
}
