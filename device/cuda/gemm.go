package cuda

import (
	"os"
	"unsafe"

	"github.com/hilbert-ml/hilbert/device"
)

// TF32Env names the environment variable that, set to 1, lets cuBLAS use
// TF32 tensor cores for float32 products (faster, about 1e-3 relative
// error). Off by default so that float32 means float32.
const TF32Env = "HILBERT_CUDA_TF32"

func tf32Enabled() bool { return os.Getenv(TF32Env) == "1" }

// Gemm runs a strided batched product with cuBLAS. Float32 operands use
// cublasSgemmStridedBatched; BFloat16 A and B use
// cublasGemmStridedBatchedEx with float32 accumulation and a float32 or
// bfloat16 C.
func (d *Device) Gemm(g device.GemmArgs) {
	d.enter()
	defer d.leave()
	if g.M == 0 || g.N == 0 {
		return
	}
	c := toColMajor(g)
	a, b, cc := c.a.(*Buffer), c.b.(*Buffer), c.c.(*Buffer)
	switch {
	case a.dtype == device.Float32 && b.dtype == device.Float32 && cc.dtype == device.Float32:
		st := d.blas.sgemmStrided(d.handle, c.transa, c.transb, c.m, c.n, c.k,
			&c.alpha, a.ptr, c.lda, c.strideA, b.ptr, c.ldb, c.strideB,
			&c.beta, cc.ptr, c.ldc, c.strideC, c.batch)
		d.failLocked(cublasCheck("cublasSgemmStridedBatched", st))
	case a.dtype == device.BFloat16 && b.dtype == device.BFloat16 &&
		(cc.dtype == device.Float32 || cc.dtype == device.BFloat16):
		st := d.blas.gemmStridedEx(d.handle, c.transa, c.transb, c.m, c.n, c.k,
			unsafe.Pointer(&c.alpha), a.ptr, cudaR16BF, c.lda, c.strideA, b.ptr, cudaR16BF, c.ldb, c.strideB,
			unsafe.Pointer(&c.beta), cc.ptr, cudaDataType(cc.dtype), c.ldc, c.strideC, c.batch,
			cublasCompute32F, cublasGemmDefault)
		d.failLocked(cublasCheck("cublasGemmStridedBatchedEx", st))
	default:
		d.unsupported("Gemm", "dtypes A="+g.A.DType().String()+" B="+g.B.DType().String()+" C="+g.C.DType().String()+
			" (want all float32, or bfloat16 A and B)")
	}
}
