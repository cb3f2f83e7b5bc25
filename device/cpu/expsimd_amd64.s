#include "textflag.h"

// Constants of the vector exponential (Cephes expf): e^x = 2^n p(r) with
// n = round(x log2e), r = x - n ln2 (ln2 split in two), and
// p(r) = 1 + r + r^2 (c0 + c1 r + ... + c5 r^5).
DATA expconst<>+0(SB)/4, $0x3fb8aa3b   // log2e 1.44269504
DATA expconst<>+4(SB)/4, $0x3f318000   // ln2hi 0.693359375
DATA expconst<>+8(SB)/4, $0xb95e8083   // ln2lo -2.12194440e-4
DATA expconst<>+12(SB)/4, $0x39506967  // 1.9875691500e-4
DATA expconst<>+16(SB)/4, $0x3ab743ce  // 1.3981999507e-3
DATA expconst<>+20(SB)/4, $0x3c088908  // 8.3334519073e-3
DATA expconst<>+24(SB)/4, $0x3d2aa9c1  // 4.1665795894e-2
DATA expconst<>+28(SB)/4, $0x3e2aaaaa  // 1.6666665459e-1
DATA expconst<>+32(SB)/4, $0x3f000000  // 5.0000001201e-1 (0.5)
DATA expconst<>+36(SB)/4, $0x3f800000  // 1
DATA expconst<>+40(SB)/4, $0xc2aeac50  // minX -87.3365448
DATA expconst<>+44(SB)/4, $0x42b00000  // maxX 88
GLOBL expconst<>(SB), RODATA|NOPTR, $48

// func expShiftSum8(dst, src *float32, n int, shift float32) float64
TEXT ·expShiftSum8(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	VBROADCASTSS shift+24(FP), Y15
	VBROADCASTSS expconst<>+0(SB), Y14   // log2e
	VBROADCASTSS expconst<>+4(SB), Y13   // ln2hi
	VBROADCASTSS expconst<>+8(SB), Y12   // ln2lo
	VBROADCASTSS expconst<>+36(SB), Y11  // 1
	VBROADCASTSS expconst<>+40(SB), Y10  // minX
	VBROADCASTSS expconst<>+44(SB), Y9   // maxX
	VXORPD Y7, Y7, Y7                    // float64 sums of the low lanes
	VXORPD Y8, Y8, Y8                    // and of the high lanes
	XORQ AX, AX

loop:
	CMPQ AX, CX
	JGE done
	VMOVUPS (SI)(AX*4), Y0
	VSUBPS Y15, Y0, Y0          // x = src - shift
	VMAXPS Y0, Y10, Y0          // max(minX, x); x is the source a NaN comes from
	VMINPS Y0, Y9, Y0           // min(maxX, x)
	VCMPPS $0, Y10, Y0, Y6      // mask: x == minX (underflow)
	VMULPS Y14, Y0, Y1
	VCVTPS2DQ Y1, Y2            // n = round(x log2e), nearest even
	VCVTDQ2PS Y2, Y1            // fn
	VFNMADD231PS Y13, Y1, Y0    // r = x - fn ln2hi
	VFNMADD231PS Y12, Y1, Y0    // r -= fn ln2lo
	VBROADCASTSS expconst<>+12(SB), Y3
	VBROADCASTSS expconst<>+16(SB), Y4
	VFMADD213PS Y4, Y0, Y3      // p = p r + c
	VBROADCASTSS expconst<>+20(SB), Y4
	VFMADD213PS Y4, Y0, Y3
	VBROADCASTSS expconst<>+24(SB), Y4
	VFMADD213PS Y4, Y0, Y3
	VBROADCASTSS expconst<>+28(SB), Y4
	VFMADD213PS Y4, Y0, Y3
	VBROADCASTSS expconst<>+32(SB), Y4
	VFMADD213PS Y4, Y0, Y3
	VMULPS Y0, Y0, Y4           // r^2
	VADDPS Y11, Y0, Y5          // 1 + r
	VFMADD213PS Y5, Y4, Y3      // p = p r^2 + (1 + r)
	VPSLLD $23, Y2, Y2
	VPADDD Y2, Y3, Y3           // p * 2^n
	VANDNPS Y3, Y6, Y3          // 0 where x underflowed
	TESTQ DI, DI
	JZ nostore
	VMOVUPS Y3, (DI)(AX*4)

nostore:
	VCVTPS2PD X3, Y4
	VADDPD Y4, Y7, Y7
	VEXTRACTF128 $1, Y3, X5
	VCVTPS2PD X5, Y5
	VADDPD Y5, Y8, Y8
	ADDQ $8, AX
	JMP loop

done:
	VADDPD Y8, Y7, Y7
	VEXTRACTF128 $1, Y7, X8
	VADDPD X8, X7, X7
	VHADDPD X7, X7, X7
	MOVSD X7, ret+32(FP)
	VZEROUPPER
	RET

// func max8(x *float32, n int) float32
// NaN-propagating maximum: VMAXPS returns its second source when either
// is NaN, so the running maximum is the first source and the data the
// second; a separate unordered-compare mask remembers any NaN.
TEXT ·max8(SB), NOSPLIT, $0-20
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	VMOVUPS (SI), Y0              // running max
	VCMPPS $3, Y0, Y0, Y2         // NaN mask, from the first load
	MOVQ $8, AX

mloop:
	CMPQ AX, CX
	JGE mdone
	VMOVUPS (SI)(AX*4), Y1
	VCMPPS $3, Y1, Y1, Y3         // unordered: Y1 is NaN
	VORPS Y3, Y2, Y2
	VMAXPS Y1, Y0, Y0             // max(running, data)
	ADDQ $8, AX
	JMP mloop

mdone:
	VEXTRACTF128 $1, Y0, X1
	VMAXPS X1, X0, X0
	VPERMILPS $0x4e, X0, X1
	VMAXPS X1, X0, X0
	VPERMILPS $0xb1, X0, X1
	VMAXPS X1, X0, X0
	VEXTRACTF128 $1, Y2, X3
	VORPS X3, X2, X2
	VPTEST X2, X2
	JZ mret
	MOVL $0x7fc00000, AX          // quiet NaN
	MOVL AX, ret+16(FP)
	VZEROUPPER
	RET

mret:
	MOVSS X0, ret+16(FP)
	VZEROUPPER
	RET

// func scale8(x *float32, n int, s float32)
// x[i] *= s for n (a multiple of 8) elements.
TEXT ·scale8(SB), NOSPLIT, $0-20
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	VBROADCASTSS s+16(FP), Y1
	XORQ AX, AX

sloop:
	CMPQ AX, CX
	JGE sdone
	VMULPS (SI)(AX*4), Y1, Y0
	VMOVUPS Y0, (SI)(AX*4)
	ADDQ $8, AX
	JMP sloop

sdone:
	VZEROUPPER
	RET
