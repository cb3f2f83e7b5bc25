#include "textflag.h"

// AVX-512 kernels of SwiGLU and its gradient over n elements, n a
// multiple of 8 (a last 8 masked), bit for bit the results of the loops
// in elementwise.go on sigmoidInto: the same float32 operations in the
// same order, the exponential expShiftSum16's instructions (on -a, shift
// 0), 1/(1 + e) by VADDPS and VDIVPS, products rounded one at a time.

DATA swigluconst<>+0(SB)/4, $0x3fb8aa3b   // log2e
DATA swigluconst<>+4(SB)/4, $0x3f318000   // ln2hi
DATA swigluconst<>+8(SB)/4, $0xb95e8083   // ln2lo
DATA swigluconst<>+12(SB)/4, $0x39506967  // the polynomial, highest first
DATA swigluconst<>+16(SB)/4, $0x3ab743ce
DATA swigluconst<>+20(SB)/4, $0x3c088908
DATA swigluconst<>+24(SB)/4, $0x3d2aa9c1
DATA swigluconst<>+28(SB)/4, $0x3e2aaaaa
DATA swigluconst<>+32(SB)/4, $0x3f000000
DATA swigluconst<>+36(SB)/4, $0x3f800000  // 1
DATA swigluconst<>+40(SB)/4, $0xc2aeac50  // minX
DATA swigluconst<>+44(SB)/4, $0x42b00000  // maxX
DATA swigluconst<>+48(SB)/4, $0x80000000  // the sign bit
GLOBL swigluconst<>(SB), RODATA|NOPTR, $52

// SWIGLU_SETUP broadcasts the constants: Z14 log2e, Z13 ln2hi, Z12 ln2lo,
// Z16-Z21 the polynomial, Z11 1, Z10 minX, Z9 maxX, Z15 the shift 0,
// Z22 the sign bit; K3 the low 8 lanes.
#define SWIGLU_SETUP \
	VBROADCASTSS swigluconst<>+0(SB), Z14 \
	VBROADCASTSS swigluconst<>+4(SB), Z13 \
	VBROADCASTSS swigluconst<>+8(SB), Z12 \
	VBROADCASTSS swigluconst<>+12(SB), Z16 \
	VBROADCASTSS swigluconst<>+16(SB), Z17 \
	VBROADCASTSS swigluconst<>+20(SB), Z18 \
	VBROADCASTSS swigluconst<>+24(SB), Z19 \
	VBROADCASTSS swigluconst<>+28(SB), Z20 \
	VBROADCASTSS swigluconst<>+32(SB), Z21 \
	VBROADCASTSS swigluconst<>+36(SB), Z11 \
	VBROADCASTSS swigluconst<>+40(SB), Z10 \
	VBROADCASTSS swigluconst<>+44(SB), Z9 \
	VBROADCASTSS swigluconst<>+48(SB), Z22 \
	VXORPS Z15, Z15, Z15 \
	MOVQ $0xff, R10 \
	KMOVW R10, K3

// SWIGLU_SIG loads a (lanes K1) into Z24 and leaves s = 1/(1 + e^(-a)) in
// Z5 (Z0-Z4 and K2 scratch): sigmoidInto's t = -a, expShiftSum16's
// exponential of t - 0, then 1/(1 + e).
#define SWIGLU_SIG \
	VMOVUPS.Z (SI)(AX*4), K1, Z24 \
	VXORPS Z22, Z24, Z0 \
	VSUBPS Z15, Z0, Z0 \
	VMAXPS Z0, Z10, Z0 \
	VMINPS Z0, Z9, Z0 \
	VCMPPS $4, Z10, Z0, K2 \
	VMULPS Z14, Z0, Z1 \
	VCVTPS2DQ Z1, Z2 \
	VCVTDQ2PS Z2, Z1 \
	VFNMADD231PS Z13, Z1, Z0 \
	VFNMADD231PS Z12, Z1, Z0 \
	VMOVAPS Z16, Z3 \
	VFMADD213PS Z17, Z0, Z3 \
	VFMADD213PS Z18, Z0, Z3 \
	VFMADD213PS Z19, Z0, Z3 \
	VFMADD213PS Z20, Z0, Z3 \
	VFMADD213PS Z21, Z0, Z3 \
	VMULPS Z0, Z0, Z4 \
	VADDPS Z11, Z0, Z5 \
	VFMADD213PS Z5, Z4, Z3 \
	VPSLLD $23, Z2, Z2 \
	VPADDD.Z Z2, Z3, K2, Z3 \
	VADDPS Z11, Z3, Z3 \
	VDIVPS Z3, Z11, Z5

// SWIGLU_MASK sets K1 to all 16 lanes, or the low 8 when only 8 are left
// (n = CX).
#define SWIGLU_MASK \
	KXNORW K1, K1, K1 \
	MOVQ CX, R9 \
	SUBQ AX, R9 \
	CMPQ R9, $16 \
	JGE 2(PC) \
	KMOVW K3, K1

// func swiglu16(out, a, b *float32, n int)
// out = a s b with s = sigmoid(a), as (a s) b.
TEXT ·swiglu16(SB), NOSPLIT, $0-32
	MOVQ out+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DX
	MOVQ n+24(FP), CX
	SWIGLU_SETUP
	XORQ AX, AX

sloop:
	CMPQ AX, CX
	JGE sdone
	SWIGLU_MASK
	SWIGLU_SIG
	VMULPS Z5, Z24, Z6
	VMULPS.Z (DX)(AX*4), Z6, K1, Z6
	VMOVUPS Z6, K1, (DI)(AX*4)
	ADDQ $16, AX
	JMP sloop

sdone:
	VZEROUPPER
	RET

// func swigluBackward16(da, db, dout, a, b *float32, n int)
// With s = sigmoid(a), silu = a s: da = ((dout b) (s + silu (1 - s))),
// db = dout silu.
TEXT ·swigluBackward16(SB), NOSPLIT, $0-48
	MOVQ da+0(FP), DI
	MOVQ db+8(FP), R8
	MOVQ dout+16(FP), R11
	MOVQ a+24(FP), SI
	MOVQ b+32(FP), DX
	MOVQ n+40(FP), CX
	SWIGLU_SETUP
	XORQ AX, AX

bloop:
	CMPQ AX, CX
	JGE bdone
	SWIGLU_MASK
	SWIGLU_SIG
	VMULPS Z5, Z24, Z6              // silu = a s
	VMOVUPS.Z (R11)(AX*4), K1, Z7   // dout
	VSUBPS Z5, Z11, Z8              // 1 - s
	VMULPS Z8, Z6, Z8               // silu (1 - s)
	VADDPS Z8, Z5, Z8               // s + silu (1 - s)
	VMULPS.Z (DX)(AX*4), Z7, K1, Z25 // dout b
	VMULPS Z8, Z25, Z25             // (dout b) (s + silu (1 - s))
	VMOVUPS Z25, K1, (DI)(AX*4)
	VMULPS Z6, Z7, Z26              // dout silu
	VMOVUPS Z26, K1, (R8)(AX*4)
	ADDQ $16, AX
	JMP bloop

bdone:
	VZEROUPPER
	RET
