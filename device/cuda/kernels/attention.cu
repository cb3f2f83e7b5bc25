// attention.cu: causal flash attention on [B, T, H, D] tensors. No T x T
// matrix is formed: the forward keeps an online softmax per query (one
// thread per query, key/value tiles in shared memory) and saves the
// log-sum-exp; the backward recomputes probabilities from it, one kernel
// accumulating dq per query and one accumulating dk, dv per key.
// Instantiated for head dims 16 to 128 in steps of 16, except 112.

#define ATT_BQ 64  // queries (threads) per forward / dq block
#define ATT_BK 32  // keys per shared tile

// head_base is the offset of head h of batch b (bh = b H + h) in a
// [B, T, H, D] tensor.
__device__ __forceinline__ i64 head_base(int bh, int T, int H, int D) {
    return (i64)(bh / H) * T * H * D + (i64)(bh % H) * D;
}

// load_rows copies rows r0 .. r0+n-1 of two head slices (row stride rs from
// base) into shared tiles, the first scaled by sa, zeros past row T. The
// block's threads share the work.
template <int D, int LD>
__device__ void load_rows(float (*A)[LD], float (*B)[LD], const float* a, const float* b, float sa,
                          i64 base, i64 rs, int r0, int n, int T) {
    for (int e = threadIdx.x; e < n * D; e += blockDim.x) {
        int r = e / D, c = e % D, rr = r0 + r;
        A[r][c] = rr < T ? a[base + rr * rs + c] * sa : 0.0f;
        B[r][c] = rr < T ? b[base + rr * rs + c] : 0.0f;
    }
}

template <int D>
__device__ void attn_fwd(float* out, float* lse, const float* q, const float* k, const float* v,
                         int T, int H, float scale) {
    __shared__ float Ks[ATT_BK][D];
    __shared__ float Vs[ATT_BK][D];
    int bh = blockIdx.y;  // b * H + h
    int q0 = blockIdx.x * ATT_BQ, i = q0 + threadIdx.x;
    i64 rs = (i64)H * D, base = head_base(bh, T, H, D);
    float qr[D], o[D];
#pragma unroll
    for (int d = 0; d < D; d++) {
        qr[d] = i < T ? q[base + i * rs + d] * scale : 0.0f;
        o[d] = 0.0f;
    }
    float m = H_NEG_INF, l = 0.0f;
    int kend = min(T, q0 + ATT_BQ);
    for (int k0 = 0; k0 < kend; k0 += ATT_BK) {
        __syncthreads();
        load_rows<D, D>(Ks, Vs, k, v, 1.0f, base, rs, k0, ATT_BK, T);
        __syncthreads();
        if (i >= T || k0 > i) continue;
        float s[ATT_BK];
        float mt = m;
#pragma unroll
        for (int j = 0; j < ATT_BK; j++) {
            float acc = 0.0f;
#pragma unroll
            for (int d = 0; d < D; d++) acc += qr[d] * Ks[j][d];
            s[j] = k0 + j <= i ? acc : H_NEG_INF;
            mt = fmaxf(mt, s[j]);
        }
        float corr = expf(m - mt);
        l *= corr;
#pragma unroll
        for (int d = 0; d < D; d++) o[d] *= corr;
#pragma unroll
        for (int j = 0; j < ATT_BK; j++) {
            float p = expf(s[j] - mt);
            l += p;
#pragma unroll
            for (int d = 0; d < D; d++) o[d] += p * Vs[j][d];
        }
        m = mt;
    }
    if (i < T) {
        float inv = 1.0f / l;
#pragma unroll
        for (int d = 0; d < D; d++) out[base + i * rs + d] = o[d] * inv;
        lse[(i64)bh * T + i] = m + logf(l);
    }
}

// dq_i = scale * sum_j p_ij (dO_i.v_j - delta_i) k_j, delta_i = dO_i.O_i.
template <int D>
__device__ void attn_bwd_dq(float* dq, const float* dout, const float* q, const float* k, const float* v,
                            const float* out, const float* lse, int T, int H, float scale) {
    __shared__ float Ks[ATT_BK][D];
    __shared__ float Vs[ATT_BK][D];
    int bh = blockIdx.y;  // b * H + h
    int q0 = blockIdx.x * ATT_BQ, i = q0 + threadIdx.x;
    i64 rs = (i64)H * D, base = head_base(bh, T, H, D);
    float qr[D], g[D], acc[D];
    float delta = 0.0f, L = 0.0f;
#pragma unroll
    for (int d = 0; d < D; d++) {
        qr[d] = i < T ? q[base + i * rs + d] * scale : 0.0f;
        g[d] = i < T ? dout[base + i * rs + d] : 0.0f;
        delta += i < T ? g[d] * out[base + i * rs + d] : 0.0f;
        acc[d] = 0.0f;
    }
    if (i < T) L = lse[(i64)bh * T + i];
    int kend = min(T, q0 + ATT_BQ);
    for (int k0 = 0; k0 < kend; k0 += ATT_BK) {
        __syncthreads();
        load_rows<D, D>(Ks, Vs, k, v, 1.0f, base, rs, k0, ATT_BK, T);
        __syncthreads();
        if (i >= T || k0 > i) continue;
        for (int j = 0; j < ATT_BK; j++) {
            if (k0 + j > i) break;
            float sc = 0.0f, dp = 0.0f;
#pragma unroll
            for (int d = 0; d < D; d++) {
                sc += qr[d] * Ks[j][d];
                dp += g[d] * Vs[j][d];
            }
            float ds = expf(sc - L) * (dp - delta);
#pragma unroll
            for (int d = 0; d < D; d++) acc[d] += ds * Ks[j][d];
        }
    }
    if (i < T) {
#pragma unroll
        for (int d = 0; d < D; d++) dq[base + i * rs + d] = acc[d] * scale;
    }
}

// One thread per key j (ATT_BK per block): dv_j = sum_i p_ij dO_i,
// dk_j = scale * sum_i p_ij (dO_i.v_j - delta_i) q_i, over queries i >= j.
template <int D, int BQT>
__device__ void attn_bwd_dkdv(float* dk, float* dv, const float* dout, const float* q, const float* k, const float* v,
                              const float* out, const float* lse, int T, int H, float scale) {
    __shared__ float Ks[ATT_BK][D + 1];
    __shared__ float Vs[ATT_BK][D + 1];
    __shared__ float Qs[BQT][D];
    __shared__ float Gs[BQT][D];
    __shared__ float Ls[BQT], Ds[BQT];
    int bh = blockIdx.y;  // b * H + h
    int k0 = blockIdx.x * ATT_BK, j = k0 + threadIdx.x;
    i64 rs = (i64)H * D, base = head_base(bh, T, H, D);
    load_rows<D, D + 1>(Ks, Vs, k, v, 1.0f, base, rs, k0, ATT_BK, T);
    float dka[D], dva[D];
#pragma unroll
    for (int d = 0; d < D; d++) dka[d] = dva[d] = 0.0f;
    for (int i0 = (k0 / BQT) * BQT; i0 < T; i0 += BQT) {
        __syncthreads();
        load_rows<D, D>(Qs, Gs, q, dout, scale, base, rs, i0, BQT, T);
        if (threadIdx.x < BQT) {
            int ii = i0 + threadIdx.x;
            float dl = 0.0f;
            if (ii < T) {
                for (int d = 0; d < D; d++) dl += dout[base + ii * rs + d] * out[base + ii * rs + d];
            }
            Ds[threadIdx.x] = dl;
            Ls[threadIdx.x] = ii < T ? lse[(i64)bh * T + ii] : 0.0f;
        }
        __syncthreads();
        if (j >= T) continue;
        for (int r = 0; r < BQT; r++) {
            int ii = i0 + r;
            if (ii < j || ii >= T) continue;
            float sc = 0.0f, dp = 0.0f;
#pragma unroll
            for (int d = 0; d < D; d++) {
                sc += Qs[r][d] * Ks[threadIdx.x][d];
                dp += Gs[r][d] * Vs[threadIdx.x][d];
            }
            float p = expf(sc - Ls[r]);
            float ds = p * (dp - Ds[r]);
#pragma unroll
            for (int d = 0; d < D; d++) {
                dva[d] += p * Gs[r][d];
                dka[d] += ds * Qs[r][d];
            }
        }
    }
    if (j < T) {
#pragma unroll
        for (int d = 0; d < D; d++) {
            dk[base + j * rs + d] = dka[d];  // Qs already carries scale
            dv[base + j * rs + d] = dva[d];
        }
    }
}

#define ATT_INSTANTIATE(D, BQT)                                                                          \
    extern "C" __global__ void __launch_bounds__(ATT_BQ) h_attn_fwd_d##D(                                \
        float* out, float* lse, const float* q, const float* k, const float* v, int T, int H, float scale) { \
        attn_fwd<D>(out, lse, q, k, v, T, H, scale);                                                     \
    }                                                                                                    \
    extern "C" __global__ void __launch_bounds__(ATT_BQ) h_attn_bwd_dq_d##D(                             \
        float* dq, const float* dout, const float* q, const float* k, const float* v, const float* out,  \
        const float* lse, int T, int H, float scale) {                                                   \
        attn_bwd_dq<D>(dq, dout, q, k, v, out, lse, T, H, scale);                                        \
    }                                                                                                    \
    extern "C" __global__ void __launch_bounds__(ATT_BK) h_attn_bwd_dkdv_d##D(                           \
        float* dk, float* dv, const float* dout, const float* q, const float* k, const float* v,         \
        const float* out, const float* lse, int T, int H, float scale) {                                 \
        attn_bwd_dkdv<D, BQT>(dk, dv, dout, q, k, v, out, lse, T, H, scale);                             \
    }

// Keep in step with attentionHeadDims in ops_nn.go.
ATT_INSTANTIATE(16, 16)
ATT_INSTANTIATE(32, 16)
ATT_INSTANTIATE(48, 16)
ATT_INSTANTIATE(64, 16)
ATT_INSTANTIATE(80, 8)
ATT_INSTANTIATE(96, 8)
ATT_INSTANTIATE(128, 8)
