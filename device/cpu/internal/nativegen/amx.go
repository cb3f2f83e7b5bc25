package main

// The bfloat16 kernel for AMX: a 32 x 32 block of C in four float32 tiles
// (tmm0-3: rows 0-15 and 16-31 by columns 0-15 and 16-31), each step of 32
// K loading A's two 16-row tiles (tmm4, tmm5, straight from A's rows) and
// B's two 16-column tiles (tmm6, tmm7, from the pair-interleaved panel:
// 16 pairs of K, 64 bytes of each 128-byte pair row) and running four
// TDPBF16PS. One call runs every 32-column panel of a block of C for one
// 32-row micro-panel of A, so that the tile configuration is loaded once.
// With alpha 1 and beta 0 a full block of sums is stored straight into C;
// otherwise the sums go through a 32 x 32 scratch block, from which alpha
// and beta are applied as in the AVX-512 kernels.

// amxKernel writes amxKernel32x32 and the tile configuration it loads.
//
// funclen: as avx512Kernel, one kernel's instructions in order.
func amxKernel() {
	p(`
// The tile configuration: palette 1, tmm0-7 of 16 rows of 64 bytes.
DATA amxTileConfig<>+0(SB)/8, $1
DATA amxTileConfig<>+16(SB)/8, $0x0040004000400040
DATA amxTileConfig<>+24(SB)/8, $0x0040004000400040
DATA amxTileConfig<>+48(SB)/8, $0x1010101010101010
GLOBL amxTileConfig<>(SB), RODATA|NOPTR, $64

// func amxKernel32x32(steps int, a *uint16, lda uintptr, b *uint32, panels int, c *float32, ldc int, alpha, beta float32, rows int, mask uint32, scratch *float32)
// C = alpha A B + beta C on rows 0..rows-1 of a 32-row block of C (row
// pitch ldc elements) over panels blocks of 32 columns (in the last, the
// columns of mask), A and B bfloat16, products by TDPBF16PS accumulated in
// float32: row r of A holds 32 steps bfloat16 of K at a + r lda (bytes);
// the B panels follow each other at b, steps*2048 bytes each (16 pairs of K
// by 32 columns per step, 128 bytes per pair). scratch takes 32 x 32
// float32. C is not read when beta is 0. steps, panels, rows >= 1.
TEXT ·amxKernel32x32(SB), NOSPLIT, $0-88
	MOVQ a+8(FP), SI
	MOVQ lda+16(FP), R8
	MOVQ b+24(FP), DI
	MOVQ panels+32(FP), R12
	MOVQ c+40(FP), DX
	MOVQ ldc+48(FP), BX
	SHLQ $2, BX
	MOVQ rows+64(FP), R13
	MOVQ $128, R9
	MOVQ R8, CX
	SHLQ $4, CX
	VBROADCASTSS alpha+56(FP), Z30
	VBROADCASTSS beta+60(FP), Z31
	VXORPS X29, X29, X29
	MOVL $0x3f800000, AX
	VMOVD AX, X28
	LEAQ amxTileConfig<>(SB), AX`)
	emit(ldtilecfg(mem{reg("AX"), -1, 0}))
	p(`	MOVL $0xffff, AX
	KMOVW AX, K1
	KMOVW AX, K2
amxpanel:
	CMPQ R12, $1
	JNE amxfull
	MOVL mask+72(FP), AX
	KMOVW AX, K1
	SHRL $16, AX
	KMOVW AX, K2
amxfull:`)
	for t := 0; t < 4; t++ {
		emit(tilezero(t))
	}
	p(`	MOVQ SI, R10
	LEAQ (SI)(CX*1), R11
	MOVQ steps+0(FP), AX
amxstep:`)
	emit(tileloadd(4, mem{reg("R10"), reg("R8"), 0}))
	emit(tileloadd(5, mem{reg("R11"), reg("R8"), 0}))
	emit(tileloadd(6, mem{reg("DI"), reg("R9"), 0}))
	emit(tileloadd(7, mem{reg("DI"), reg("R9"), 64}))
	emit(tdpbf16ps(0, 4, 6))
	emit(tdpbf16ps(1, 4, 7))
	emit(tdpbf16ps(2, 5, 6))
	emit(tdpbf16ps(3, 5, 7))
	p(`	ADDQ $64, R10
	ADDQ $64, R11
	ADDQ $2048, DI
	DECQ AX
	JNZ amxstep`)
	// alpha 1, beta 0 on a full 32 x 32 block: C is the tiles, stored
	// straight there (alpha*acc = acc bit for bit).
	p(`	CMPQ R13, $32
	JNE amxscratch
	CMPQ R12, $1
	JNE amxwhole
	CMPL mask+72(FP), $-1
	JNE amxscratch
amxwhole:
	VUCOMISS X29, X31
	JNE amxscratch
	JPS amxscratch
	VUCOMISS X28, X30
	JNE amxscratch
	JPS amxscratch`)
	emit(tilestored(mem{reg("DX"), reg("BX"), 0}, 0))
	emit(tilestored(mem{reg("DX"), reg("BX"), 64}, 1))
	p(`	LEAQ (DX)(BX*8), R11
	LEAQ (R11)(BX*8), R11`)
	emit(tilestored(mem{reg("R11"), reg("BX"), 0}, 2))
	emit(tilestored(mem{reg("R11"), reg("BX"), 64}, 3))
	p(`	JMP amxnext
amxscratch:
	MOVQ scratch+80(FP), AX`)
	emit(tilestored(mem{reg("AX"), reg("R9"), 0}, 0))
	emit(tilestored(mem{reg("AX"), reg("R9"), 64}, 1))
	emit(tilestored(mem{reg("AX"), reg("R9"), 2048}, 2))
	emit(tilestored(mem{reg("AX"), reg("R9"), 2112}, 3))
	// beta == 0 (and not NaN) skips reading C, as in the AVX-512 kernels.
	p(`	MOVQ DX, R11
	MOVQ R13, R10
	VUCOMISS X29, X31
	JNE amxbeta
	JPS amxbeta
amxrow0:
	VMULPS (AX), Z30, Z0
	VMULPS 64(AX), Z30, Z1
	VMOVUPS Z0, K1, (R11)
	VMOVUPS Z1, K2, 64(R11)
	ADDQ $128, AX
	ADDQ BX, R11
	DECQ R10
	JNZ amxrow0
	JMP amxnext
amxbeta:
	VMULPS (AX), Z30, Z0
	VMULPS 64(AX), Z30, Z1
	VFMADD231PS (R11), Z31, K1, Z0
	VFMADD231PS 64(R11), Z31, K2, Z1
	VMOVUPS Z0, K1, (R11)
	VMOVUPS Z1, K2, 64(R11)
	ADDQ $128, AX
	ADDQ BX, R11
	DECQ R10
	JNZ amxbeta
amxnext:
	ADDQ $128, DX
	DECQ R12
	JNZ amxpanel`)
	emit(tilerelease())
	p("\tVZEROUPPER")
	p("\tRET")
}
