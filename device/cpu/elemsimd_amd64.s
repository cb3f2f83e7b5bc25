#include "textflag.h"

// Vector forms of elementwise loops in elementwise.go. Each does the
// scalar loop's float32 operations in the same order (a multiply and an
// add rounded separately, never fused; VSQRTPS and VDIVPS correctly
// rounded as the scalar code's are), so results are the same bit for bit.
// n is a multiple of 8; the callers run the rest in Go.

// func axpby8(dst, x *float32, n int, alpha, beta float32)
// dst = alpha*x + beta*dst.
TEXT ·axpby8(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ n+16(FP), CX
	VBROADCASTSS alpha+24(FP), Y14
	VBROADCASTSS beta+28(FP), Y15
	XORQ AX, AX

axloop:
	CMPQ AX, CX
	JGE axdone
	VMULPS (SI)(AX*4), Y14, Y0
	VMULPS (DI)(AX*4), Y15, Y1
	VADDPS Y1, Y0, Y0
	VMOVUPS Y0, (DI)(AX*4)
	ADDQ $8, AX
	JMP axloop

axdone:
	VZEROUPPER
	RET

// func scaleTo8(dst, x *float32, n int, alpha float32)
// dst = alpha*x.
TEXT ·scaleTo8(SB), NOSPLIT, $0-28
	MOVQ dst+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ n+16(FP), CX
	VBROADCASTSS alpha+24(FP), Y14
	XORQ AX, AX

stloop:
	CMPQ AX, CX
	JGE stdone
	VMULPS (SI)(AX*4), Y14, Y0
	VMOVUPS Y0, (DI)(AX*4)
	ADDQ $8, AX
	JMP stloop

stdone:
	VZEROUPPER
	RET

// func adamW8(p, grad, m, v, s *float32, n int, c *adamScalars32)
// One AdamW update of n elements (see Device.AdamWStep); s may be nil.
// c holds, in order: -lr, beta1, beta2, 1-beta1, 1-beta2, eps, decay,
// bc1, bc2.
TEXT ·adamW8(SB), NOSPLIT, $0-56
	MOVQ p+0(FP), DI
	MOVQ grad+8(FP), SI
	MOVQ m+16(FP), R8
	MOVQ v+24(FP), R9
	MOVQ s+32(FP), R10
	MOVQ n+40(FP), CX
	MOVQ c+48(FP), DX
	VBROADCASTSS 0(DX), Y7    // -lr
	VBROADCASTSS 4(DX), Y8    // beta1
	VBROADCASTSS 8(DX), Y9    // beta2
	VBROADCASTSS 12(DX), Y10  // 1-beta1
	VBROADCASTSS 16(DX), Y11  // 1-beta2
	VBROADCASTSS 20(DX), Y12  // eps
	VBROADCASTSS 24(DX), Y13  // decay
	VBROADCASTSS 28(DX), Y14  // bc1
	VBROADCASTSS 32(DX), Y15  // bc2
	XORQ AX, AX

adloop:
	CMPQ AX, CX
	JGE addone
	VMOVUPS (SI)(AX*4), Y0      // g
	VMULPS (R8)(AX*4), Y8, Y1   // beta1 m
	VMULPS Y0, Y10, Y2          // (1-beta1) g
	VADDPS Y2, Y1, Y1           // m
	VMOVUPS Y1, (R8)(AX*4)
	VMULPS (R9)(AX*4), Y9, Y3   // beta2 v
	VMULPS Y0, Y11, Y4          // (1-beta2) g
	VMULPS Y0, Y4, Y4           // (1-beta2) g g
	VADDPS Y4, Y3, Y3           // v
	VMOVUPS Y3, (R9)(AX*4)
	VDIVPS Y14, Y1, Y1          // m / bc1
	VMULPS Y1, Y7, Y1           // -lr (m / bc1)
	VDIVPS Y15, Y3, Y3          // v / bc2
	VSQRTPS Y3, Y3
	VADDPS Y12, Y3, Y3          // sqrt(v / bc2) + eps
	VDIVPS Y3, Y1, Y1           // s
	TESTQ R10, R10
	JZ adnostore
	VMOVUPS Y1, (R10)(AX*4)

adnostore:
	VMULPS (DI)(AX*4), Y13, Y2  // p decay
	VADDPS Y1, Y2, Y2           // + s
	VMOVUPS Y2, (DI)(AX*4)
	ADDQ $8, AX
	JMP adloop

addone:
	VZEROUPPER
	RET

// func binaryVV8(op int, z, x, y *float32, n int)
// z = x op y: op 0 add, 1 subtract, 2 multiply.
TEXT ·binaryVV8(SB), NOSPLIT, $0-40
	MOVQ op+0(FP), R8
	MOVQ z+8(FP), DI
	MOVQ x+16(FP), SI
	MOVQ y+24(FP), DX
	MOVQ n+32(FP), CX
	XORQ AX, AX
	CMPQ R8, $1
	JEQ subloop
	JGT mulloop

addloop:
	CMPQ AX, CX
	JGE vvdone
	VMOVUPS (SI)(AX*4), Y0
	VADDPS (DX)(AX*4), Y0, Y0
	VMOVUPS Y0, (DI)(AX*4)
	ADDQ $8, AX
	JMP addloop

subloop:
	CMPQ AX, CX
	JGE vvdone
	VMOVUPS (SI)(AX*4), Y0
	VSUBPS (DX)(AX*4), Y0, Y0
	VMOVUPS Y0, (DI)(AX*4)
	ADDQ $8, AX
	JMP subloop

mulloop:
	CMPQ AX, CX
	JGE vvdone
	VMOVUPS (SI)(AX*4), Y0
	VMULPS (DX)(AX*4), Y0, Y0
	VMOVUPS Y0, (DI)(AX*4)
	ADDQ $8, AX
	JMP mulloop

vvdone:
	VZEROUPPER
	RET

// func colSums16(acc *float64, x *float32, cols, rows int, pitch uintptr, squares bool)
// acc[i] += float64(x[j*pitch+i]) (squared when squares is set) for rows
// j = 0, 1, ... in order and columns i < cols, a multiple of 16: each
// column's float64 sum in the scalar loop's order (a square of a float32
// is exact in float64, so the fused multiply-add rounds as the scalar
// multiply then add). pitch is in bytes.
TEXT ·colSums16(SB), NOSPLIT, $0-41
	MOVQ acc+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ cols+16(FP), CX
	MOVQ rows+24(FP), DX
	MOVQ pitch+32(FP), R8
	MOVB squares+40(FP), R9

csblock:
	CMPQ CX, $0
	JLE csdone
	VMOVUPD (DI), Y0
	VMOVUPD 32(DI), Y1
	VMOVUPD 64(DI), Y2
	VMOVUPD 96(DI), Y3
	MOVQ SI, AX
	MOVQ DX, BX
	TESTB R9, R9
	JNE csqrow

csrow:
	CMPQ BX, $0
	JLE csstore
	VCVTPS2PD (AX), Y4
	VCVTPS2PD 16(AX), Y5
	VCVTPS2PD 32(AX), Y6
	VCVTPS2PD 48(AX), Y7
	VADDPD Y4, Y0, Y0
	VADDPD Y5, Y1, Y1
	VADDPD Y6, Y2, Y2
	VADDPD Y7, Y3, Y3
	ADDQ R8, AX
	DECQ BX
	JMP csrow

csqrow:
	CMPQ BX, $0
	JLE csstore
	VCVTPS2PD (AX), Y4
	VCVTPS2PD 16(AX), Y5
	VCVTPS2PD 32(AX), Y6
	VCVTPS2PD 48(AX), Y7
	VFMADD231PD Y4, Y4, Y0
	VFMADD231PD Y5, Y5, Y1
	VFMADD231PD Y6, Y6, Y2
	VFMADD231PD Y7, Y7, Y3
	ADDQ R8, AX
	DECQ BX
	JMP csqrow

csstore:
	VMOVUPD Y0, (DI)
	VMOVUPD Y1, 32(DI)
	VMOVUPD Y2, 64(DI)
	VMOVUPD Y3, 96(DI)
	ADDQ $128, DI
	ADDQ $64, SI
	SUBQ $16, CX
	JMP csblock

csdone:
	VZEROUPPER
	RET

// func rowSumSquares8(ss *float64, x *float32, cols int, idx *int32)
// ss[r] = sumSquares of row r of x, for 8 rows idx[r] floats apart, with
// sumSquares's two float64 chains per row (even columns, odd columns, in
// order, then their sum): lanes are rows, gathered a column at a time,
// so every row's sums are the scalar loop's bit for bit (a square of a
// float32 is exact in float64, so the fused multiply-add rounds as the
// scalar multiply then add).
TEXT ·rowSumSquares8(SB), NOSPLIT, $0-32
	MOVQ ss+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ cols+16(FP), CX
	MOVQ idx+24(FP), AX
	VMOVDQU (AX), Y15
	VXORPD Y8, Y8, Y8
	VXORPD Y9, Y9, Y9
	VXORPD Y10, Y10, Y10
	VXORPD Y11, Y11, Y11

rsqpair:
	CMPQ CX, $2
	JLT rsqtail
	VPCMPEQD Y14, Y14, Y14
	VGATHERDPS Y14, (SI)(Y15*4), Y0
	VCVTPS2PD X0, Y1
	VEXTRACTF128 $1, Y0, X2
	VCVTPS2PD X2, Y2
	VFMADD231PD Y1, Y1, Y8
	VFMADD231PD Y2, Y2, Y9
	VPCMPEQD Y14, Y14, Y14
	VGATHERDPS Y14, 4(SI)(Y15*4), Y3
	VCVTPS2PD X3, Y4
	VEXTRACTF128 $1, Y3, X5
	VCVTPS2PD X5, Y5
	VFMADD231PD Y4, Y4, Y10
	VFMADD231PD Y5, Y5, Y11
	ADDQ $8, SI
	SUBQ $2, CX
	JMP rsqpair

rsqtail:
	CMPQ CX, $0
	JLE rsqdone
	VPCMPEQD Y14, Y14, Y14
	VGATHERDPS Y14, (SI)(Y15*4), Y0
	VCVTPS2PD X0, Y1
	VEXTRACTF128 $1, Y0, X2
	VCVTPS2PD X2, Y2
	VFMADD231PD Y1, Y1, Y8
	VFMADD231PD Y2, Y2, Y9

rsqdone:
	VADDPD Y10, Y8, Y8
	VADDPD Y11, Y9, Y9
	VMOVUPD Y8, (DI)
	VMOVUPD Y9, 32(DI)
	VZEROUPPER
	RET

// func softmaxGrad8(ds, p *float32, n int, d float32)
// ds = p * (ds - d): the softmax's gradient from dP and the row's
// dot(dO, O), a subtract and a multiply rounded separately.
TEXT ·softmaxGrad8(SB), NOSPLIT, $0-28
	MOVQ ds+0(FP), DI
	MOVQ p+8(FP), SI
	MOVQ n+16(FP), CX
	VBROADCASTSS d+24(FP), Y15
	XORQ AX, AX

sgloop:
	CMPQ AX, CX
	JGE sgdone
	VMOVUPS (DI)(AX*4), Y0
	VSUBPS Y15, Y0, Y0
	VMULPS (SI)(AX*4), Y0, Y0
	VMOVUPS Y0, (DI)(AX*4)
	ADDQ $8, AX
	JMP sgloop

sgdone:
	VZEROUPPER
	RET

// func lnColGrads16(accW, accB *float64, x, dy, mean, rstd *float32, cols, rows int, pitch uintptr)
// LayerNormBackward's column sums over rows r = 0, 1, ... in order, for
// columns i < cols (a multiple of 16): accW[i] += float64(dy) *
// float64((x - mean[r]) * rstd[r]) and accB[i] += float64(dy), each in
// float64 (a product of two float32s is exact in float64, so the fused
// multiply-add rounds as the scalar multiply then add) and the
// normalised x in float32 as the scalar loop's. pitch is in bytes.
TEXT ·lnColGrads16(SB), NOSPLIT, $0-72
	MOVQ accW+0(FP), DI
	MOVQ accB+8(FP), R10
	MOVQ x+16(FP), SI
	MOVQ dy+24(FP), DX
	MOVQ cols+48(FP), CX
	MOVQ pitch+64(FP), R8

lnblock:
	CMPQ CX, $0
	JLE lndone
	VMOVUPD (DI), Y0
	VMOVUPD 32(DI), Y1
	VMOVUPD 64(DI), Y2
	VMOVUPD 96(DI), Y3
	VMOVUPD (R10), Y4
	VMOVUPD 32(R10), Y5
	VMOVUPD 64(R10), Y6
	VMOVUPD 96(R10), Y7
	MOVQ SI, AX
	MOVQ DX, BX
	MOVQ mean+32(FP), R11
	MOVQ rstd+40(FP), R12
	MOVQ rows+56(FP), R9

lnrow:
	CMPQ R9, $0
	JLE lnstore
	VBROADCASTSS (R11), Y14
	VBROADCASTSS (R12), Y15
	VMOVUPS (AX), Y8
	VSUBPS Y14, Y8, Y8
	VMULPS Y15, Y8, Y8          // xhat, columns 0-7
	VMOVUPS 32(AX), Y9
	VSUBPS Y14, Y9, Y9
	VMULPS Y15, Y9, Y9          // xhat, columns 8-15
	VCVTPS2PD X8, Y10
	VCVTPS2PD (BX), Y11
	VFMADD231PD Y10, Y11, Y0
	VADDPD Y11, Y4, Y4
	VEXTRACTF128 $1, Y8, X8
	VCVTPS2PD X8, Y10
	VCVTPS2PD 16(BX), Y11
	VFMADD231PD Y10, Y11, Y1
	VADDPD Y11, Y5, Y5
	VCVTPS2PD X9, Y10
	VCVTPS2PD 32(BX), Y11
	VFMADD231PD Y10, Y11, Y2
	VADDPD Y11, Y6, Y6
	VEXTRACTF128 $1, Y9, X9
	VCVTPS2PD X9, Y10
	VCVTPS2PD 48(BX), Y11
	VFMADD231PD Y10, Y11, Y3
	VADDPD Y11, Y7, Y7
	ADDQ R8, AX
	ADDQ R8, BX
	ADDQ $4, R11
	ADDQ $4, R12
	DECQ R9
	JMP lnrow

lnstore:
	VMOVUPD Y0, (DI)
	VMOVUPD Y1, 32(DI)
	VMOVUPD Y2, 64(DI)
	VMOVUPD Y3, 96(DI)
	VMOVUPD Y4, (R10)
	VMOVUPD Y5, 32(R10)
	VMOVUPD Y6, 64(R10)
	VMOVUPD Y7, 96(R10)
	ADDQ $128, DI
	ADDQ $128, R10
	ADDQ $64, SI
	ADDQ $64, DX
	SUBQ $16, CX
	JMP lnblock

lndone:
	VZEROUPPER
	RET
