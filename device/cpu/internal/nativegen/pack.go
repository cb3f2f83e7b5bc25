package main

// The AVX-512 packing routines of the float32 (and bfloat16) GEMM: A and B
// micro-panels from stored or transposed operands.

// packA12T writes packA12T: the interleaved A micro-panel of a transposed
// A, 12 contiguous floats (the rows of mask) per k.
func packA12T() {
	p(`
// func packA12T(dst, src *float32, lda uintptr, k int, mask uint16)
// dst[l*12 + r] = src[l*lda + r] (lda in bytes) for the rows r of mask, 0
// for the others, l < k.
TEXT ·packA12T(SB), NOSPLIT, $0-34
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ lda+16(FP), R8
	MOVQ k+24(FP), CX
	MOVWLZX mask+32(FP), AX
	KMOVW AX, K1
	MOVL $0x0fff, AX
	KMOVW AX, K2
	LEAQ (R8)(R8*2), R9
	CMPQ CX, $4
	JLT pa12tail
pa12loop4:
	VMOVUPS.Z (SI), K1, Z0
	VMOVUPS.Z (SI)(R8*1), K1, Z1
	VMOVUPS.Z (SI)(R8*2), K1, Z2
	VMOVUPS.Z (SI)(R9*1), K1, Z3
	VMOVUPS Z0, K2, (DI)
	VMOVUPS Z1, K2, 48(DI)
	VMOVUPS Z2, K2, 96(DI)
	VMOVUPS Z3, K2, 144(DI)
	LEAQ (SI)(R8*4), SI
	ADDQ $192, DI
	SUBQ $4, CX
	CMPQ CX, $4
	JGE pa12loop4
pa12tail:
	TESTQ CX, CX
	JZ pa12done
pa12loop1:
	VMOVUPS.Z (SI), K1, Z0
	VMOVUPS Z0, K2, (DI)
	ADDQ R8, SI
	ADDQ $48, DI
	DECQ CX
	JNZ pa12loop1
pa12done:
	VZEROUPPER
	RET`)
}

// packA12TG writes packA12TG: several consecutive interleaved micro-panels
// of a transposed A at once, so that each row of A is read once, in order
// (one micro-panel at a time would revisit every row's lines per panel).
func packA12TG() {
	p(`
// func packA12TG(dst, src *float32, lda uintptr, k, panels int, mask uint16)
// For g < panels, l < k, r < 12: dst[g*12*k + l*12 + r] = src[l*lda + 12 g
// + r] (lda in bytes); in the last panel only the rows of mask, zero for the
// others. panels >= 1.
TEXT ·packA12TG(SB), NOSPLIT, $0-42
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ lda+16(FP), R8
	MOVQ k+24(FP), CX
	MOVQ panels+32(FP), R9
	DECQ R9
	MOVWLZX mask+40(FP), AX
	KMOVW AX, K3
	MOVL $0x0fff, AX
	KMOVW AX, K2
	MOVQ CX, R10
	IMULQ $48, R10
	// Rows but the last: the full panels move 16 floats, the 4 past the
	// panel's 12 overwritten by the next row (or, from A, left unused);
	// the last row stores 12 only.
	DECQ CX
	JZ pa12glastrow
pa12grow:
	MOVQ SI, R11
	MOVQ DI, R12
	MOVQ R9, R13
	TESTQ R13, R13
	JZ pa12glast
pa12gpanel:
	VMOVUPS (R11), Z0
	VMOVUPS Z0, (R12)
	ADDQ $48, R11
	ADDQ R10, R12
	DECQ R13
	JNZ pa12gpanel
pa12glast:
	VMOVUPS.Z (R11), K3, Z0
	VMOVUPS Z0, K2, (R12)
	ADDQ R8, SI
	ADDQ $48, DI
	DECQ CX
	JNZ pa12grow
pa12glastrow:
	MOVQ R9, R13
	TESTQ R13, R13
	JZ pa12glastlast
pa12glastpanel:
	VMOVUPS.Z (SI), K2, Z0
	VMOVUPS Z0, K2, (DI)
	ADDQ $48, SI
	ADDQ R10, DI
	DECQ R13
	JNZ pa12glastpanel
pa12glastlast:
	VMOVUPS.Z (SI), K3, Z0
	VMOVUPS Z0, K2, (DI)
	VZEROUPPER
	RET`)
}

// packB32N writes packB32N: a packed 32-column B panel from a B stored
// k x n (rows contiguous).
func packB32N() {
	p(`
// func packB32N(dst, src *float32, ldb uintptr, k int, mask uint32)
// dst[l*32 + j] = src[l*ldb + j] (ldb in bytes) for the columns j of mask,
// 0 for the others, l < k.
TEXT ·packB32N(SB), NOSPLIT, $0-36
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ ldb+16(FP), R8
	MOVQ k+24(FP), CX
	MOVL mask+32(FP), AX
	KMOVW AX, K1
	SHRL $16, AX
	KMOVW AX, K2
	LEAQ (R8)(R8*2), R9
	CMPQ CX, $4
	JLT pb32ntail
pb32nloop4:
	VMOVUPS.Z (SI), K1, Z0
	VMOVUPS.Z 64(SI), K2, Z1
	VMOVUPS.Z (SI)(R8*1), K1, Z2
	VMOVUPS.Z 64(SI)(R8*1), K2, Z3
	VMOVUPS.Z (SI)(R8*2), K1, Z4
	VMOVUPS.Z 64(SI)(R8*2), K2, Z5
	VMOVUPS.Z (SI)(R9*1), K1, Z6
	VMOVUPS.Z 64(SI)(R9*1), K2, Z7
	VMOVUPS Z0, (DI)
	VMOVUPS Z1, 64(DI)
	VMOVUPS Z2, 128(DI)
	VMOVUPS Z3, 192(DI)
	VMOVUPS Z4, 256(DI)
	VMOVUPS Z5, 320(DI)
	VMOVUPS Z6, 384(DI)
	VMOVUPS Z7, 448(DI)
	LEAQ (SI)(R8*4), SI
	ADDQ $512, DI
	SUBQ $4, CX
	CMPQ CX, $4
	JGE pb32nloop4
pb32ntail:
	TESTQ CX, CX
	JZ pb32ndone
pb32nloop1:
	VMOVUPS.Z (SI), K1, Z0
	VMOVUPS.Z 64(SI), K2, Z1
	VMOVUPS Z0, (DI)
	VMOVUPS Z1, 64(DI)
	ADDQ R8, SI
	ADDQ $128, DI
	DECQ CX
	JNZ pb32nloop1
pb32ndone:
	VZEROUPPER
	RET`)
}

// packB32NB writes packB32NB: all the 32-column panels of a block of a B
// stored k x n, row after row, so that each row of B is read once, in
// order (panel after panel would read every row in 128-byte pieces, each
// a cache miss of its own on a wide B).
func packB32NB() {
	p(`
// func packB32NB(dst, src *float32, ldb uintptr, k, panels int, mask uint32)
// For q < panels, l < k, j < 32: dst[q*32*k + l*32 + j] = src[l*ldb + 32 q
// + j] (ldb in bytes); in the last panel only the columns of mask, zero for
// the others. panels >= 1.
TEXT ·packB32NB(SB), NOSPLIT, $0-44
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ ldb+16(FP), R8
	MOVQ k+24(FP), CX
	MOVQ panels+32(FP), R9
	DECQ R9
	MOVL mask+40(FP), AX
	KMOVW AX, K1
	SHRL $16, AX
	KMOVW AX, K2
	MOVQ CX, R10
	SHLQ $7, R10
pb32nbrow:
	MOVQ SI, R11
	MOVQ DI, R12
	MOVQ R9, R13
	TESTQ R13, R13
	JZ pb32nblast
pb32nbpanel:
	VMOVUPS (R11), Z0
	VMOVUPS 64(R11), Z1
	VMOVUPS Z0, (R12)
	VMOVUPS Z1, 64(R12)
	ADDQ $128, R11
	ADDQ R10, R12
	DECQ R13
	JNZ pb32nbpanel
pb32nblast:
	VMOVUPS.Z (R11), K1, Z0
	VMOVUPS.Z 64(R11), K2, Z1
	VMOVUPS Z0, (R12)
	VMOVUPS Z1, 64(R12)
	ADDQ R8, SI
	ADDQ $128, DI
	DECQ CX
	JNZ pb32nbrow
	VZEROUPPER
	RET`)
}

// packB32T writes packB32T16: 16 k of a packed 32-column B panel from a B
// stored n x k (op(B) = B^T): two 16 x 16 transposes of the 32 rows.
func packB32T() {
	p(`
// func packB32T16(dst, src *float32, ldb uintptr)
// dst[l*32 + j] = src[j*ldb + l] (ldb in bytes) for j < 32, l < 16: 16 k of
// a packed panel from 32 full rows of a transposed B.
TEXT ·packB32T16(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ ldb+16(FP), R8
	LEAQ (R8)(R8*2), R9
	MOVQ $2, CX
pb32thalf:`)
	// Load 16 rows (16 floats each) into Z0-Z15.
	for i := 0; i < 16; i++ {
		switch i % 4 {
		case 0:
			p("\tVMOVUPS (SI), Z%d", i)
		case 1:
			p("\tVMOVUPS (SI)(R8*1), Z%d", i)
		case 2:
			p("\tVMOVUPS (SI)(R8*2), Z%d", i)
		case 3:
			p("\tVMOVUPS (SI)(R9*1), Z%d", i)
			p("\tLEAQ (SI)(R8*4), SI")
		}
	}
	transpose16()
	for l := 0; l < 16; l++ {
		p("\tVMOVUPS Z%d, %d(DI)", l, l*128)
	}
	p("\tADDQ $64, DI")
	p("\tDECQ CX")
	p("\tJNZ pb32thalf")
	p("\tVZEROUPPER")
	p("\tRET")
}

// transpose16 writes the transpose of the 16 x 16 32-bit matrix in Z0-Z15
// (row i in Z(i)) into Z0-Z15, with Z16-Z31 as scratch: after it, Z(l)
// holds row l of the transpose, that is element l of the 16 source rows.
func transpose16() {
	// Stage 1: interleave pairs of rows (32-bit).
	for i := 0; i < 16; i += 2 {
		p("\tVUNPCKLPS Z%d, Z%d, Z%d", i+1, i, 16+i)
		p("\tVUNPCKHPS Z%d, Z%d, Z%d", i+1, i, 16+i+1)
	}
	// Stage 2: interleave 64-bit pairs of (0,2), (1,3) within groups of 4.
	for g := 0; g < 16; g += 4 {
		a, b, c, d := 16+g, 16+g+1, 16+g+2, 16+g+3
		p("\tVUNPCKLPD Z%d, Z%d, Z%d", c, a, g)
		p("\tVUNPCKHPD Z%d, Z%d, Z%d", c, a, g+1)
		p("\tVUNPCKLPD Z%d, Z%d, Z%d", d, b, g+2)
		p("\tVUNPCKHPD Z%d, Z%d, Z%d", d, b, g+3)
	}
	// Now, in each 128-bit lane q of Z(g+t) (g a group of 4 rows), the four
	// floats are rows g..g+3 at column 4q + c(t), c = 0, 1, 2, 3 for
	// t = 0, 1, 2, 3.
	// Stage 3: combine 128-bit lanes across groups (0,4) and (8,12):
	// VSHUFF32X4 $0x88 takes lanes 0, 2 of each source, $0xdd lanes 1, 3.
	for t := 0; t < 4; t++ {
		p("\tVSHUFF32X4 $0x88, Z%d, Z%d, Z%d", 4+t, t, 16+t)    // groups 0,1: lanes 0,2
		p("\tVSHUFF32X4 $0xdd, Z%d, Z%d, Z%d", 4+t, t, 20+t)    // groups 0,1: lanes 1,3
		p("\tVSHUFF32X4 $0x88, Z%d, Z%d, Z%d", 12+t, 8+t, 24+t) // groups 2,3: lanes 0,2
		p("\tVSHUFF32X4 $0xdd, Z%d, Z%d, Z%d", 12+t, 8+t, 28+t) // groups 2,3: lanes 1,3
	}
	// Z(16+t): lanes = [g0 col t, g0 col 8+t, g1 col t, g1 col 8+t]
	// Z(20+t): lanes = [g0 col 4+t, g0 col 12+t, g1 col 4+t, g1 col 12+t]
	// Z(24+t), Z(28+t): the same for groups 2, 3.
	// Stage 4: columns c: lanes [g0 g1 g2 g3] at column c.
	for t := 0; t < 4; t++ {
		for h, src := range [][2]int{{16 + t, 24 + t}, {20 + t, 28 + t}} {
			// h = 0: columns t (lanes 0,2 of the pair) and 8+t (lanes 1,3);
			// h = 1: columns 4+t and 12+t.
			lo, hi := t+4*h, 8+t+4*h
			p("\tVSHUFF32X4 $0x88, Z%d, Z%d, Z%d", src[1], src[0], lo)
			p("\tVSHUFF32X4 $0xdd, Z%d, Z%d, Z%d", src[1], src[0], hi)
		}
	}
}
