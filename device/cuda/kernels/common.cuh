// common.cuh: helpers shared by every kernel file. The Go side prepends this
// file to the kernels, so the .cu files do not #include it (NVRTC has no
// include path and no system headers: everything here is self-contained).

typedef long long i64;
typedef unsigned short bf16;

#define H_NEG_INF __int_as_float(0xff800000)

// bf16 <-> float, round to nearest even; NaN stays NaN.
__device__ __forceinline__ float bf2f(bf16 x) { return __uint_as_float(((unsigned)x) << 16); }
__device__ __forceinline__ bf16 f2bf(float f) {
    unsigned u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (bf16)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (bf16)(u >> 16);
}

__device__ __forceinline__ float ld(const float* p, i64 i) { return p[i]; }
__device__ __forceinline__ float ld(const bf16* p, i64 i) { return bf2f(p[i]); }
__device__ __forceinline__ void st(float* p, i64 i, float v) { p[i] = v; }
__device__ __forceinline__ void st(bf16* p, i64 i, float v) { p[i] = f2bf(v); }

// Grid-stride loop over [0, n).
#define H_FOR(i, n) for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (i64)blockDim.x * gridDim.x)

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ double warp_sum(double v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// block_sum returns the sum of v over the block to every thread. sh holds
// at least 32 elements. blockDim.x must be a multiple of 32.
template <typename T>
__device__ T block_sum(T v, T* sh) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    v = warp_sum(v);
    if (lane == 0) sh[warp] = v;
    __syncthreads();
    if (warp == 0) {
        T r = lane < nwarps ? sh[lane] : (T)0;
        r = warp_sum(r);
        if (lane == 0) sh[0] = r;
    }
    __syncthreads();
    T r = sh[0];
    __syncthreads();
    return r;
}

// block_max returns the maximum of v over the block to every thread.
__device__ float block_max(float v, float* sh) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    v = warp_max(v);
    if (lane == 0) sh[warp] = v;
    __syncthreads();
    if (warp == 0) {
        float r = lane < nwarps ? sh[lane] : H_NEG_INF;
        r = warp_max(r);
        if (lane == 0) sh[0] = r;
    }
    __syncthreads();
    float r = sh[0];
    __syncthreads();
    return r;
}

// mma_bf16 is D = A B + C for one warp, m16n8k16 with bf16 A (row major)
// and B (column major) and f32 C, D: mma.sync.aligned.m16n8k16.row.col.f32
// .bf16.bf16.f32, in the fragment layout of the PTX ISA (g = lane >> 2,
// q = lane % 4; a0 (g, 2q..2q+1), a1 (g+8, 2q..), a2 (g, 2q+8..),
// a3 (g+8, 2q+8..); b0 (k 2q..2q+1, n g), b1 (k 2q+8.., n g); c0, c1
// (g, 2q..2q+1), c2, c3 (g+8, 2q..)). Each register packs two bf16, the
// lower index in the lower half. Every lane of the warp must call it.
__device__ __forceinline__ void mma_bf16(float* d, const unsigned* a, const unsigned* b) {
#ifdef EMU_RUNTIME
    emu_mma_m16n8k16_bf16(d, a, b, d);
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
    __trap();  // bf16 mma needs sm_80; the host never launches it below (attentionTC)
#else
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

// pack_bf16 packs two bf16 into one mma register, lo in the lower half.
__device__ __forceinline__ unsigned pack_bf16(bf16 lo, bf16 hi) { return (unsigned)lo | ((unsigned)hi << 16); }
