package main

// The float32 kernels: AVX-512 (12 x 32) and AVX2+FMA (6 x 16), and the
// AVX-512 packing routines.

// aAddr returns the address of row r of the A micro-panel: rows in groups
// of four from the bases SI, R10, R11, row r%4 at index 0, rs (R8),
// 2 rs or 3 rs (R9).
func aAddr(r int) string {
	base := []string{"SI", "R10", "R11"}[r/4]
	switch r % 4 {
	case 0:
		return "(" + base + ")"
	case 1:
		return "(" + base + ")(R8*1)"
	case 2:
		return "(" + base + ")(R8*2)"
	}
	return "(" + base + ")(R9*1)"
}

// avx512Variant is what differs between the AVX-512 kernels on 12 x 32
// blocks: the float32 one (sgemmKernel12x32) and the bfloat16 one
// (bf16Kernel12x32), which steps over pairs of K instead of K.
type avx512Variant struct {
	header string // the comment, TEXT line and argument loads
	label  string // prefix of the kernel's labels
	// dot writes acc += b . a, b the B panel register, a A's broadcast.
	dot func(acc, b, a int)
}

// float32Variant is the float32 kernel: one FMA per k.
var float32Variant = avx512Variant{
	header: `// func sgemmKernel12x32(k int, a *float32, rs, cs uintptr, b, c *float32, ldc int, alpha, beta float32, mr int, mask uint32)
// C = alpha A B + beta C on rows 0..mr-1 and the columns of mask (bit j:
// column j) of a 12 x 32 block of C (row pitch ldc elements); A is read at
// a + r rs + l cs (bytes), B at b + 128 l + 4 j; C is not read when beta
// is 0. k >= 1.
TEXT ·sgemmKernel12x32(SB), NOSPLIT, $0-76
	MOVQ k+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ rs+16(FP), R8
	MOVQ cs+24(FP), R12
	MOVQ b+32(FP), DI
	MOVQ c+40(FP), DX
	MOVQ ldc+48(FP), BX
	SHLQ $2, BX
	LEAQ (R8)(R8*2), R9
	LEAQ (SI)(R8*4), R10
	LEAQ (R10)(R8*4), R11`,
	label: "k512",
	dot: func(acc, b, a int) {
		p("\tVFMADD231PS Z%d, Z%d, Z%d", b, a, acc)
	},
}

// avx512Kernel writes a 12 x 32 AVX-512 kernel: C[0:mr, 0:32 masked] =
// alpha A B + beta C, where A is a 12-row micro-panel with row stride rs
// and k stride cs (bytes), B a packed 32-column panel (128 bytes per k, or
// per pair of K), and the 12x32 product lives in Z0-Z23 (row r in Z(2r),
// Z(2r+1)).
//
// funclen: it writes one kernel's instructions in order; the register
// assignment spans the whole of it, so pieces of it would only make sense
// together.
func avx512Kernel(kv avx512Variant) {
	p("\n%s", kv.header)
	// Prefetch the C block while the products run.
	p("\tMOVQ DX, AX")
	for r := 0; r < 12; r++ {
		p("\tPREFETCHT0 (AX)")
		p("\tPREFETCHT0 64(AX)")
		if r < 11 {
			p("\tADDQ BX, AX")
		}
	}
	for i := 0; i < 24; i++ {
		p("\tVPXORD Z%d, Z%d, Z%d", i, i, i)
	}
	step := func() {
		if bPrefetch > 0 {
			p("\tPREFETCHT0 %d(DI)", bPrefetch)
			p("\tPREFETCHT0 %d(DI)", bPrefetch+64)
		}
		p("\tVMOVUPS (DI), Z28")
		p("\tVMOVUPS 64(DI), Z29")
		for r := 0; r < 12; r++ {
			t := 30 + r%2
			p("\tVBROADCASTSS %s, Z%d", aAddr(r), t)
			kv.dot(2*r, 28, t)
			kv.dot(2*r+1, 29, t)
		}
		p("\tADDQ R12, SI")
		p("\tADDQ R12, R10")
		p("\tADDQ R12, R11")
		p("\tADDQ $128, DI")
	}
	p("\tMOVQ CX, AX")
	p("\tSHRQ $2, AX")
	p("\tANDQ $3, CX")
	p("\tTESTQ AX, AX")
	p("\tJZ %stail", kv.label)
	p("%sloop4:", kv.label)
	for u := 0; u < 4; u++ {
		step()
	}
	p("\tDECQ AX")
	p("\tJNZ %sloop4", kv.label)
	p("%stail:", kv.label)
	p("\tTESTQ CX, CX")
	p("\tJZ %sdone", kv.label)
	p("%sloop1:", kv.label)
	step()
	p("\tDECQ CX")
	p("\tJNZ %sloop1", kv.label)
	p("%sdone:", kv.label)
	p("\tVBROADCASTSS alpha+56(FP), Z30")
	for i := 0; i < 24; i++ {
		p("\tVMULPS Z30, Z%d, Z%d", i, i)
	}
	p("\tMOVL mask+72(FP), AX")
	p("\tKMOVW AX, K1")
	p("\tSHRL $16, AX")
	p("\tKMOVW AX, K2")
	p("\tMOVQ mr+64(FP), R13")
	p("\tVMOVSS beta+60(FP), X31")
	p("\tVXORPS X30, X30, X30")
	p("\tVUCOMISS X30, X31")
	// beta == 0 (and not NaN: unordered sets ZF and PF) skips reading C.
	p("\tJNE %sbeta", kv.label)
	p("\tJPS %sbeta", kv.label)
	for r := 0; r < 12; r++ {
		if r > 0 {
			p("\tCMPQ R13, $%d", r)
			p("\tJLE %send", kv.label)
			p("\tADDQ BX, DX")
		}
		p("\tVMOVUPS Z%d, K1, (DX)", 2*r)
		p("\tVMOVUPS Z%d, K2, 64(DX)", 2*r+1)
	}
	p("\tJMP %send", kv.label)
	p("%sbeta:", kv.label)
	p("\tVBROADCASTSS beta+60(FP), Z31")
	for r := 0; r < 12; r++ {
		if r > 0 {
			p("\tCMPQ R13, $%d", r)
			p("\tJLE %send", kv.label)
			p("\tADDQ BX, DX")
		}
		p("\tVFMADD231PS (DX), Z31, K1, Z%d", 2*r)
		p("\tVFMADD231PS 64(DX), Z31, K2, Z%d", 2*r+1)
		p("\tVMOVUPS Z%d, K1, (DX)", 2*r)
		p("\tVMOVUPS Z%d, K2, 64(DX)", 2*r+1)
	}
	p("%send:", kv.label)
	p("\tVZEROUPPER")
	p("\tRET")
}

// avx2Kernel writes sgemmKernel6x16: the AVX2+FMA kernel on a full 6 x 16
// block, A addressed as in the AVX-512 kernel (rows 0-3 from SI, 4-5 from
// R10), B packed 16 columns (64 bytes per k), rows in Y(2r), Y(2r+1).
//
// funclen: as avx512Kernel, one kernel's instructions in order.
func avx2Kernel() {
	p(`
// func sgemmKernel6x16(k int, a *float32, rs, cs uintptr, b, c *float32, ldc int, alpha, beta float32)
// C = alpha A B + beta C on a full 6 x 16 block of C (row pitch ldc
// elements); A is read at a + r rs + l cs (bytes), B at b + 64 l + 4 j; C
// is not read when beta is 0. k >= 1.
TEXT ·sgemmKernel6x16(SB), NOSPLIT, $0-64
	MOVQ k+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ rs+16(FP), R8
	MOVQ cs+24(FP), R12
	MOVQ b+32(FP), DI
	MOVQ c+40(FP), DX
	MOVQ ldc+48(FP), BX
	SHLQ $2, BX
	LEAQ (R8)(R8*2), R9
	LEAQ (SI)(R8*4), R10`)
	for i := 0; i < 12; i++ {
		p("\tVXORPS Y%d, Y%d, Y%d", i, i, i)
	}
	step := func() {
		p("\tVMOVUPS (DI), Y12")
		p("\tVMOVUPS 32(DI), Y13")
		for r := 0; r < 6; r++ {
			t := 14 + r%2
			p("\tVBROADCASTSS %s, Y%d", aAddr(r), t)
			p("\tVFMADD231PS Y12, Y%d, Y%d", t, 2*r)
			p("\tVFMADD231PS Y13, Y%d, Y%d", t, 2*r+1)
		}
		p("\tADDQ R12, SI")
		p("\tADDQ R12, R10")
		p("\tADDQ $64, DI")
	}
	p("\tMOVQ CX, AX")
	p("\tSHRQ $2, AX")
	p("\tANDQ $3, CX")
	p("\tTESTQ AX, AX")
	p("\tJZ k256tail")
	p("k256loop4:")
	for u := 0; u < 4; u++ {
		step()
	}
	p("\tDECQ AX")
	p("\tJNZ k256loop4")
	p("k256tail:")
	p("\tTESTQ CX, CX")
	p("\tJZ k256done")
	p("k256loop1:")
	step()
	p("\tDECQ CX")
	p("\tJNZ k256loop1")
	p("k256done:")
	p("\tVBROADCASTSS alpha+56(FP), Y14")
	for i := 0; i < 12; i++ {
		p("\tVMULPS Y14, Y%d, Y%d", i, i)
	}
	p("\tVMOVSS beta+60(FP), X15")
	p("\tVXORPS X13, X13, X13")
	p("\tVUCOMISS X13, X15")
	p("\tJNE k256beta")
	p("\tJPS k256beta")
	p("\tJMP k256store")
	p("k256beta:")
	p("\tVBROADCASTSS beta+60(FP), Y15")
	p("\tMOVQ DX, AX")
	for r := 0; r < 6; r++ {
		if r > 0 {
			p("\tADDQ BX, AX")
		}
		p("\tVFMADD231PS (AX), Y15, Y%d", 2*r)
		p("\tVFMADD231PS 32(AX), Y15, Y%d", 2*r+1)
	}
	p("k256store:")
	for r := 0; r < 6; r++ {
		if r > 0 {
			p("\tADDQ BX, DX")
		}
		p("\tVMOVUPS Y%d, (DX)", 2*r)
		p("\tVMOVUPS Y%d, 32(DX)", 2*r+1)
	}
	p("\tVZEROUPPER")
	p("\tRET")
}

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
