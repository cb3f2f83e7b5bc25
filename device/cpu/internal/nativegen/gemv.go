package main

// The AVX-512 kernel of the native GEMM's small-M path (gemv.go in
// device/cpu): up to 8 rows of A against 16 rows of a transposed B, the
// 16 x 16 tiles of B transposed in registers, with the packed kernel's
// arithmetic.

import "fmt"

// Registers: the accumulators of rows 0-7 are Z0-Z7 (16 columns each);
// the B tile and its transposition use Z8-Z25 (16 live and two being
// written), the broadcast A value Z26. A's rows 0-3 are at SI, SI+lda
// (R8), SI+2 lda and SI+3 lda (R9 = 3 lda), rows 4-7 the same from R10;
// B's rows 0-3 at DI, DI+ldb (R12), DI+2 ldb, DI+3 ldb (R13 = 3 ldb), rows
// 4-7, 8-11 and 12-15 the same from BX, DX and R11. CX counts the tiles
// left, AX the valid k of the current one.

// gemvPrefetch is how far ahead in each of its 16 rows of B the kernel
// prefetches (bytes; 0: not at all). The kernel reads 16 rows side by
// side, one line of each per tile, streams too short and too many (2.3 KB
// each for Llama's 576-wide weights) for the hardware prefetcher to run
// ahead of: a decode step's weights, 30 layers of them, then stream at
// 14-15 GB/s, 18-19 with 512 bytes ahead (BenchmarkGemvDecode).
var gemvPrefetch = 512

func gemvAAddr(r, l int) string {
	base := []string{"SI", "R10"}[r/4]
	idx := []string{"", "(R8*1)", "(R8*2)", "(R9*1)"}[r%4]
	return fmt.Sprintf("%d(%s)%s", 4*l, base, idx)
}

func gemvBAddr(j int) string {
	base := []string{"DI", "BX", "DX", "R11"}[j/4]
	idx := []string{"", "(R12*1)", "(R12*2)", "(R13*1)"}[j%4]
	return fmt.Sprintf("(%s)%s", base, idx)
}

// gemvKernel writes sgemvKernel8x16.
//
// funclen: one kernel's instructions in order (the dispatch on rows, a
// tile loop per row count, the shared store); the register assignment
// spans the whole of it.
func gemvKernel() {
	p(`
// func sgemvKernel8x16(k int, a *float32, lda uintptr, rows int, b *float32, ldb uintptr, c *float32, ldc int, alpha, beta float32, mask, tail, tmask uint32)
// C = alpha A B^T + beta C on rows 0..rows-1 (1 to 8) and the columns of
// mask (bit j: column j) of an 8 x 16 block of C (row pitch ldc elements):
// A is read at a + r lda + 4 l (bytes), B at b + j ldb + 4 l, for l < k
// (k >= 1; tail = k mod 16, or 16, and tmask its low tail bits). Each sum is the packed kernel's
// (sgemmKernel12x32): one FMA chain over l in order, then alpha, then
// beta C by FMA; C is not read when beta is 0.
TEXT ·sgemvKernel8x16(SB), NOSPLIT, $0-84
	MOVQ k+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ lda+16(FP), R8
	MOVQ b+32(FP), DI
	MOVQ ldb+40(FP), R12
	LEAQ (R8)(R8*2), R9
	LEAQ (SI)(R8*4), R10
	LEAQ (R12)(R12*2), R13
	LEAQ (DI)(R12*4), BX
	LEAQ (BX)(R12*4), DX
	LEAQ (DX)(R12*4), R11
	ADDQ $15, CX
	SHRQ $4, CX
	MOVW $0xffff, AX
	KMOVW AX, K1
	MOVQ rows+24(FP), AX`)
	for i := 0; i < 8; i++ {
		p("\tVPXORD Z%d, Z%d, Z%d", i, i, i)
	}
	for r := 1; r < 8; r++ {
		p("\tCMPQ AX, $%d", r)
		p("\tJEQ rows%d", r)
	}
	for rows := 8; rows >= 1; rows-- {
		gemvTileLoop(rows)
	}
	gemvStore()
}

// gemvTileLoop writes the loop over the 16 x 16 tiles of B for rows rows of A:
// load (the last tile masked to its valid k), transpose, then one FMA step
// per valid l.
func gemvTileLoop(rows int) {
	p("rows%d:", rows)
	p("\tMOVQ $16, AX")
	p("tile%d:", rows)
	p("\tCMPQ CX, $1")
	p("\tJNE full%d", rows)
	p("\tMOVL tmask+80(FP), AX")
	p("\tKMOVW AX, K1")
	p("\tMOVL tail+76(FP), AX")
	p("full%d:", rows)
	cols := gemvTranspose()
	for l := 0; l < 16; l++ {
		if l > 0 {
			p("\tCMPQ AX, $%d", l)
			p("\tJLE next%d", rows)
		}
		for r := 0; r < rows; r++ {
			p("\tVBROADCASTSS %s, Z26", gemvAAddr(r, l))
			p("\tVFMADD231PS Z%d, Z26, Z%d", cols[l], r)
		}
	}
	p("next%d:", rows)
	for _, reg := range []string{"SI", "R10", "DI", "BX", "DX", "R11"} {
		p("\tADDQ $64, %s", reg)
	}
	p("\tDECQ CX")
	p("\tJNE tile%d", rows)
	p("\tJMP store")
}

// gemvTranspose loads the 16 rows of the B tile (masked by K1, zero beyond)
// and transposes them in four stages of pairwise shuffles, each output
// written to a free register; it returns the register holding column l
// (B[0:16, l]) for each l.
func gemvTranspose() [16]int {
	free := []int{24, 25}
	var cur [16]int
	for j := 0; j < 16; j++ {
		cur[j] = 8 + j
		p("\tVMOVUPS.Z %s, K1, Z%d", gemvBAddr(j), cur[j])
		if gemvPrefetch > 0 {
			p("\tPREFETCHT0 %d%s", gemvPrefetch, gemvBAddr(j))
		}
	}
	// pair emits two instructions reading x and y into two free
	// registers, then frees x and y.
	pair := func(opLo, opHi string, immLo, immHi string, x, y int) (lo, hi int) {
		lo, hi = free[0], free[1]
		// Go operand order: second source, first source, destination.
		p("\t%s %sZ%d, Z%d, Z%d", opLo, immLo, y, x, lo)
		p("\t%s %sZ%d, Z%d, Z%d", opHi, immHi, y, x, hi)
		free = []int{x, y}
		return lo, hi
	}
	var next [16]int
	// Stage 1: interleave floats of rows 2i, 2i+1.
	for i := 0; i < 8; i++ {
		next[2*i], next[2*i+1] = pair("VUNPCKLPS", "VUNPCKHPS", "", "", cur[2*i], cur[2*i+1])
	}
	cur = next
	// Stage 2: interleave float pairs of t(4i), t(4i+2) and t(4i+1), t(4i+3).
	for i := 0; i < 4; i++ {
		b := 4 * i
		next[b], next[b+1] = pair("VUNPCKLPD", "VUNPCKHPD", "", "", cur[b], cur[b+2])
		next[b+2], next[b+3] = pair("VUNPCKLPD", "VUNPCKHPD", "", "", cur[b+1], cur[b+3])
	}
	cur = next
	// Stage 3: 128-bit lanes of u(i), u(i+4) within each half of eight.
	for h := 0; h < 2; h++ {
		for i := 0; i < 4; i++ {
			x, y := cur[8*h+i], cur[8*h+i+4]
			next[8*h+i], next[8*h+i+4] = pair("VSHUFF32X4", "VSHUFF32X4", "$0x88, ", "$0xdd, ", x, y)
		}
	}
	cur = next
	// Stage 4: 128-bit lanes of v(i), v(i+8).
	for i := 0; i < 8; i++ {
		next[i], next[i+8] = pair("VSHUFF32X4", "VSHUFF32X4", "$0x88, ", "$0xdd, ", cur[i], cur[i+8])
	}
	return next
}

// gemvStore writes C as the packed kernel does: alpha times the sums, then
// beta C added by FMA unless beta is 0 (C not read), under the column
// mask.
func gemvStore() {
	p("store:")
	p("\tVBROADCASTSS alpha+64(FP), Z26")
	for r := 0; r < 8; r++ {
		p("\tVMULPS Z26, Z%d, Z%d", r, r)
	}
	p("\tMOVL mask+72(FP), AX")
	p("\tKMOVW AX, K2")
	p("\tMOVQ c+48(FP), DX")
	p("\tMOVQ ldc+56(FP), BX")
	p("\tSHLQ $2, BX")
	p("\tMOVQ rows+24(FP), R13")
	p("\tVMOVSS beta+68(FP), X27")
	p("\tVXORPS X26, X26, X26")
	p("\tVUCOMISS X26, X27")
	// beta == 0 (and not NaN: unordered sets ZF and PF) skips reading C.
	p("\tJNE beta")
	p("\tJPS beta")
	for r := 0; r < 8; r++ {
		if r > 0 {
			p("\tCMPQ R13, $%d", r)
			p("\tJLE end")
			p("\tADDQ BX, DX")
		}
		p("\tVMOVUPS Z%d, K2, (DX)", r)
	}
	p("\tJMP end")
	p("beta:")
	p("\tVBROADCASTSS beta+68(FP), Z27")
	for r := 0; r < 8; r++ {
		if r > 0 {
			p("\tCMPQ R13, $%d", r)
			p("\tJLE end")
			p("\tADDQ BX, DX")
		}
		p("\tVFMADD231PS (DX), Z27, K2, Z%d", r)
		p("\tVMOVUPS Z%d, K2, (DX)", r)
	}
	p("end:")
	p("\tVZEROUPPER")
	p("\tRET")
}
