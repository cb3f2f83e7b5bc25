package main

// The bfloat16 kernel for VDPBF16PS: the float32 AVX-512 kernel's 12 x 32
// block and code (avx512Kernel), stepping over pairs of K: each step
// broadcasts a pair of bfloat16 of each row of A and multiplies it into
// the pair-interleaved B panel with VDPBF16PS, accumulating in float32.

var bf16Variant = avx512Variant{
	header: `// func bf16Kernel12x32(pairs int, a *uint16, rs, cs uintptr, b *uint32, c *float32, ldc int, alpha, beta float32, mr int, mask uint32)
// C = alpha A B + beta C on rows 0..mr-1 and the columns of mask (bit j:
// column j) of a 12 x 32 block of C (row pitch ldc elements), A and B
// bfloat16, products by VDPBF16PS accumulated in float32: the pair p (K 2p
// and 2p+1) of row r of A is read at a + r rs + p cs (bytes), that of
// column j of B at b + 128 p + 4 j; C is not read when beta is 0. pairs >= 1.
TEXT ·bf16Kernel12x32(SB), NOSPLIT, $0-76
	MOVQ pairs+0(FP), CX
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
	label: "kbf16",
	dot: func(acc, b, a int) {
		emit(vdpbf16ps(acc, b, a))
	},
}

// cpuVendor writes cpuVendor: CPUID leaf 0, whose registers spell the
// vendor ("AuthenticAMD", "GenuineIntel"), which decides whether
// VDPBF16PS is worth using (device/cpu's dotBF16Fast).
func cpuVendor() {
	p(`
// func cpuVendor() (ebx, edx, ecx uint32)
TEXT ·cpuVendor(SB), NOSPLIT, $0-12
	XORL AX, AX
	XORL CX, CX
	CPUID
	MOVL BX, ebx+0(FP)
	MOVL DX, edx+4(FP)
	MOVL CX, ecx+8(FP)
	RET`)
}

// packB16NB writes packB16NB: the pair-interleaved panels of 32 columns of
// a bfloat16 B stored k x n, a pair of rows at a time across all panels
// (each row read once, in order): each 16 bfloat16 of row 2p zero-extended
// to 32 bits, or'ed with row 2p+1's shifted up 16.
func packB16NB() {
	p(`
// func packB16NB(dst *uint32, src *uint16, ldb uintptr, pairs, panels int, stride uintptr, mask uint32)
// For p < pairs, q < panels, j < 32: the uint32 at dst + q stride + 128 p +
// 4 j is src[2p ldb + 32 q + j] | src[(2p+1) ldb + 32 q + j] << 16 (ldb and
// stride in bytes); in the last panel only the columns of mask, zero for
// the others. pairs, panels >= 1.
TEXT ·packB16NB(SB), NOSPLIT, $0-52
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ ldb+16(FP), R8
	MOVQ pairs+24(FP), CX
	MOVQ panels+32(FP), R9
	DECQ R9
	MOVQ stride+40(FP), R10
	MOVL mask+48(FP), AX
	KMOVW AX, K1
	SHRL $16, AX
	KMOVW AX, K2
pb16row:
	MOVQ SI, R11
	LEAQ (SI)(R8*1), R12
	MOVQ DI, R13
	MOVQ R9, AX
	TESTQ AX, AX
	JZ pb16last
pb16panel:
	VPMOVZXWD (R11), Z0
	VPMOVZXWD 32(R11), Z1
	VPMOVZXWD (R12), Z2
	VPMOVZXWD 32(R12), Z3
	VPSLLD $16, Z2, Z2
	VPSLLD $16, Z3, Z3
	VPORD Z2, Z0, Z0
	VPORD Z3, Z1, Z1
	VMOVDQU32 Z0, (R13)
	VMOVDQU32 Z1, 64(R13)
	ADDQ $64, R11
	ADDQ $64, R12
	ADDQ R10, R13
	DECQ AX
	JNZ pb16panel
pb16last:
	VPMOVZXWD.Z (R11), K1, Z0
	VPMOVZXWD.Z 32(R11), K2, Z1
	VPMOVZXWD.Z (R12), K1, Z2
	VPMOVZXWD.Z 32(R12), K2, Z3
	VPSLLD $16, Z2, Z2
	VPSLLD $16, Z3, Z3
	VPORD Z2, Z0, Z0
	VPORD Z3, Z1, Z1
	VMOVDQU32 Z0, (R13)
	VMOVDQU32 Z1, 64(R13)
	LEAQ (SI)(R8*2), SI
	ADDQ $128, DI
	DECQ CX
	JNZ pb16row
	VZEROUPPER
	RET`)
}

// transpose16x16 writes transpose16x16: a 16 x 16 block of 32-bit values
// (pairs of bfloat16) transposed between two strided places.
func transpose16x16() {
	p(`
// func transpose16x16(dst *uint32, dstStride uintptr, src *uint32, srcStride uintptr)
// The uint32 at dst + l dstStride + 4 j is the one at src + j srcStride +
// 4 l (strides in bytes), for j, l < 16.
TEXT ·transpose16x16(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ dstStride+8(FP), R10
	MOVQ src+16(FP), SI
	MOVQ srcStride+24(FP), R8
	LEAQ (R8)(R8*2), R9
	LEAQ (R10)(R10*2), R11`)
	for i := 0; i < 16; i++ {
		switch i % 4 {
		case 0:
			p("\tVMOVDQU32 (SI), Z%d", i)
		case 1:
			p("\tVMOVDQU32 (SI)(R8*1), Z%d", i)
		case 2:
			p("\tVMOVDQU32 (SI)(R8*2), Z%d", i)
		case 3:
			p("\tVMOVDQU32 (SI)(R9*1), Z%d", i)
			p("\tLEAQ (SI)(R8*4), SI")
		}
	}
	transpose16()
	for i := 0; i < 16; i++ {
		switch i % 4 {
		case 0:
			p("\tVMOVDQU32 Z%d, (DI)", i)
		case 1:
			p("\tVMOVDQU32 Z%d, (DI)(R10*1)", i)
		case 2:
			p("\tVMOVDQU32 Z%d, (DI)(R10*2)", i)
		case 3:
			p("\tVMOVDQU32 Z%d, (DI)(R11*1)", i)
			p("\tLEAQ (DI)(R10*4), DI")
		}
	}
	p("\tVZEROUPPER")
	p("\tRET")
}
