package cuda

import (
	"cmp"
	"fmt"
	"unsafe"

	"github.com/hilbert-ml/hilbert/device"
)

// cuBLAS constants (cublas_api.h, library_types.h).
const (
	cublasOpN = 0
	cublasOpT = 1

	cudaR32F  = 0  // CUDA_R_32F
	cudaR16BF = 14 // CUDA_R_16BF

	cublasCompute32F     = 68 // CUBLAS_COMPUTE_32F
	cublasGemmDefault    = -1 // CUBLAS_GEMM_DEFAULT
	cublasTF32TensorMath = 3  // CUBLAS_TF32_TENSOR_OP_MATH
)

// cublasAPI holds the cuBLAS entry points this package uses.
type cublasAPI struct {
	lib *library

	create        func(h *uintptr) int32
	destroy       func(h uintptr) int32
	setStream     func(h uintptr, stream uintptr) int32
	setMathMode   func(h uintptr, mode int32) int32
	getVersion    func(h uintptr, v *int32) int32
	sgemmStrided  func(h uintptr, transa, transb, m, n, k int32, alpha *float32, a uint64, lda int32, strideA int64, b uint64, ldb int32, strideB int64, beta *float32, c uint64, ldc int32, strideC int64, batch int32) int32
	gemmStridedEx func(h uintptr, transa, transb, m, n, k int32, alpha unsafe.Pointer, a uint64, atype, lda int32, strideA int64, b uint64, btype, ldb int32, strideB int64, beta unsafe.Pointer, c uint64, ctype, ldc int32, strideC int64, batch, computeType, algo int32) int32
}

// loadCublas opens cuBLAS and binds its entry points.
func loadCublas(dirs []string) (*cublasAPI, error) {
	c := &cublasAPI{}
	lib, err := bindLibrary("cuBLAS", cublasLibNames, dirs, []symbol{
		sym(&c.create, "cublasCreate_v2"),
		sym(&c.destroy, "cublasDestroy_v2"),
		sym(&c.setStream, "cublasSetStream_v2"),
		sym(&c.setMathMode, "cublasSetMathMode"),
		sym(&c.getVersion, "cublasGetVersion_v2"),
		sym(&c.sgemmStrided, "cublasSgemmStridedBatched"),
		sym(&c.gemmStridedEx, "cublasGemmStridedBatchedEx"),
	})
	if err != nil {
		return nil, err
	}
	c.lib = lib
	return c, nil
}

func cublasCheck(call string, status int32) error {
	if status == 0 {
		return nil
	}
	return &Error{Call: call, Code: int(status), Message: cublasStatusName(status)}
}

func cublasStatusName(s int32) string {
	switch s {
	case 1:
		return "CUBLAS_STATUS_NOT_INITIALIZED"
	case 3:
		return "CUBLAS_STATUS_ALLOC_FAILED"
	case 7:
		return "CUBLAS_STATUS_INVALID_VALUE"
	case 8:
		return "CUBLAS_STATUS_ARCH_MISMATCH"
	case 11:
		return "CUBLAS_STATUS_MAPPING_ERROR"
	case 13:
		return "CUBLAS_STATUS_EXECUTION_FAILED"
	case 14:
		return "CUBLAS_STATUS_INTERNAL_ERROR"
	case 15:
		return "CUBLAS_STATUS_NOT_SUPPORTED"
	}
	return fmt.Sprintf("cublas status %d", s)
}

// colMajorGemm is a row-major GemmArgs restated for column-major cuBLAS.
// A row-major M x N matrix C with pitch LDC is, read column-major, the
// N x M matrix C^T with the same leading dimension, and
// C^T = op(B)^T op(A)^T, so cuBLAS computes with m = N, n = M, its A being
// our B and its B our A, transposes carried over unchanged.
type colMajorGemm struct {
	transa, transb    int32
	m, n, k           int32
	a, b, c           device.Buffer
	lda, ldb, ldc     int32
	strideA, strideB  int64
	strideC           int64
	batch             int32
	alpha, beta       float32
	inputType, output device.DType
}

// toColMajor maps g onto the cuBLAS call that computes it.
func toColMajor(g device.GemmArgs) colMajorGemm {
	batch := g.Batch
	batch = cmp.Or(batch, 1)
	op := func(t bool) int32 {
		if t {
			return cublasOpT
		}
		return cublasOpN
	}
	return colMajorGemm{
		transa: op(g.TransB), transb: op(g.TransA),
		m: int32(g.N), n: int32(g.M), k: int32(g.K),
		// cuBLAS wants every leading dimension >= 1, even for an empty
		// matrix (K 0: A and B are not read, C = beta C); a pitch of 0
		// means the matrix has no columns, so 1 is as good.
		a: g.B, lda: int32(max(g.LDB, 1)), strideA: int64(g.StrideB),
		b: g.A, ldb: int32(max(g.LDA, 1)), strideB: int64(g.StrideA),
		c: g.C, ldc: int32(max(g.LDC, 1)), strideC: int64(g.StrideC),
		batch: int32(batch), alpha: g.Alpha, beta: g.Beta,
		inputType: g.A.DType(), output: g.C.DType(),
	}
}

func cudaDataType(t device.DType) int32 {
	if t == device.BFloat16 {
		return cudaR16BF
	}
	return cudaR32F
}
