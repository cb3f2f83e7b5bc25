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

// func expShiftSum16(dst, src *float32, n int, shift float32, next *float32) float64
// The AVX-512 form of expShiftSum8, 16 elements a step, for n a multiple
// of 8: the same operations per element, and the same float64 sums: lane
// j of Z7 adds the elements i = j mod 8 in order (the low 8 of a step,
// then the high 8), and the lanes are added in expShiftSum8's order at
// the end, so the results are expShiftSum8's bit for bit. A last 8 runs
// masked. When next is not nil, each step also prefetches 64 bytes of
// next (into L2) at the step's offset: the next row of a softmax, on its
// way from memory while this one computes.
TEXT ·expShiftSum16(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	MOVQ next+32(FP), R11
	VBROADCASTSS shift+24(FP), Z15
	VBROADCASTSS expconst<>+0(SB), Z14   // log2e
	VBROADCASTSS expconst<>+4(SB), Z13   // ln2hi
	VBROADCASTSS expconst<>+8(SB), Z12   // ln2lo
	VBROADCASTSS expconst<>+36(SB), Z11  // 1
	VBROADCASTSS expconst<>+40(SB), Z10  // minX
	VBROADCASTSS expconst<>+44(SB), Z9   // maxX
	VBROADCASTSS expconst<>+12(SB), Z16  // the polynomial, highest first
	VBROADCASTSS expconst<>+16(SB), Z17
	VBROADCASTSS expconst<>+20(SB), Z18
	VBROADCASTSS expconst<>+24(SB), Z19
	VBROADCASTSS expconst<>+28(SB), Z20
	VBROADCASTSS expconst<>+32(SB), Z21
	VXORPD Z7, Z7, Z7                    // float64 sums, lane j: elements j mod 8
	MOVQ $0xff, AX
	KMOVW AX, K2                         // the low 8 lanes, for a last 8
	MOVQ CX, BX
	ANDQ $-16, BX                        // the elements done 16 at a time
	XORQ AX, AX

loop16:
	CMPQ AX, BX
	JGE tail8
	TESTQ R11, R11
	JZ nopf16
	PREFETCHT1 (R11)(AX*4)

nopf16:
	VMOVUPS (SI)(AX*4), Z0
	VSUBPS Z15, Z0, Z0          // x = src - shift
	VMAXPS Z0, Z10, Z0          // max(minX, x); x is the source a NaN comes from
	VMINPS Z0, Z9, Z0           // min(maxX, x)
	VCMPPS $4, Z10, Z0, K1      // keep: x != minX (a NaN is kept)
	VMULPS Z14, Z0, Z1
	VCVTPS2DQ Z1, Z2            // n = round(x log2e), nearest even
	VCVTDQ2PS Z2, Z1            // fn
	VFNMADD231PS Z13, Z1, Z0    // r = x - fn ln2hi
	VFNMADD231PS Z12, Z1, Z0    // r -= fn ln2lo
	VMOVAPS Z16, Z3
	VFMADD213PS Z17, Z0, Z3     // p = p r + c
	VFMADD213PS Z18, Z0, Z3
	VFMADD213PS Z19, Z0, Z3
	VFMADD213PS Z20, Z0, Z3
	VFMADD213PS Z21, Z0, Z3
	VMULPS Z0, Z0, Z4           // r^2
	VADDPS Z11, Z0, Z5          // 1 + r
	VFMADD213PS Z5, Z4, Z3      // p = p r^2 + (1 + r)
	VPSLLD $23, Z2, Z2
	VPADDD.Z Z2, Z3, K1, Z3     // p * 2^n, 0 where x underflowed
	TESTQ DI, DI
	JZ nostore16
	VMOVUPS Z3, (DI)(AX*4)

nostore16:
	VCVTPS2PD Y3, Z4
	VADDPD Z4, Z7, Z7
	VEXTRACTF64X4 $1, Z3, Y5
	VCVTPS2PD Y5, Z5
	VADDPD Z5, Z7, Z7
	ADDQ $16, AX
	JMP loop16

tail8:
	CMPQ AX, CX
	JGE done16
	VMOVUPS.Z (SI)(AX*4), K2, Z0
	VSUBPS Z15, Z0, Z0
	VMAXPS Z0, Z10, Z0
	VMINPS Z0, Z9, Z0
	VCMPPS $4, Z10, Z0, K1
	VMULPS Z14, Z0, Z1
	VCVTPS2DQ Z1, Z2
	VCVTDQ2PS Z2, Z1
	VFNMADD231PS Z13, Z1, Z0
	VFNMADD231PS Z12, Z1, Z0
	VMOVAPS Z16, Z3
	VFMADD213PS Z17, Z0, Z3
	VFMADD213PS Z18, Z0, Z3
	VFMADD213PS Z19, Z0, Z3
	VFMADD213PS Z20, Z0, Z3
	VFMADD213PS Z21, Z0, Z3
	VMULPS Z0, Z0, Z4
	VADDPS Z11, Z0, Z5
	VFMADD213PS Z5, Z4, Z3
	VPSLLD $23, Z2, Z2
	VPADDD.Z Z2, Z3, K1, Z3
	TESTQ DI, DI
	JZ nostore8
	VMOVUPS Z3, K2, (DI)(AX*4)

nostore8:
	VCVTPS2PD Y3, Z4
	VADDPD Z4, Z7, Z7

done16:
	VEXTRACTF64X4 $1, Z7, Y8
	VADDPD Y8, Y7, Y7
	VEXTRACTF128 $1, Y7, X8
	VADDPD X8, X7, X7
	VHADDPD X7, X7, X7
	MOVSD X7, ret+40(FP)
	VZEROUPPER
	RET

// func max16(x *float32, n int) float32
// The AVX-512 form of max8 (n a multiple of 8, n >= 8): the running
// maximum in Z0, NaNs remembered in K2; a last 8 merges into the low
// lanes.
TEXT ·max16(SB), NOSPLIT, $0-20
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	MOVQ $0xff, AX
	KMOVW AX, K4                  // the low 8 lanes
	MOVQ CX, BX
	ANDQ $-16, BX                 // the elements done 16 at a time
	CMPQ CX, $16
	JGE m16first
	VBROADCASTSS (SI), Z0         // n is 8: every lane from the first 8
	VMOVUPS.Z (SI), K4, Z1
	VMAXPS Z1, Z0, K4, Z0
	VCMPPS $3, Z1, Z1, K2         // NaN mask
	JMP m16done

m16first:
	VMOVUPS (SI), Z0              // running max: the first 16
	VCMPPS $3, Z0, Z0, K2         // NaN mask
	MOVQ $16, AX

m16loop:
	CMPQ AX, BX
	JGE m16tail
	VMOVUPS (SI)(AX*4), Z1
	VCMPPS $3, Z1, Z1, K3         // unordered: Z1 is NaN
	KORW K3, K2, K2
	VMAXPS Z1, Z0, Z0             // max(running, data)
	ADDQ $16, AX
	JMP m16loop

m16tail:
	CMPQ AX, CX
	JGE m16done
	VMOVUPS.Z (SI)(AX*4), K4, Z1
	VCMPPS $3, Z1, Z1, K3
	KORW K3, K2, K2
	VMAXPS Z1, Z0, K4, Z0

m16done:
	VEXTRACTF64X4 $1, Z0, Y1
	VMAXPS Y1, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VMAXPS X1, X0, X0
	VPERMILPS $0x4e, X0, X1
	VMAXPS X1, X0, X0
	VPERMILPS $0xb1, X0, X1
	VMAXPS X1, X0, X0
	KORTESTW K2, K2
	JZ m16ret
	MOVL $0x7fc00000, AX          // quiet NaN
	MOVL AX, ret+16(FP)
	VZEROUPPER
	RET

m16ret:
	MOVSS X0, ret+16(FP)
	VZEROUPPER
	RET

// func scale16(x *float32, n int, s float32)
// x[i] *= s for n (a multiple of 8) elements, 16 a step, a last 8 masked.
TEXT ·scale16(SB), NOSPLIT, $0-20
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	VBROADCASTSS s+16(FP), Z1
	MOVQ $0xff, AX
	KMOVW AX, K2
	MOVQ CX, BX
	ANDQ $-16, BX
	XORQ AX, AX

s16loop:
	CMPQ AX, BX
	JGE s16tail
	VMULPS (SI)(AX*4), Z1, Z0
	VMOVUPS Z0, (SI)(AX*4)
	ADDQ $16, AX
	JMP s16loop

s16tail:
	CMPQ AX, CX
	JGE s16done
	VMOVUPS.Z (SI)(AX*4), K2, Z0
	VMULPS Z0, Z1, Z0
	VMOVUPS Z0, K2, (SI)(AX*4)

s16done:
	VZEROUPPER
	RET
