package cpu

import (
	"fmt"
	"strings"
)

// Device.Gemm with bfloat16 A and B (autocast's products) runs on one of:
//
//	amx         the native GEMM's AMX kernel (32x32, TDPBF16PS): where the
//	            CPU has AMX-BF16 and Linux grants the process the tiles
//	avx512bf16  the native GEMM's VDPBF16PS kernel (12x32): where the CPU
//	            has AVX512-BF16 and VDPBF16PS outruns its float32 FMA (AMD)
//	float32     the operands widened to float32, then the float32 GEMM:
//	            everywhere else, and whenever the float32 GEMM is OpenBLAS
//	            or gonum
//
// HILBERT_GEMM_BF16=amx|avx512bf16|float32 forces one; unset (or auto), the
// rule above (chooseBF16). The kernels differ from the widened product in
// their rounding (pairs of products summed in float32 in their own order,
// native_bf16_ref_test.go) and read denormal bfloat16 as zero.
const bf16Widen = "float32"

// bf16Choice is the bfloat16 GEMM chosen: its kernel (nil: widen), the
// start-up description and the error when HILBERT_GEMM_BF16 could not be
// honoured.
type bf16Choice struct {
	kernel *bf16Kernel
	desc   string
	err    error
}

// bf16Env is what the choice depends on.
type bf16Env struct {
	mode    string        // HILBERT_GEMM_BF16, lower-cased
	gemm    string        // the float32 GEMM chosen (gemmNative, ...)
	kernels []*bf16Kernel // the bfloat16 kernels this CPU can run
	dotFast bool          // VDPBF16PS outruns the float32 FMA (dotBF16Fast)
	godebug string        // GODEBUG, which can hide CPU features
}

// find returns the kernel named name among e's, or nil.
func (e bf16Env) find(name string) *bf16Kernel {
	for _, kb := range e.kernels {
		if kb.name == name {
			return kb
		}
	}
	return nil
}

// chooseBF16 applies the rule above (or HILBERT_GEMM_BF16) to e.
func chooseBF16(e bf16Env) bf16Choice {
	switch e.mode {
	case "", "auto":
		return e.auto()
	case bf16Widen:
		return bf16Choice{desc: "bfloat16 operands widened to float32, forced by HILBERT_GEMM_BF16"}
	case "amx", "avx512bf16":
		if e.gemm != gemmNative {
			c := e.auto()
			c.err = fmt.Errorf("HILBERT_GEMM_BF16=%s: the bfloat16 kernels belong to the native GEMM, and this process runs %s", e.mode, e.gemm)
			c.desc += fmt.Sprintf(" (%v)", c.err)
			return c
		}
		if kb := e.find(e.mode); kb != nil {
			return bf16Choice{kernel: kb, desc: kernelDesc(kb) + ", forced by HILBERT_GEMM_BF16"}
		}
		c := e.auto()
		c.err = fmt.Errorf("HILBERT_GEMM_BF16=%s: this CPU (or this process) cannot run the %s kernel%s", e.mode, e.mode, e.hidden())
		c.desc += fmt.Sprintf(" (%v)", c.err)
		return c
	default:
		c := e.auto()
		c.err = fmt.Errorf("HILBERT_GEMM_BF16=%q: want amx, avx512bf16, float32 or auto", e.mode)
		c.desc += fmt.Sprintf(" (%v)", c.err)
		return c
	}
}

// auto is the automatic choice.
func (e bf16Env) auto() bf16Choice {
	if e.gemm != gemmNative {
		return bf16Choice{desc: fmt.Sprintf("bfloat16 operands widened to float32 (the bfloat16 kernels belong to the native GEMM)")}
	}
	if kb := e.find("amx"); kb != nil {
		return bf16Choice{kernel: kb, desc: kernelDesc(kb)}
	}
	if kb := e.find("avx512bf16"); kb != nil {
		if e.dotFast {
			return bf16Choice{kernel: kb, desc: kernelDesc(kb)}
		}
		return bf16Choice{desc: "bfloat16 operands widened to float32: this CPU has no usable AMX-BF16, and its VDPBF16PS does half the multiply-adds per cycle of its float32 FMA (measured on Emerald Rapids)" + e.hidden()}
	}
	return bf16Choice{desc: "bfloat16 operands widened to float32: this CPU has neither usable AMX-BF16 nor AVX512-BF16" + e.hidden()}
}

// hidden says that GODEBUG may hide the features, when it sets any.
func (e bf16Env) hidden() string {
	if strings.Contains(e.godebug, "cpu.") {
		return fmt.Sprintf(" (GODEBUG=%s may hide them)", e.godebug)
	}
	return ""
}

func kernelDesc(kb *bf16Kernel) string {
	inst := "VDPBF16PS"
	if kb.tiles {
		inst = "AMX TDPBF16PS"
	}
	return fmt.Sprintf("bfloat16 products on the %s kernel %dx%d (%s)", kb.name, kb.mr, kb.nr, inst)
}

// bf16Use is the kernel Device.Gemm runs bfloat16 operands on; nil: it
// widens them (set by initGemm).
var bf16Use *bf16Kernel

// BFloat16Kernel names what runs Device.Gemm's bfloat16 products: "amx",
// "avx512bf16", or "float32" when the operands are widened.
func BFloat16Kernel() string {
	initGemm()
	if bf16Use == nil {
		return bf16Widen
	}
	return bf16Use.name
}

// GemmBFloat16 computes C = alpha*op(A)*op(B) + beta*C (row-major, as
// Sgemm) for bfloat16 A and B as Device.Gemm does: on the bfloat16 kernel
// (BFloat16Kernel), or widening A and B to float32 (into new slices) for
// the float32 GEMM.
func GemmBFloat16(tA, tB bool, m, n, k int, alpha float32, a []uint16, lda int, b []uint16, ldb int, beta float32, c []float32, ldc int) {
	initGemm()
	if bf16Use != nil {
		bf16With(bf16Use, Threads(), tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	af, bf := make([]float32, len(a)), make([]float32, len(b))
	fromBFloat16(af, a)
	fromBFloat16(bf, b)
	sgemmWith(gemmUse, Threads(), tA, tB, m, n, k, alpha, af, lda, bf, ldb, beta, c, ldc)
}

// bf16With runs one bfloat16 GEMM on kernel kb with threads workers
// (sgemmWith's counterpart).
func bf16With(kb *bf16Kernel, threads int, tA, tB bool, m, n, k int, alpha float32, a []uint16, lda int, b []uint16, ldb int, beta float32, c []float32, ldc int) {
	if m == 0 || n == 0 {
		return
	}
	if k == 0 || alpha == 0 {
		scaleMatrix(c, m, n, ldc, beta)
		return
	}
	bf16Gemm(kb, threads, tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}
