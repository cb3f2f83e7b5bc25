// Package device defines the kernels that every Hilbert backend
// implements, and the buffers those kernels operate on.
//
// Core is the primitive set: memory, copies, the matrix product, one
// strided copy, elementwise unary and broadcasting binary maps, select,
// reductions over any one axis, gather and scatter-add along an axis, and
// counter-based random fills. A backend implements the Core and nothing
// else; Device is another name for it. The fused kernels of the paper's
// transformer (RMSNorm, RoPE, SwiGLU, attention, cross-entropy), a few
// data movements and Axpby are optional capabilities: small interfaces a
// backend may add for speed, each defined by its composition from the Core
// in device/compose, which callers go through (optim and optim/geometry
// declare their own kernels the same way). device/devicetest
// is the conformance suite every backend runs: the Core against float64
// references, and each capability a backend has against its composition.
//
// Everything above this package (tensor, autograd, nn, optim, models) talks
// to a Device only through this interface, so a model written once runs on
// the CPU backend (device/cpu) or the CUDA backend (device/cuda) unchanged.
//
// Conventions shared by all kernels:
//   - Matrices are row-major. A "rows x cols" buffer holds rows*cols elements.
//   - Kernels do not allocate and do not validate shapes: the tensor layer
//     checks shapes and devices before it calls a kernel, and names the op
//     and the shapes in its errors. A kernel given inconsistent sizes has
//     undefined results (the CPU backend panics on out-of-range slices).
//   - Kernels write their outputs (they do not accumulate) unless the
//     documentation says otherwise. Outputs must not alias inputs unless the
//     documentation allows it.
//   - Kernels may run asynchronously (CUDA); Synchronize waits for them and
//     reports the first error a kernel raised.
//
// This package must not depend on any other Hilbert package.
package device

import (
	"fmt"
	"math"
)

// DType is the element type of a buffer.
type DType uint8

const (
	// Float32 is IEEE-754 single precision, the type of parameters,
	// gradients and optimizer state.
	Float32 DType = iota + 1
	// BFloat16 is bfloat16 storage (8-bit exponent, 7-bit mantissa), for
	// autocast operands. Backends store it and convert it (Cast, Copy,
	// CopyStrided, the host copies) and take it as Gemm operands (A and B,
	// with float32 accumulation): the CPU multiplies them on its bfloat16
	// kernel (AMX, or VDPBF16PS) where it has one and otherwise widens them
	// to float32 for its product, CUDA runs them on tensor cores. The other
	// compute methods take float types of full width.
	BFloat16
	// Int32 holds token ids and targets.
	Int32
	// Float64 is IEEE-754 double precision, for reference runs and
	// gradient checks. The CPU backend implements the core ops for it;
	// a backend whose Alloc refuses it does not support it.
	Float64
)

// Size returns the number of bytes one element occupies.
func (t DType) Size() int {
	switch t {
	case Float32, Int32:
		return 4
	case BFloat16:
		return 2
	case Float64:
		return 8
	}
	return 0
}

var dtypeNames = [...]string{Float32: "float32", BFloat16: "bfloat16", Int32: "int32", Float64: "float64"}

// String returns the dtype's conventional name ("float32", "bfloat16",
// "int32", "float64").
func (t DType) String() string { return enumName(t, dtypeNames[:], "dtype") }

// enumName returns names[v], the name of the enum value v, or kind(v)
// for a value without one.
func enumName[E ~uint8](v E, names []string, kind string) string {
	if int(v) < len(names) && names[v] != "" {
		return names[v]
	}
	return fmt.Sprintf("%s(%d)", kind, uint8(v))
}

// BFloat16FromFloat32 rounds f to bfloat16 (to nearest, ties to even),
// keeping NaN a NaN.
func BFloat16FromFloat32(f float32) uint16 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 { // NaN: keep it quiet and a NaN
		return uint16(u>>16) | 0x40
	}
	u += 0x7fff + (u>>16)&1
	return uint16(u >> 16)
}

// Float32FromBFloat16 widens a bfloat16 to float32 (exactly).
func Float32FromBFloat16(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// Buffer is a run of elements of one DType in one device's memory.
// Slice gives cheap views; a view shares memory with its parent.
type Buffer interface {
	// Device returns the device that owns the memory.
	Device() Device
	// DType returns the element type.
	DType() DType
	// Len returns the number of elements.
	Len() int
	// Slice returns the view of n elements starting at element off.
	Slice(off, n int) Buffer
}

// GemmArgs describes a strided batched matrix product in row-major layout:
//
//	for b in 0..Batch-1:
//	    C_b = Alpha * op(A_b) * op(B_b) + Beta * C_b
//
// where op(X) is X or X^T, op(A_b) is M x K, op(B_b) is K x N and C_b is
// M x N. A_b starts StrideA elements after A_{b-1} (likewise B, C). LDA,
// LDB and LDC are leading dimensions (row pitches) of the stored matrices:
// A is stored M x K (K x M when TransA) with row pitch LDA, and so on.
// With Beta == 0, C is not read (NaNs in C do not propagate).
type GemmArgs struct {
	TransA, TransB bool
	M, N, K        int
	Alpha, Beta    float32
	A              Buffer
	LDA, StrideA   int
	B              Buffer
	LDB, StrideB   int
	C              Buffer
	LDC, StrideC   int
	// Batch is the number of products; 0 is treated as 1.
	Batch int
}

// BinaryOp selects an elementwise operation of two operands
// (BinaryStrided).
type BinaryOp uint8

const (
	// Add computes a + b.
	Add BinaryOp = iota + 1
	// Sub computes a - b.
	Sub
	// Mul computes a * b.
	Mul
	// Div computes a / b.
	Div
	// Maximum is the larger of a and b: NaN if either is NaN, and +0 for
	// the pair (-0, +0) (NumPy's maximum, Go's max).
	Maximum
	// Minimum is the smaller of a and b: NaN if either is NaN, and -0 for
	// the pair (-0, +0).
	Minimum
	// Pow computes a^b (C's pow: pow(x, 0) = 1 even for NaN x, pow(1, y) = 1).
	Pow
	// Eq, Ne, Lt, Le, Gt and Ge compare a with b and give 1 where the
	// comparison holds and 0 elsewhere (IEEE: every comparison with a NaN
	// is false except Ne).
	Eq
	Ne
	Lt
	Le
	Gt
	Ge

	numBinaryOps = Ge
)

var binaryNames = [...]string{Add: "add", Sub: "sub", Mul: "mul", Div: "div", Maximum: "maximum",
	Minimum: "minimum", Pow: "pow", Eq: "eq", Ne: "ne", Lt: "lt", Le: "le", Gt: "gt", Ge: "ge"}

// String names the operation.
func (op BinaryOp) String() string { return enumName(op, binaryNames[:], "binary") }

// ReduceOp selects a reduction. Reduce takes Sum, SumSquares and Max;
// ReduceAxis takes them all.
type ReduceOp uint8

const (
	// Sum adds the elements (0 for none).
	Sum ReduceOp = iota + 1
	// SumSquares adds the squares of the elements.
	SumSquares
	// Max takes the largest element (-Inf for none; NaN if any is NaN).
	Max
	// Min takes the smallest element (+Inf for none; NaN if any is NaN).
	Min
	// ArgMax gives the index of the first largest element into an Int32
	// buffer; a NaN counts as larger than every number (the first NaN
	// wins); -1 for none.
	ArgMax
	// ArgMin gives the index of the first smallest element; a NaN counts
	// as smaller than every number; -1 for none.
	ArgMin
)

var reduceNames = [...]string{Sum: "sum", SumSquares: "sumsq", Max: "max", Min: "min", ArgMax: "argmax", ArgMin: "argmin"}

// String names the reduction.
func (op ReduceOp) String() string { return enumName(op, reduceNames[:], "reduce") }

// AttentionShape describes tensors laid out as [Batch, Seq, Heads, HeadDim]
// (the natural layout after a [Batch*Seq, Heads*HeadDim] projection), so
// that head splitting needs no copy.
type AttentionShape struct {
	Batch, Seq, Heads, HeadDim int
	// BFloat16Operands lets a kernel round its operands (q, k, v, and in
	// the backward dout and the probabilities) to bfloat16, accumulating
	// in float32, as autocast does for the matrix products. Without it the
	// kernel computes in float32. The CPU ignores it (always float32); the
	// CUDA backend takes its tensor-core kernels only when it is set.
	BFloat16Operands bool
	// KVSeq is the sequence length of k and v when it differs from the
	// queries' Seq (0: Seq); see Keys and Visible (device/attention.go).
	KVSeq int
	// Unmasked lets every query see every key (cross-attention) instead
	// of the causal mask.
	Unmasked bool
	// KVHeads is the number of heads of k and v when fewer than Heads
	// (grouped-query attention; 0: Heads): it divides Heads, and query
	// head h reads key and value head h / (Heads/KVHeads). See KeyHeads
	// and GroupedAttender.
	KVHeads int
}

// Core is the primitive set every backend implements: memory, copies and
// casts, the matrix product, and the strided elementwise, reduction,
// indexing and random kernels that every other op can be composed from.
// A new backend writes these methods; device/devicetest checks them all.
//
// Dtypes: the compute methods take Float32 operands, and Float64 ones on
// a backend whose Alloc accepts Float64 (the CPU). CopyStrided moves any
// dtype. ArgMax and ArgMin write Int32; indices are Int32. A backend with
// int32 arithmetic (the CPU) also takes Int32 operands in BinaryStrided
// (Add, Sub, Mul, Maximum, Minimum and the comparisons, wrapping on
// overflow as two's complement does) and in Where (an Int32 cond); one
// without (CUDA) reports the dtype as the error of Synchronize.
type Core interface {
	// Name identifies the backend and the device, e.g. "cpu" or "cuda:0".
	Name() string

	// Alloc returns a zeroed buffer of n elements of dtype. A backend
	// refuses the dtypes it does not implement.
	Alloc(dtype DType, n int) (Buffer, error)
	// Free releases a buffer returned by Alloc. Views must not be freed.
	Free(b Buffer)
	// Synchronize waits for queued kernels and returns the first error any
	// of them raised.
	Synchronize() error

	// CopyFromHost copies src into dst (len(src) == dst.Len()), converting
	// float32 to the buffer's dtype when it is another float type.
	CopyFromHost(dst Buffer, src []float32)
	// CopyToHost copies src into dst (len(dst) == src.Len()), converting to
	// float32, and waits for the copy to finish.
	CopyToHost(dst []float32, src Buffer)
	// CopyFloat64FromHost copies src into dst, converting float64 to the
	// buffer's float dtype (exact for a Float64 buffer).
	CopyFloat64FromHost(dst Buffer, src []float64)
	// CopyFloat64ToHost copies src into dst, converting to float64, and
	// waits.
	CopyFloat64ToHost(dst []float64, src Buffer)
	// CopyInt32FromHost copies token ids into an Int32 buffer.
	CopyInt32FromHost(dst Buffer, src []int32)
	// CopyInt32ToHost copies an Int32 buffer to the host and waits.
	CopyInt32ToHost(dst []int32, src Buffer)
	// Copy copies src to dst on the device (same length, same dtype).
	Copy(dst, src Buffer)
	// Cast copies src to dst (same length), converting between any two
	// dtypes the backend stores (float32, bfloat16, float64, int32).
	// Between floats it rounds to nearest even (NaN stays NaN; widening
	// is exact). A float becomes an int32 rounded toward zero and
	// saturated at the int32 limits (so -2.7 gives -2, 3e9 and +Inf give
	// 2147483647, -Inf gives -2147483648) with NaN giving 0, which is
	// CUDA's __float2int_rz. An int32 becomes a float32 or bfloat16
	// rounded to nearest even in one rounding (16777217 gives 16777216),
	// a float64 exactly. With equal dtypes it is Copy.
	Cast(dst, src Buffer)
	// Fill sets every element of dst to v.
	Fill(dst Buffer, v float32)

	// Gemm runs a strided batched matrix product (see GemmArgs): Float32
	// A, B and C; BFloat16 A and B with a Float32 C (float32
	// accumulation); or Float64 A, B and C on a backend with Float64.
	Gemm(g GemmArgs)

	// CopyStrided copies every element of dims from src to dst, each read
	// or written through its layout: it is permute, transpose, slice,
	// concatenation (one call per part into a slice of dst) and broadcast
	// materialisation (stride-0 axes of src). Any dtype; dst and src share
	// it. The elements dst reaches must be distinct, and must not overlap
	// the ones src reads.
	CopyStrided(dims Dims, dst, src View)
	// Unary computes dst = op(src) elementwise (same length and dtype);
	// dst may alias src.
	Unary(op UnaryOp, dst, src Buffer)
	// BinaryStrided computes dst = a op b for every element of dims: dst is
	// contiguous row-major (dims.Numel() elements), a and b are read
	// through their layouts, so stride-0 axes broadcast them (NumPy
	// broadcasting is expressed through strides; see Broadcast).
	// Comparisons write 1 or 0. dst may alias an operand whose layout is
	// dims' row-major one.
	BinaryStrided(op BinaryOp, dims Dims, dst Buffer, a, b View)
	// Where computes dst = cond != 0 ? a : b for every element of dims
	// (a NaN cond selects a), dst contiguous and the others strided, all
	// of one dtype. dst may alias an operand with the row-major layout.
	Where(dims Dims, dst Buffer, cond, a, b View)
	// ReduceAxis reduces the middle axis of src, a contiguous
	// [outer, n, inner] array, into dst, a contiguous [outer, inner] one:
	// any one axis of a row-major tensor. ArgMax and ArgMin write Int32
	// indices in [0, n). Float32 sums accumulate in float64.
	ReduceAxis(op ReduceOp, dst, src Buffer, outer, n, inner int)
	// GatherAxis reads along the middle axis: for dst [outer, m, inner] and
	// src [outer, n, inner], both contiguous, dst[o,j,i] = src[o, idx[o,j,i], i],
	// with the Int32 indices read through idx's layout over dims
	// [outer, m, inner] (strides (0, 1, 0) give index_select and Embedding,
	// row-major strides give torch.gather). Indices lie in [0, n).
	GatherAxis(dst, src Buffer, idx View, outer, n, inner, m int)
	// ScatterAddAxis is GatherAxis's adjoint: dst[o, idx[o,j,i], i] +=
	// src[o,j,i] for dst [outer, n, inner] and src [outer, m, inner].
	// Repeated indices accumulate (the CPU adds them in order of j; CUDA in
	// an unspecified order).
	ScatterAddAxis(dst, src Buffer, idx View, outer, n, inner, m int)
	// Random fills dst with elements offset, offset+1, ... of the stream
	// of dist under seed: Uniform on [a, b), Normal of mean a and standard
	// deviation b, Bernoulli of probability a. The values are the same on
	// every backend (see Philox4x32 for the exact definition).
	Random(dist Distribution, dst Buffer, seed, offset uint64, a, b float32)
}

// Device is a backend as the layers above see it: exactly the Core. The
// fused kernels of the paper's transformer and optimizers are optional
// capabilities (capability.go), found by interface assertion as io finds
// io.WriterTo; device/compose runs a backend's kernel when it has one and
// the capability's composition from the Core otherwise.
type Device = Core
