package cpu

import "unsafe"

// The portable micro-kernel and packing routines: the native GEMM's
// kernel where there is no assembly one, and the packing of the AVX2
// kernel.

// goMR x goNR is the portable kernel's register block. The tile is small
// because Go keeps float32 accumulators in scalar registers: amd64 has 15
// for floats, and a 4 x 4 block (16 accumulators) spills to the stack on
// every step; 2 x 4 fits there and everywhere else (arm64 and riscv64 have
// 32). Measured on the 2-core AVX-512 development machine with -tags noasm
// (gonum's pure Go, as on every GOARCH but amd64), kernels forced, 512^3,
// best of 15 taking turns in one run: this kernel 8.7 GFLOP/s on one core
// and 11.0 on two, the previous 4 x 4 one (bounds-checked) 4.8, 4 x 8 and
// 8 x 4 4.6-4.9, gonum 4.4 and 4.7; on the nt, tn and tt products 8.2-9.1
// against gonum's 1.4-5.2. To compare again:
//
//	go test -tags noasm -run '^$' -bench 'NativeKernels/.*/(go|gonum)' ./device/cpu
const goMR, goNR = 2, 4

var goKernel = &nativeKernel{
	name: "go", mr: goMR, nr: goNR,
	micro:   microGo,
	packAT:  packRowsGo(goMR),
	packATG: packPanelsGo(goMR, packRowsGo(goMR)),
	packBN:  packRowsGo(goNR),
	packBT:  packBTGo(goNR),
	packBNB: packPanelsGo(goNR, packRowsGo(goNR)),
}

// microGo is the portable micro-kernel: a 2 x 4 block of C in 8 local
// variables, which the compiler keeps in registers (and fuses into FMA
// instructions on arm64, ppc64 and riscv64), over k steps unrolled by two.
// A is read at a[r rs + l cs] (r < 2, l < k) and B at b[4 l + j]; both are
// checked once against their largest index, then read through unsafe
// pointers so that the loop carries no bounds checks.
func microGo(k int, a []float32, rs, cs int, b []float32, c []float32, ldc int, alpha, beta float32, rows, cols int) {
	var c00, c01, c02, c03, c10, c11, c12, c13 float32
	_ = b[goNR*k-1]
	_ = a[(k-1)*cs+(goMR-1)*rs] // rs, cs >= 0: every index read is below this one
	pa, pb := unsafe.Pointer(&a[0]), unsafe.Pointer(&b[0])
	rs4, cs4 := uintptr(rs)*4, uintptr(cs)*4
	l := 0
	for ; l+2 <= k; l += 2 {
		b0 := (*[goNR]float32)(unsafe.Add(pb, uintptr(l)*goNR*4))
		p := unsafe.Add(pa, uintptr(l)*cs4)
		a0, a1 := *(*float32)(p), *(*float32)(unsafe.Add(p, rs4))
		c00 += a0 * b0[0]
		c01 += a0 * b0[1]
		c02 += a0 * b0[2]
		c03 += a0 * b0[3]
		c10 += a1 * b0[0]
		c11 += a1 * b0[1]
		c12 += a1 * b0[2]
		c13 += a1 * b0[3]
		b1 := (*[goNR]float32)(unsafe.Add(pb, uintptr(l+1)*goNR*4))
		p = unsafe.Add(p, cs4)
		a0, a1 = *(*float32)(p), *(*float32)(unsafe.Add(p, rs4))
		c00 += a0 * b1[0]
		c01 += a0 * b1[1]
		c02 += a0 * b1[2]
		c03 += a0 * b1[3]
		c10 += a1 * b1[0]
		c11 += a1 * b1[1]
		c12 += a1 * b1[2]
		c13 += a1 * b1[3]
	}
	if l < k {
		bl := (*[goNR]float32)(unsafe.Add(pb, uintptr(l)*goNR*4))
		p := unsafe.Add(pa, uintptr(l)*cs4)
		a0, a1 := *(*float32)(p), *(*float32)(unsafe.Add(p, rs4))
		c00 += a0 * bl[0]
		c01 += a0 * bl[1]
		c02 += a0 * bl[2]
		c03 += a0 * bl[3]
		c10 += a1 * bl[0]
		c11 += a1 * bl[1]
		c12 += a1 * bl[2]
		c13 += a1 * bl[3]
	}
	acc := [goMR * goNR]float32{c00, c01, c02, c03, c10, c11, c12, c13}
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

// packRowsGo returns the portable packAT for width = mr rows and packBN
// for width = nr columns: row l < k of x (at l ld, n floats) goes to row l
// of the panel, zero-padded to width.
func packRowsGo(width int) func(dst, x []float32, ld, k, n int) {
	return func(dst, x []float32, ld, k, n int) {
		for l := 0; l < k; l++ {
			d := dst[l*width : (l+1)*width]
			copy(d[:n], x[l*ld:l*ld+n])
			clear(d[n:])
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

// packPanelsGo returns a packATG (width mr, pack a packAT) or a packBNB
// (width nr, pack a packBN) that packs one micro-panel after the other
// with pack.
func packPanelsGo(width int, pack func(dst, x []float32, ld, k, n int)) func(dst, x []float32, ld, k, n int) {
	return func(dst, x []float32, ld, k, n int) {
		for q := 0; q*width < n; q++ {
			pack(dst[q*width*k:(q+1)*width*k], x[q*width:], ld, k, min(width, n-q*width))
		}
	}
}
