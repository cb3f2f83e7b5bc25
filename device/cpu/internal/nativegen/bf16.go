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
