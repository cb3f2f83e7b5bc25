#include "textflag.h"

// AVX-512 kernels of GELU's tanh approximation over one row of n
// elements (a last partial 16 masked): z = x + bias (bias nil: x),
// s = sigmoid(2u) = 1/(1 + e^(-2u)), 2u = 2 sqrt(2/pi) (z + 0.044715 z^3);
// gelu(z) = z s, gelu'(z) = s + z s (1 - s) 2 sqrt(2/pi) (1 + 3 0.044715 z^2).
// The exponential is expShiftSum16's (expconst in expsimd_amd64.s, the
// same file's constants repeated here).

DATA geluconst<>+0(SB)/4, $0x3fcc422a   // 2 sqrt(2/pi) 1.5957691
DATA geluconst<>+4(SB)/4, $0x3d372713   // 0.044715
DATA geluconst<>+8(SB)/4, $0x3e095d4f   // 3 * 0.044715 = 0.134145
DATA geluconst<>+12(SB)/4, $0x3fb8aa3b  // log2e
DATA geluconst<>+16(SB)/4, $0x3f318000  // ln2hi
DATA geluconst<>+20(SB)/4, $0xb95e8083  // ln2lo
DATA geluconst<>+24(SB)/4, $0x39506967  // the exponential's polynomial, highest first
DATA geluconst<>+28(SB)/4, $0x3ab743ce
DATA geluconst<>+32(SB)/4, $0x3c088908
DATA geluconst<>+36(SB)/4, $0x3d2aa9c1
DATA geluconst<>+40(SB)/4, $0x3e2aaaaa
DATA geluconst<>+44(SB)/4, $0x3f000000
DATA geluconst<>+48(SB)/4, $0x3f800000  // 1
DATA geluconst<>+52(SB)/4, $0xc2aeac50  // minX -87.3365448
DATA geluconst<>+56(SB)/4, $0x42b00000  // maxX 88
GLOBL geluconst<>(SB), RODATA|NOPTR, $60

// GELU_SETUP broadcasts the constants: Z20 2 sqrt(2/pi), Z21 0.044715,
// Z22 3 * 0.044715, Z14 log2e, Z13 ln2hi, Z12 ln2lo, Z23..Z28 the
// polynomial, Z11 1, Z10 minX, Z9 maxX, Z31 0.
#define GELU_SETUP \
	VBROADCASTSS geluconst<>+0(SB), Z20 \
	VBROADCASTSS geluconst<>+4(SB), Z21 \
	VBROADCASTSS geluconst<>+8(SB), Z22 \
	VBROADCASTSS geluconst<>+12(SB), Z14 \
	VBROADCASTSS geluconst<>+16(SB), Z13 \
	VBROADCASTSS geluconst<>+20(SB), Z12 \
	VBROADCASTSS geluconst<>+24(SB), Z23 \
	VBROADCASTSS geluconst<>+28(SB), Z24 \
	VBROADCASTSS geluconst<>+32(SB), Z25 \
	VBROADCASTSS geluconst<>+36(SB), Z26 \
	VBROADCASTSS geluconst<>+40(SB), Z27 \
	VBROADCASTSS geluconst<>+44(SB), Z28 \
	VBROADCASTSS geluconst<>+48(SB), Z11 \
	VBROADCASTSS geluconst<>+52(SB), Z10 \
	VBROADCASTSS geluconst<>+56(SB), Z9 \
	VXORPS Z31, Z31, Z31

// GELU_MASK sets K1 to the lanes of the step at AX of n = R11 elements:
// all 16, or the n - AX left (CX scratch).
#define GELU_MASK \
	MOVQ R11, CX \
	SUBQ AX, CX \
	MOVQ $0xffff, R10 \
	CMPQ CX, $16 \
	JGE 4(PC) \
	MOVQ $1, R10 \
	SHLQ CX, R10 \
	DECQ R10 \
	KMOVW R10, K1

// GELU_S loads z = x + bias into Z0 (lanes K1) and leaves z^2 in Z1,
// e = e^(-2u) in Z3 and s = sigmoid(2u) = 1/(1 + e) in Z5 (Z2, Z4, Z7
// and K2 scratch).
#define GELU_S \
	VMOVUPS.Z (SI)(AX*4), K1, Z0 \
	TESTQ DX, DX \
	JZ 2(PC) \
	VADDPS.Z (DX)(AX*4), Z0, K1, Z0 \
	VMULPS Z0, Z0, Z1 \
	VMULPS Z1, Z0, Z2 \
	VFMADD213PS Z0, Z21, Z2 \
	VMULPS Z20, Z2, Z2 \
	VSUBPS Z2, Z31, Z2 \
	VMAXPS Z2, Z10, Z2 \
	VMINPS Z2, Z9, Z2 \
	VCMPPS $4, Z10, Z2, K2 \
	VMULPS Z14, Z2, Z3 \
	VCVTPS2DQ Z3, Z4 \
	VCVTDQ2PS Z4, Z3 \
	VFNMADD231PS Z13, Z3, Z2 \
	VFNMADD231PS Z12, Z3, Z2 \
	VMOVAPS Z23, Z3 \
	VFMADD213PS Z24, Z2, Z3 \
	VFMADD213PS Z25, Z2, Z3 \
	VFMADD213PS Z26, Z2, Z3 \
	VFMADD213PS Z27, Z2, Z3 \
	VFMADD213PS Z28, Z2, Z3 \
	VMULPS Z2, Z2, Z5 \
	VADDPS Z11, Z2, Z2 \
	VFMADD213PS Z2, Z5, Z3 \
	VPSLLD $23, Z4, Z4 \
	VPADDD.Z Z4, Z3, K2, Z3 \
	VADDPS Z11, Z3, Z7 \
	VDIVPS Z7, Z11, Z5

// func geluTanh16(out, x, bias *float32, n int)
TEXT ·geluTanh16(SB), NOSPLIT, $0-32
	MOVQ out+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ bias+16(FP), DX
	MOVQ n+24(FP), R11
	GELU_SETUP
	XORQ AX, AX

gloop:
	CMPQ AX, R11
	JGE gdone
	GELU_MASK
	GELU_S
	VMULPS Z5, Z0, Z6
	VMOVUPS Z6, K1, (DI)(AX*4)
	ADDQ $16, AX
	JMP gloop

gdone:
	VZEROUPPER
	RET

// func geluTanhBackward16(dx, dout, x, bias *float32, n int)
TEXT ·geluTanhBackward16(SB), NOSPLIT, $0-40
	MOVQ dx+0(FP), DI
	MOVQ dout+8(FP), R8
	MOVQ x+16(FP), SI
	MOVQ bias+24(FP), DX
	MOVQ n+32(FP), R11
	GELU_SETUP
	XORQ AX, AX

bloop:
	CMPQ AX, R11
	JGE bdone
	GELU_MASK
	GELU_S
	VFMADD213PS Z11, Z22, Z1    // 1 + 3 0.044715 z^2
	VMULPS Z20, Z1, Z1          // times 2 sqrt(2/pi)
	VMULPS Z5, Z3, Z6           // 1 - s = e s, without cancellation
	VMULPS Z5, Z6, Z6           // s (1 - s)
	VMULPS Z0, Z6, Z6           // z s (1 - s)
	VFMADD213PS Z5, Z1, Z6      // s + z s (1 - s) 2u'
	VMULPS.Z (R8)(AX*4), Z6, K1, Z6
	VMOVUPS Z6, K1, (DI)(AX*4)
	ADDQ $16, AX
	JMP bloop

bdone:
	VZEROUPPER
	RET
