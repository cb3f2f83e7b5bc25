// clang_shim.h: lets clang compile the kernels to PTX without the CUDA SDK
// (-nocudainc -nocudalib), for the offline compile test only. It declares
// what NVRTC provides built in. Never given to NVRTC.
#define __host__ __attribute__((host))
#define __device__ __attribute__((device))
#define __global__ __attribute__((global))
#define __shared__ __attribute__((shared))
#define __constant__ __attribute__((constant))
#define __forceinline__ __inline__ __attribute__((always_inline))
#define __launch_bounds__(...) __attribute__((launch_bounds(__VA_ARGS__)))
#include <__clang_cuda_builtin_vars.h>

extern "C" __device__ float expf(float);
extern "C" __device__ float exp2f(float);
extern "C" __device__ float logf(float);
extern "C" __device__ float sqrtf(float);
extern "C" __device__ double sqrt(double);
extern "C" __device__ double log(double);
extern "C" __device__ double cos(double);
extern "C" __device__ float fabsf(float);
extern "C" __device__ float tanhf(float);
extern "C" __device__ float erff(float);
extern "C" __device__ float sinf(float);
extern "C" __device__ float cosf(float);
extern "C" __device__ float log1pf(float);
extern "C" __device__ float expm1f(float);
extern "C" __device__ float powf(float, float);
extern "C" __device__ float fmaxf(float, float);
__device__ inline int min(int a, int b) { return a < b ? a : b; }
__device__ inline unsigned __float_as_uint(float f) { return __builtin_bit_cast(unsigned, f); }
__device__ inline float __uint_as_float(unsigned u) { return __builtin_bit_cast(float, u); }
__device__ inline float __int_as_float(int u) { return __builtin_bit_cast(float, u); }
__device__ inline float __shfl_xor_sync(unsigned mask, float v, int lane) {
    return __nvvm_shfl_sync_bfly_f32(mask, v, lane, 0x1f);
}
__device__ inline double __shfl_xor_sync(unsigned mask, double v, int lane) {
    long long x = __builtin_bit_cast(long long, v);
    int lo = __nvvm_shfl_sync_bfly_i32(mask, (int)x, lane, 0x1f);
    int hi = __nvvm_shfl_sync_bfly_i32(mask, (int)(x >> 32), lane, 0x1f);
    return __builtin_bit_cast(double, ((long long)hi << 32) | (unsigned)lo);
}
__device__ inline float atomicAdd(float* p, float v) { return __nvvm_atom_add_gen_f(p, v); }
