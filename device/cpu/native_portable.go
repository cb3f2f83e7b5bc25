package cpu

// The portable micro-kernel and packing routines: the native GEMM's
// kernel where there is no assembly one, and the packing of the AVX2
// kernel.

const goMR, goNR = 4, 4

var goKernel = &nativeKernel{
	name: "go", mr: goMR, nr: goNR,
	micro:   microGo,
	packAT:  packATGo(goMR),
	packATG: packATGGo(goMR, packATGo(goMR)),
	packBN:  packBNGo(goNR),
	packBT:  packBTGo(goNR),
	packBNB: packBNBGo(goNR, packBNGo(goNR)),
}

// microGo is the portable micro-kernel: a 4 x 4 block of C in 16 local
// variables, which the compiler keeps in registers (arm64 has 32).
func microGo(k int, a []float32, rs, cs int, b []float32, c []float32, ldc int, alpha, beta float32, rows, cols int) {
	var c00, c01, c02, c03, c10, c11, c12, c13, c20, c21, c22, c23, c30, c31, c32, c33 float32
	b = b[:4*k]
	for l := 0; l < k; l++ {
		bl := (*[4]float32)(b[4*l:])
		b0, b1, b2, b3 := bl[0], bl[1], bl[2], bl[3]
		o := l * cs
		a0, a1, a2, a3 := a[o], a[o+rs], a[o+2*rs], a[o+3*rs]
		c00 += a0 * b0
		c01 += a0 * b1
		c02 += a0 * b2
		c03 += a0 * b3
		c10 += a1 * b0
		c11 += a1 * b1
		c12 += a1 * b2
		c13 += a1 * b3
		c20 += a2 * b0
		c21 += a2 * b1
		c22 += a2 * b2
		c23 += a2 * b3
		c30 += a3 * b0
		c31 += a3 * b1
		c32 += a3 * b2
		c33 += a3 * b3
	}
	acc := [goMR * goNR]float32{c00, c01, c02, c03, c10, c11, c12, c13, c20, c21, c22, c23, c30, c31, c32, c33}
	storeTile(acc[:], goNR, c, ldc, alpha, beta, rows, cols)
}

// storeTile writes C = alpha acc + beta C on rows x cols of c (acc with
// row pitch pitch; beta 0: C not read).
func storeTile(acc []float32, pitch int, c []float32, ldc int, alpha, beta float32, rows, cols int) {
	for r := 0; r < rows; r++ {
		crow := c[r*ldc : r*ldc+cols]
		t := acc[r*pitch : r*pitch+cols]
		if beta == 0 {
			for jj := range crow {
				crow[jj] = alpha * t[jj]
			}
		} else {
			for jj := range crow {
				crow[jj] = alpha*t[jj] + beta*crow[jj]
			}
		}
	}
}

// packATGo returns the portable packAT for mr rows.
func packATGo(mr int) func(dst, a []float32, lda, k, rows int) {
	return func(dst, a []float32, lda, k, rows int) {
		for l := 0; l < k; l++ {
			d := dst[l*mr : (l+1)*mr]
			copy(d[:rows], a[l*lda:l*lda+rows])
			clear(d[rows:])
		}
	}
}

// packBNGo returns the portable packBN for nr columns.
func packBNGo(nr int) func(dst, b []float32, ldb, k, cols int) {
	return func(dst, b []float32, ldb, k, cols int) {
		for l := 0; l < k; l++ {
			d := dst[l*nr : (l+1)*nr]
			copy(d[:cols], b[l*ldb:l*ldb+cols])
			clear(d[cols:])
		}
	}
}

// packBTGo returns the portable packBT for nr columns: each of the cols
// rows of b (k floats) goes down one column of the panel.
func packBTGo(nr int) func(dst, b []float32, ldb, k, cols int) {
	return func(dst, b []float32, ldb, k, cols int) {
		dst = dst[:k*nr]
		for jj := 0; jj < nr; jj++ {
			if jj >= cols {
				for l := 0; l < k; l++ {
					dst[l*nr+jj] = 0
				}
				continue
			}
			row := b[jj*ldb : jj*ldb+k]
			for l, v := range row {
				dst[l*nr+jj] = v
			}
		}
	}
}

// packATGGo returns a packATG that packs one micro-panel after the other
// with packAT.
func packATGGo(mr int, packAT func(dst, a []float32, lda, k, rows int)) func(dst, a []float32, lda, k, rows int) {
	return func(dst, a []float32, lda, k, rows int) {
		for g := 0; g*mr < rows; g++ {
			packAT(dst[g*mr*k:(g+1)*mr*k], a[g*mr:], lda, k, min(mr, rows-g*mr))
		}
	}
}

// packBNBGo returns a packBNB that packs one panel after the other with
// packBN.
func packBNBGo(nr int, packBN func(dst, b []float32, ldb, k, cols int)) func(dst, b []float32, ldb, k, cols int) {
	return func(dst, b []float32, ldb, k, cols int) {
		for q := 0; q*nr < cols; q++ {
			packBN(dst[q*nr*k:(q+1)*nr*k], b[q*nr:], ldb, k, min(nr, cols-q*nr))
		}
	}
}
