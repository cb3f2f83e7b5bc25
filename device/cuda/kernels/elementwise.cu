// elementwise.cu: Fill, Axpby, Transpose, Cast and zeroing.
// Templated on the storage type (float or bf16); arithmetic is in float.

template <typename T>
__device__ void fill_impl(T* dst, i64 n, float v) { H_FOR(i, n) st(dst, i, v); }
extern "C" __global__ void h_fill_f32(float* dst, i64 n, float v) { fill_impl(dst, n, v); }
extern "C" __global__ void h_fill_bf16(bf16* dst, i64 n, float v) { fill_impl(dst, n, v); }

extern "C" __global__ void h_zero_u32(unsigned* dst, i64 n) { H_FOR(i, n) dst[i] = 0u; }
extern "C" __global__ void h_zero_u16(unsigned short* dst, i64 n) { H_FOR(i, n) dst[i] = 0; }

template <typename T>
__device__ void axpby_impl(T* dst, const T* x, i64 n, float alpha, float beta) {
    if (beta == 0.0f) {  // dst = alpha x: dst is not read
        H_FOR(i, n) st(dst, i, alpha * ld(x, i));
        return;
    }
    H_FOR(i, n) st(dst, i, alpha * ld(x, i) + beta * ld(dst, i));
}
extern "C" __global__ void h_axpby_f32(float* dst, const float* x, i64 n, float alpha, float beta) { axpby_impl(dst, x, n, alpha, beta); }
extern "C" __global__ void h_axpby_bf16(bf16* dst, const bf16* x, i64 n, float alpha, float beta) { axpby_impl(dst, x, n, alpha, beta); }

// Transpose swaps the middle axes of [batch, rows, cols, inner]:
// dst[b, c, r, i] = src[b, r, c, i]. One thread per destination element,
// moved as raw 4- or 2-byte words so every dtype shares the kernel.
template <typename W>
__device__ void transpose_impl(W* dst, const W* src, i64 batch, i64 rows, i64 cols, i64 inner) {
    H_FOR(i, batch * rows * cols * inner) {
        i64 e = i % inner, t = i / inner;
        i64 r = t % rows;
        t /= rows;
        i64 c = t % cols, b = t / cols;
        dst[i] = src[((b * rows + r) * cols + c) * inner + e];
    }
}
extern "C" __global__ void h_transpose_u32(unsigned* dst, const unsigned* src, i64 batch, i64 rows, i64 cols, i64 inner) {
    transpose_impl(dst, src, batch, rows, cols, inner);
}
extern "C" __global__ void h_transpose_u16(unsigned short* dst, const unsigned short* src, i64 batch, i64 rows, i64 cols, i64 inner) {
    transpose_impl(dst, src, batch, rows, cols, inner);
}

// Cast between float32 and bfloat16 (round to nearest even, NaN kept).
template <typename D, typename S>
__device__ void cast_impl(D* dst, const S* src, i64 n) { H_FOR(i, n) st(dst, i, ld(src, i)); }
extern "C" __global__ void h_cast_bf16_from_f32(bf16* dst, const float* src, i64 n) { cast_impl(dst, src, n); }
extern "C" __global__ void h_cast_f32_from_bf16(float* dst, const bf16* src, i64 n) { cast_impl(dst, src, n); }

// Casts to and from int32. f2i_rz is __float2int_rz, written out so the
// emulator and the offline clang compile need no intrinsic: rounded toward
// zero, saturated at the int32 limits (infinities included), NaN to 0.
__device__ __forceinline__ int f2i_rz(float f) {
    if (!(f == f)) return 0;
    if (f >= 2147483648.0f) return 2147483647;
    if (f <= -2147483648.0f) return -2147483647 - 1;
    return (int)f;
}
// i2bf rounds v to the nearest bfloat16, ties to even, in one rounding (a
// detour through float32 could round a tie twice): the magnitude is rounded
// to 8 significant bits in integer arithmetic, which float32 then holds
// exactly.
__device__ __forceinline__ bf16 i2bf(int v) {
    unsigned a = v < 0 ? 0u - (unsigned)v : (unsigned)v;
    int sh = 0;
    for (unsigned t = a >> 8; t != 0; t >>= 1) sh++;
    if (sh > 0) {
        unsigned keep = a >> sh, rem = a & ((1u << sh) - 1u), half = 1u << (sh - 1);
        if (rem > half || (rem == half && (keep & 1u))) keep++;
        a = keep << sh;  // at most 2^31
    }
    float f = (float)a;
    return f2bf(v < 0 ? -f : f);
}
extern "C" __global__ void h_cast_i32_from_f32(int* dst, const float* src, i64 n) { H_FOR(i, n) dst[i] = f2i_rz(src[i]); }
extern "C" __global__ void h_cast_i32_from_bf16(int* dst, const bf16* src, i64 n) { H_FOR(i, n) dst[i] = f2i_rz(bf2f(src[i])); }
// int -> float conversion in CUDA C rounds to nearest even (__int2float_rn).
extern "C" __global__ void h_cast_f32_from_i32(float* dst, const int* src, i64 n) { H_FOR(i, n) dst[i] = (float)src[i]; }
extern "C" __global__ void h_cast_bf16_from_i32(bf16* dst, const int* src, i64 n) { H_FOR(i, n) dst[i] = i2bf(src[i]); }
