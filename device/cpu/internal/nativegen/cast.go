package main

// The float32 <-> bfloat16 conversions of Cast (and of the widening GEMM
// path) with AVX-512F, bit for bit device.BFloat16FromFloat32 and
// Float32FromBFloat16: rounding to nearest even by integer arithmetic, a
// NaN kept a quiet NaN, denormals rounded like any other value (which
// VCVTNEPS2BF16 would flush to zero instead).
func castBF16() {
	p(`
// func bf16FromFloat32s(dst *uint16, src *float32, n int)
// dst[i] = device.BFloat16FromFloat32(src[i]) for i < n: (u + 0x7fff +
// (u>>16 & 1)) >> 16 of the bits u, or (u >> 16) | 0x40 for a NaN.
TEXT ·bf16FromFloat32s(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	MOVL $1, AX
	VPBROADCASTD AX, Z10
	MOVL $0x7fff, AX
	VPBROADCASTD AX, Z11
	MOVL $0x7fffffff, AX
	VPBROADCASTD AX, Z12
	MOVL $0x7f800000, AX
	VPBROADCASTD AX, Z13
	MOVL $0x40, AX
	VPBROADCASTD AX, Z14
	MOVL $0xffff, AX
	KMOVW AX, K2
tobf16loop:
	CMPQ CX, $16
	JGE tobf16full
	TESTQ CX, CX
	JZ tobf16done
	MOVL $1, AX
	SHLL CX, AX
	DECL AX
	KMOVW AX, K2
	MOVQ $16, CX
tobf16full:
	VMOVDQU32.Z (SI), K2, Z0
	VPSRLD $16, Z0, Z1
	VPANDD Z10, Z1, Z2
	VPADDD Z11, Z0, Z3
	VPADDD Z2, Z3, Z3
	VPSRLD $16, Z3, Z3
	VPANDD Z12, Z0, Z4
	VPCMPUD $6, Z13, Z4, K1
	VPORD Z14, Z1, K1, Z3
	VPMOVDW Z3, K2, (DI)
	ADDQ $64, SI
	ADDQ $32, DI
	SUBQ $16, CX
	JNZ tobf16loop
tobf16done:
	VZEROUPPER
	RET

// func float32sFromBF16(dst *float32, src *uint16, n int)
// dst[i] = the bfloat16 src[i] widened (its bits shifted up 16), i < n.
TEXT ·float32sFromBF16(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	MOVL $0xffff, AX
	KMOVW AX, K2
frombf16loop:
	CMPQ CX, $16
	JGE frombf16full
	TESTQ CX, CX
	JZ frombf16done
	MOVL $1, AX
	SHLL CX, AX
	DECL AX
	KMOVW AX, K2
	MOVQ $16, CX
frombf16full:
	VPMOVZXWD.Z (SI), K2, Z0
	VPSLLD $16, Z0, Z0
	VMOVDQU32 Z0, K2, (DI)
	ADDQ $32, SI
	ADDQ $64, DI
	SUBQ $16, CX
	JNZ frombf16loop
frombf16done:
	VZEROUPPER
	RET`)
}
