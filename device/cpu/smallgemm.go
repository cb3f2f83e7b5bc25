package cpu

// smallGemm is a single-threaded GEMM for the products inside one attention
// (batch, head) pair: Seq x Seq x HeadDim and the like, too small for
// OpenBLAS's threading to pay and, unlike OpenBLAS's OpenMP build, safe to
// run on several goroutines at once (each with its own smallGemm). It
// packs op(A) into panels of gemmMR rows and op(B) into panels of gemmNR
// columns and multiplies panel pairs with a register-blocked micro-kernel
// (AVX2+FMA assembly on amd64, Go elsewhere), then applies alpha and beta
// while writing C.

// Micro-kernel tile: gemmMR rows of C by gemmNR columns.
const gemmMR, gemmNR = 6, 16

// smallGemm holds one goroutine's packing buffers and tile.
type smallGemm struct {
	a, b []float32
	tile [gemmMR * gemmNR]float32
}

// gemm computes C = alpha op(A) op(B) + beta C on row-major slices (as
// Sgemm). beta == 0 overwrites C without reading it.
func (w *smallGemm) gemm(tA, tB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if m == 0 || n == 0 {
		return
	}
	if k == 0 || alpha == 0 {
		scaleMatrix(c, m, n, ldc, beta)
		return
	}
	mp, np := (m+gemmMR-1)/gemmMR, (n+gemmNR-1)/gemmNR
	w.a = growFloats(w.a, mp*gemmMR*k)
	w.b = growFloats(w.b, np*gemmNR*k)
	packPanelsA(w.a, tA, m, k, a, lda)
	packPanelsB(w.b, tB, k, n, b, ldb)
	for q := range np {
		bp := w.b[q*gemmNR*k : (q+1)*gemmNR*k]
		cols := min(gemmNR, n-q*gemmNR)
		for p := range mp {
			ap := w.a[p*gemmMR*k : (p+1)*gemmMR*k]
			rows := min(gemmMR, m-p*gemmMR)
			if rows == gemmMR && cols == gemmNR && microKernelFull(k, ap, bp, c[p*gemmMR*ldc+q*gemmNR:], ldc, alpha, beta) {
				continue
			}
			microKernel(k, ap, bp, &w.tile)
			for r := range rows {
				off := (p*gemmMR+r)*ldc + q*gemmNR
				crow, t := c[off:off+cols], w.tile[r*gemmNR:r*gemmNR+cols]
				if beta == 0 {
					for j := range crow {
						crow[j] = alpha * t[j]
					}
				} else {
					for j := range crow {
						crow[j] = alpha*t[j] + beta*crow[j]
					}
				}
			}
		}
	}
}

func growFloats(x []float32, n int) []float32 {
	if cap(x) < n {
		return make([]float32, n)
	}
	return x[:n]
}

// packPanelsA writes op(A) (m x k) as panels of gemmMR rows: panel p holds
// element (p gemmMR + r, l) at [l gemmMR + r]; rows past m are zero.
func packPanelsA(dst []float32, tA bool, m, k int, a []float32, lda int) {
	for p := 0; p*gemmMR < m; p++ {
		panel := dst[p*gemmMR*k : (p+1)*gemmMR*k]
		i0, rows := p*gemmMR, min(gemmMR, m-p*gemmMR)
		if tA { // op(A)[i, l] = a[l lda + i]: 6 contiguous values per l
			for l := range k {
				out := panel[l*gemmMR : (l+1)*gemmMR]
				copy(out[:rows], a[l*lda+i0:])
				clear(out[rows:])
			}
			continue
		}
		if rows < gemmMR {
			for l := range k {
				out := panel[l*gemmMR : (l+1)*gemmMR]
				for r := range gemmMR {
					out[r] = 0
					if r < rows {
						out[r] = a[(i0+r)*lda+l]
					}
				}
			}
			continue
		}
		r0, r1, r2 := a[i0*lda:][:k], a[(i0+1)*lda:][:k], a[(i0+2)*lda:][:k]
		r3, r4, r5 := a[(i0+3)*lda:][:k], a[(i0+4)*lda:][:k], a[(i0+5)*lda:][:k]
		for l := range k {
			out := panel[l*gemmMR : l*gemmMR+gemmMR : l*gemmMR+gemmMR]
			out[0], out[1], out[2], out[3], out[4], out[5] = r0[l], r1[l], r2[l], r3[l], r4[l], r5[l]
		}
	}
}

// packPanelsB writes op(B) (k x n) as panels of gemmNR columns: panel q
// holds element (l, q gemmNR + j) at [l gemmNR + j]; columns past n are
// zero.
func packPanelsB(dst []float32, tB bool, k, n int, b []float32, ldb int) {
	for q := 0; q*gemmNR < n; q++ {
		panel := dst[q*gemmNR*k : (q+1)*gemmNR*k]
		j0, cols := q*gemmNR, min(gemmNR, n-q*gemmNR)
		if !tB {
			for l := range k {
				out := panel[l*gemmNR : (l+1)*gemmNR]
				copy(out[:cols], b[l*ldb+j0:])
				clear(out[cols:])
			}
			continue
		}
		// op(B)[l, j] = b[j ldb + l]: read each of the panel's rows of b
		// contiguously, write it down a column of the panel.
		for j := range gemmNR {
			if j >= cols {
				for l := range k {
					panel[l*gemmNR+j] = 0
				}
				continue
			}
			row := b[(j0+j)*ldb:][:k]
			col := panel[j:]
			for l, v := range row {
				col[l*gemmNR] = v
			}
		}
	}
}

// microKernelGo is the portable micro-kernel: tile = A panel x B panel
// over k (gemmMR x gemmNR, row-major).
func microKernelGo(k int, a, b []float32, tile *[gemmMR * gemmNR]float32) {
	var acc [gemmMR * gemmNR]float32
	for l := range k {
		bl := b[l*gemmNR : (l+1)*gemmNR]
		al := a[l*gemmMR : (l+1)*gemmMR]
		for r, av := range al {
			row := acc[r*gemmNR : (r+1)*gemmNR]
			for j, bv := range bl {
				row[j] += av * bv
			}
		}
	}
	*tile = acc
}
