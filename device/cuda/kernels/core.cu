// core.cu: the core ops of device.Core: strided copy, unary and binary
// maps, where, reductions over one axis, gather and scatter-add along an
// axis, and the Philox4x32-10 random fills. float32 arithmetic; sums in
// double.

// Geo mirrors the Go side's geo words (a simplified device.Plan): rank
// axes of sizes n, and for each operand k an element offset and strides.
struct Geo {
    i64 rank, total;
    i64 n[6];
    i64 off[4];
    i64 st[4][6];
};

// geo_at writes the element offsets of the first K operands at linear
// (row-major) index i of the geometry.
template <int K>
__device__ __forceinline__ void geo_at(const Geo& g, i64 i, i64* o) {
    for (int k = 0; k < K; k++) o[k] = g.off[k];
    for (int d = (int)g.rank - 1; d >= 0; d--) {
        i64 c = i, n = g.n[d];
        if (d > 0) {
            c = i % n;
            i /= n;
        }
        for (int k = 0; k < K; k++) o[k] += c * g.st[k][d];
    }
}

// CopyStrided by element size: raw words, so every dtype shares a kernel.
template <typename W>
__device__ void copy_nd_impl(const Geo& g, W* dst, const W* src) {
    H_FOR(i, g.total) {
        i64 o[2];
        geo_at<2>(g, i, o);
        dst[o[0]] = src[o[1]];
    }
}
extern "C" __global__ void h_copy_nd_u16(Geo g, unsigned short* dst, const unsigned short* src) { copy_nd_impl(g, dst, src); }
extern "C" __global__ void h_copy_nd_u32(Geo g, unsigned* dst, const unsigned* src) { copy_nd_impl(g, dst, src); }
extern "C" __global__ void h_copy_nd_u64(Geo g, unsigned long long* dst, const unsigned long long* src) { copy_nd_impl(g, dst, src); }

// op: device.UnaryOp (1 neg ... 18 softplus).
__device__ __forceinline__ float unary_op(int op, float x) {
    switch (op) {
        case 1: return -x;
        case 2: return fabsf(x);
        case 3: return expf(x);
        case 4: return logf(x);
        case 5: return sqrtf(x);
        case 6: return 1.0f / sqrtf(x);
        case 7: return 1.0f / x;
        case 8: return tanhf(x);
        case 9: return erff(x);
        case 10: return 1.0f / (1.0f + expf(-x));
        case 11: return x > 0.0f ? x : (x != x ? x : 0.0f);
        case 12: return sinf(x);
        case 13: return cosf(x);
        case 14: return x * x;
        case 15: return x > 0.0f ? 1.0f : (x < 0.0f ? -1.0f : x);
        case 16: return log1pf(x);
        case 17: return expm1f(x);
        case 18: return fmaxf(x, 0.0f) + log1pf(expf(-fabsf(x)));
    }
    return x;
}
extern "C" __global__ void h_unary_f32(float* dst, const float* src, i64 n, int op) {
    H_FOR(i, n) dst[i] = unary_op(op, src[i]);
}

// maximum and minimum: NaN if either is NaN; of -0 and +0, +0 is the
// larger (bitwise and of the two keeps the sign only if both have it).
__device__ __forceinline__ float h_maximum(float x, float y) {
    if (x != x || y != y) return x + y;
    if (x == y) return __uint_as_float(__float_as_uint(x) & __float_as_uint(y));
    return x > y ? x : y;
}
__device__ __forceinline__ float h_minimum(float x, float y) {
    if (x != x || y != y) return x + y;
    if (x == y) return __uint_as_float(__float_as_uint(x) | __float_as_uint(y));
    return x < y ? x : y;
}

// op: device.BinaryOp (1 add, 2 sub, 3 mul, 4 div, 5 maximum, 6 minimum,
// 7 pow, 8 eq, 9 ne, 10 lt, 11 le, 12 gt, 13 ge).
__device__ __forceinline__ float binary_op(int op, float x, float y) {
    switch (op) {
        case 1: return x + y;
        case 2: return x - y;
        case 3: return x * y;
        case 4: return x / y;
        case 5: return h_maximum(x, y);
        case 6: return h_minimum(x, y);
        case 7: return powf(x, y);
        case 8: return x == y ? 1.0f : 0.0f;
        case 9: return x != y ? 1.0f : 0.0f;
        case 10: return x < y ? 1.0f : 0.0f;
        case 11: return x <= y ? 1.0f : 0.0f;
        case 12: return x > y ? 1.0f : 0.0f;
        case 13: return x >= y ? 1.0f : 0.0f;
    }
    return x;
}
extern "C" __global__ void h_binary_nd_f32(Geo g, float* dst, const float* a, const float* b, int op) {
    H_FOR(i, g.total) {
        i64 o[3];
        geo_at<3>(g, i, o);
        dst[o[0]] = binary_op(op, a[o[1]], b[o[2]]);
    }
}

extern "C" __global__ void h_where_nd_f32(Geo g, float* dst, const float* c, const float* a, const float* b) {
    H_FOR(i, g.total) {
        i64 o[4];
        geo_at<4>(g, i, o);
        dst[o[0]] = c[o[1]] != 0.0f ? a[o[2]] : b[o[3]];
    }
}

// Reductions. op: device.ReduceOp (1 sum, 2 sum of squares, 3 max, 4 min,
// 5 argmax, 6 argmin). Values are carried in double (exact for float32
// inputs); arg reductions carry the index, -1 for none.

// red_better reports whether candidate (v, i) beats (b, bi) for op; the
// order of the candidates does not matter: NaN beats numbers for both arg
// ops, and ties go to the smaller index, so a tree of combines gives the
// first best element.
__device__ __forceinline__ bool red_better(int op, double v, int i, double b, int bi) {
    if (i < 0) return false;
    if (bi < 0) return true;
    bool vn = v != v, bn = b != b;
    if (vn || bn) return vn && (!bn || i < bi);
    if (v == b) return i < bi;
    return op == 5 ? v > b : v < b;
}

__device__ __forceinline__ double red_identity(int op) {
    if (op == 3) return (double)H_NEG_INF;
    if (op == 4) return -(double)H_NEG_INF;
    return 0.0;
}

// d_maximum and d_minimum are h_maximum and h_minimum in double (the sign
// of a zero read through 1/x: no bit casts of doubles in the emulator).
__device__ __forceinline__ double d_maximum(double x, double y) {
    if (x != x || y != y) return x + y;
    if (x == y) return x == 0.0 && 1.0 / x < 0.0 ? y : x;
    return x > y ? x : y;
}
__device__ __forceinline__ double d_minimum(double x, double y) {
    if (x != x || y != y) return x + y;
    if (x == y) return x == 0.0 && 1.0 / x > 0.0 ? y : x;
    return x < y ? x : y;
}

__device__ __forceinline__ double red_combine(int op, double acc, double v) {
    switch (op) {
        case 1: return acc + v;
        case 2: return acc + v * v;
        case 3: return d_maximum(acc, v);
        default: return d_minimum(acc, v);
    }
}

// One thread per output element (outer x inner), walking n with stride
// inner: coalesced across the threads of a row when inner is large.
extern "C" __global__ void h_reduce_axis_f32(float* dst, int* dsti, const float* src, i64 outer, i64 n, i64 inner, int op) {
    H_FOR(t, outer * inner) {
        i64 o = t / inner, c = t % inner;
        const float* x = src + o * n * inner + c;
        if (op >= 5) {
            double b = 0.0;
            int bi = -1;
            for (i64 j = 0; j < n; j++) {
                double v = x[j * inner];
                if (red_better(op, v, (int)j, b, bi)) {
                    b = v;
                    bi = (int)j;
                }
            }
            dsti[t] = bi;
        } else {
            double acc = red_identity(op);
            for (i64 j = 0; j < n; j++) acc = red_combine(op, acc, (double)x[j * inner]);
            dst[t] = (float)acc;
        }
    }
}

// One block of 256 threads per row of a contiguous [outer, n] array (inner
// == 1), combined in a shared-memory tree.
extern "C" __global__ void h_reduce_rows_nd_f32(float* dst, int* dsti, const float* src, i64 outer, i64 n, int op) {
    __shared__ double shv[256];
    __shared__ int shi[256];
    const float* x = src + (i64)blockIdx.x * n;
    int tid = threadIdx.x;
    double acc = red_identity(op);
    int ai = -1;
    for (i64 j = tid; j < n; j += blockDim.x) {
        double v = x[j];
        if (op >= 5) {
            if (red_better(op, v, (int)j, acc, ai)) {
                acc = v;
                ai = (int)j;
            }
        } else {
            acc = red_combine(op, acc, v);
        }
    }
    shv[tid] = acc;
    shi[tid] = ai;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) {
            double v = shv[tid + s];
            int vi = shi[tid + s];
            if (op >= 5) {
                if (red_better(op, v, vi, shv[tid], shi[tid])) {
                    shv[tid] = v;
                    shi[tid] = vi;
                }
            } else if (op == 2) {
                shv[tid] += v;  // already squared
            } else {
                shv[tid] = red_combine(op, shv[tid], v);
            }
        }
        __syncthreads();
    }
    if (tid == 0) {
        if (op >= 5) dsti[blockIdx.x] = shi[0];
        else dst[blockIdx.x] = (float)shv[0];
    }
}

// GatherAxis: one thread per dst element of [outer, m, inner]; the index
// is read at ioff + o*is0 + j*is1 + i*is2. Raw words (float32 or int32).
extern "C" __global__ void h_gather_axis_u32(unsigned* dst, const unsigned* src, const int* idx, i64 outer, i64 n, i64 inner,
                                             i64 m, i64 ioff, i64 is0, i64 is1, i64 is2) {
    H_FOR(t, outer * m * inner) {
        i64 c = t % inner, r = t / inner;
        i64 j = r % m, o = r / m;
        i64 k = idx[ioff + o * is0 + j * is1 + c * is2];
        dst[t] = src[(o * n + k) * inner + c];
    }
}

// ScatterAddAxis: one thread per src element, atomic adds.
extern "C" __global__ void h_scatter_add_axis_f32(float* dst, const float* src, const int* idx, i64 outer, i64 n, i64 inner,
                                                  i64 m, i64 ioff, i64 is0, i64 is1, i64 is2) {
    H_FOR(t, outer * m * inner) {
        i64 c = t % inner, r = t / inner;
        i64 j = r % m, o = r / m;
        i64 k = idx[ioff + o * is0 + j * is1 + c * is2];
        atomicAdd(dst + (o * n + k) * inner + c, src[t]);
    }
}

// Philox4x32-10 (Random123), as device.Philox4x32.
__device__ __forceinline__ void philox(unsigned c[4], unsigned k0, unsigned k1) {
    for (int r = 0; r < 10; r++) {
        if (r > 0) {
            k0 += 0x9E3779B9u;
            k1 += 0xBB67AE85u;
        }
        unsigned long long p0 = (unsigned long long)0xD2511F53u * c[0];
        unsigned long long p1 = (unsigned long long)0xCD9E8D57u * c[2];
        unsigned n0 = (unsigned)(p1 >> 32) ^ c[1] ^ k0, n2 = (unsigned)(p0 >> 32) ^ c[3] ^ k1;
        c[0] = n0;
        c[1] = (unsigned)p1;
        c[2] = n2;
        c[3] = (unsigned)p0;
    }
}

__device__ __forceinline__ float uniform24(unsigned w) { return (float)(w >> 8) * (1.0f / 16777216.0f); }

// dist: device.Distribution (1 uniform [a, b), 2 normal mean a std b,
// 3 bernoulli p = a). Element i is element offset + i of the stream.
extern "C" __global__ void h_random_f32(float* dst, i64 n, unsigned long long seed, unsigned long long offset, int dist, float a,
                                        float b) {
    unsigned k0 = (unsigned)seed, k1 = (unsigned)(seed >> 32);
    H_FOR(i, n) {
        unsigned long long e = offset + (unsigned long long)i;
        unsigned long long blk = dist == 2 ? e / 2 : e / 4;
        unsigned c[4] = {(unsigned)blk, (unsigned)(blk >> 32), 0u, 0u};
        philox(c, k0, k1);
        if (dist == 2) {
            int j = 2 * (int)(e % 2);
            double u1 = (double)uniform24(c[j]) + 1.0 / 16777216.0;
            double u2 = (double)uniform24(c[j + 1]);
            double z = sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
            dst[i] = (float)((double)a + (double)b * z);
        } else {
            float u = uniform24(c[e % 4]);
            if (dist == 3) {
                dst[i] = u < a ? 1.0f : 0.0f;
            } else {
                float d = b - a;
                dst[i] = (float)((double)a + (double)d * (double)u);
            }
        }
    }
}
