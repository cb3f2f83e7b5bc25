package main

// The float32 kernels: AVX-512 (12 x 32) and AVX2+FMA (6 x 16); the
// packing routines are in pack.go.

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
