// attention_tc.cu: causal flash attention, forward and backward, on tensor
// cores (mma.sync m16n8k16, bf16 operands, f32 accumulation) for head dims
// 64 and 128, on the same [B, T, H, D] f32 tensors and saved log-sum-exp
// as attention.cu. The host takes these kernels when the caller allows
// bf16 operands (autocast) on sm_80 or newer (attentionTC in
// attention_tc.go); attention.cu's f32 SIMT kernels stay the fallback,
// forward and backward, for other head dims, f32 operands and older GPUs.
//
// Forward:
// A block of four warps takes 64 queries; each warp owns 16 of them and
// keeps their Q fragments in registers. Key and value tiles of 64 rows are
// converted to bf16 in shared memory. Per tile a warp forms S = Q K^T
// (16 x 64, f32), scales and masks it, updates its online softmax (row
// maxima and sums shared by the four lanes of a quad through shuffles),
// rounds P to bf16 and accumulates O += P V. The C fragment of S is the A
// fragment of P for the next product, so P never leaves registers. Tiles
// past the block's last query are never loaded (causal block skipping),
// and inside the diagonal tile a warp skips the 8-key groups past its last
// query (a warp-uniform test: mma.sync needs all 32 lanes).
//
// Backward (FlashAttention-2 style, probabilities recomputed from the
// saved log-sum-exp): one kernel per 64 queries computes
// delta_i = dO_i . O_i for its queries, once per backward, and writes it
// to a [B H, T] buffer, then accumulates dq = scale dS K over key tiles,
// with S = Q K^T, dP = dO V^T, dS = P (dP - delta); one kernel per 16 keys
// a warp, launched after it, reads delta and accumulates dv = P^T dO and
// dk = scale dS^T Q over query tiles at or past its keys. Both round P and
// dS to bf16 as operands.
//
// Exponentials are exp2f of log2-scaled arguments: the scores are scaled
// by scale log2(e) and the saved log-sum-exp by log2(e), so that
// exp(x - m) = exp2(x log2 e - m log2 e) costs one ex2 and no range
// reduction; lse is saved in natural-log units.

#define TC_BQ 64   // queries per block (16 per warp)
#define TC_BK 64   // keys per shared tile
#define TC_PAD 8   // bf16 of padding per shared row, against bank conflicts
#define TC_LOG2E 1.4426950408889634f  // log2(e)
#define TC_LN2 0.6931471805599453f    // ln(2)

// tc_head_base is the offset of head h of batch b (bh = b H + h) in a
// [B, T, H, D] tensor (each kernel file compiles on its own in the clang
// test, so attention.cu's head_base is not visible here).
__device__ __forceinline__ i64 tc_head_base(int bh, int T, int H, int D) {
    return (i64)(bh / H) * T * H * D + (i64)(bh % H) * D;
}

// tc_load converts rows r0 .. r0+R-1 of a head slice to bf16, zeros past
// row T.
template <int D, int R>
__device__ void tc_load(bf16 (*S)[D + TC_PAD], const float* x, i64 base, i64 rs, int r0, int T) {
    for (int e = threadIdx.x; e < R * D; e += blockDim.x) {
        int r = e / D, c = e % D, rr = r0 + r;
        S[r][c] = f2bf(rr < T ? x[base + rr * rs + c] : 0.0f);
    }
}

template <int D>
__device__ void attn_fwd_tc(float* out, float* lse, const float* q, const float* k, const float* v,
                            int T, int H, float scale) {
    __shared__ bf16 Ks[TC_BK][D + TC_PAD];
    __shared__ bf16 Vs[TC_BK][D + TC_PAD];
    int bh = blockIdx.y;  // b * H + h
    // The longest rows first: the last query tile has the most key tiles.
    int q0 = (gridDim.x - 1 - blockIdx.x) * TC_BQ;
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, qd = lane & 3;
    int w0 = q0 + warp * 16;            // the warp's first query
    int rows[2] = {w0 + g, w0 + g + 8};  // this lane's two query rows
    i64 rs = (i64)H * D, base = tc_head_base(bh, T, H, D);

    // Q fragments, staged through Ks.
    tc_load<D, TC_BQ>(Ks, q, base, rs, q0, T);
    __syncthreads();
    unsigned qa[D / 16][4];
#pragma unroll
    for (int kk = 0; kk < D / 16; kk++) {
        int r = warp * 16 + g, c = kk * 16 + 2 * qd;
        qa[kk][0] = pack_bf16(Ks[r][c], Ks[r][c + 1]);
        qa[kk][1] = pack_bf16(Ks[r + 8][c], Ks[r + 8][c + 1]);
        qa[kk][2] = pack_bf16(Ks[r][c + 8], Ks[r][c + 9]);
        qa[kk][3] = pack_bf16(Ks[r + 8][c + 8], Ks[r + 8][c + 9]);
    }
    float o[D / 8][4];
#pragma unroll
    for (int n = 0; n < D / 8; n++) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
    // Scores in log2 units: m, mt, mb and the exponents below are too.
    float scale2 = scale * TC_LOG2E;
    float m[2] = {H_NEG_INF, H_NEG_INF}, l[2] = {0.0f, 0.0f};

    int kend = min(T, q0 + TC_BQ);
    for (int k0 = 0; k0 < kend; k0 += TC_BK) {
        __syncthreads();
        tc_load<D, TC_BK>(Ks, k, base, rs, k0, T);
        tc_load<D, TC_BK>(Vs, v, base, rs, k0, T);
        __syncthreads();
        // S = Q K^T for the 8-key groups this warp can see.
        float s[TC_BK / 8][4];
#pragma unroll
        for (int n = 0; n < TC_BK / 8; n++) {
            s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
            if (k0 + n * 8 > w0 + 15) continue;  // warp-uniform
#pragma unroll
            for (int kk = 0; kk < D / 16; kk++) {
                int key = n * 8 + g, c = kk * 16 + 2 * qd;
                unsigned b[2] = {pack_bf16(Ks[key][c], Ks[key][c + 1]), pack_bf16(Ks[key][c + 8], Ks[key][c + 9])};
                mma_bf16(s[n], qa[kk], b);
            }
        }
        float mt[2] = {m[0], m[1]};
#pragma unroll
        for (int n = 0; n < TC_BK / 8; n++) {
#pragma unroll
            for (int r = 0; r < 4; r++) {
                int j = k0 + n * 8 + 2 * qd + (r & 1);
                float x = j <= rows[r >> 1] ? s[n][r] * scale2 : H_NEG_INF;
                s[n][r] = x;
                mt[r >> 1] = fmaxf(mt[r >> 1], x);
            }
        }
        float mb[2];
#pragma unroll
        for (int h = 0; h < 2; h++) {
            mt[h] = fmaxf(mt[h], __shfl_xor_sync(0xffffffffu, mt[h], 1));
            mt[h] = fmaxf(mt[h], __shfl_xor_sync(0xffffffffu, mt[h], 2));
            mb[h] = mt[h] == H_NEG_INF ? 0.0f : mt[h];  // a row with nothing visible yet
            float corr = exp2f(m[h] - mb[h]);
            l[h] *= corr;
#pragma unroll
            for (int n = 0; n < D / 8; n++) {
                o[n][2 * h] *= corr;
                o[n][2 * h + 1] *= corr;
            }
            m[h] = mt[h];
        }
        // O += P V, 16 keys per step; P is summed as rounded to bf16, so
        // that O is normalized by the weights it was built from.
#pragma unroll
        for (int kk = 0; kk < TC_BK / 16; kk++) {
            if (k0 + kk * 16 > w0 + 15) continue;  // warp-uniform
            bf16 p[8];
#pragma unroll
            for (int e = 0; e < 8; e++) {
                int n = 2 * kk + (e >> 2), r = e & 3;
                p[e] = f2bf(exp2f(s[n][r] - mb[r >> 1]));
                l[r >> 1] += bf2f(p[e]);
            }
            unsigned pa[4] = {pack_bf16(p[0], p[1]), pack_bf16(p[2], p[3]), pack_bf16(p[4], p[5]), pack_bf16(p[6], p[7])};
            int key = kk * 16 + 2 * qd;
#pragma unroll
            for (int n = 0; n < D / 8; n++) {
                int c = n * 8 + g;
                unsigned b[2] = {pack_bf16(Vs[key][c], Vs[key + 1][c]), pack_bf16(Vs[key + 8][c], Vs[key + 9][c])};
                mma_bf16(o[n], pa, b);
            }
        }
    }
#pragma unroll
    for (int h = 0; h < 2; h++) {
        l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
        l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
        int i = rows[h];
        if (i >= T) continue;
        float inv = 1.0f / l[h];
#pragma unroll
        for (int n = 0; n < D / 8; n++) {
            int c = n * 8 + 2 * qd;
            out[base + i * rs + c] = o[n][2 * h] * inv;
            out[base + i * rs + c + 1] = o[n][2 * h + 1] * inv;
        }
        if (qd == 0) lse[(i64)bh * T + i] = m[h] * TC_LN2 + logf(l[h]);
    }
}

// afrag loads the A fragment (16 rows from r, columns c .. c+15) of a
// row-major bf16 tile.
template <int LD>
__device__ __forceinline__ void afrag(unsigned* a, const bf16 (*S)[LD], int r, int c) {
    int g = (threadIdx.x & 31) >> 2, qd = threadIdx.x & 3;
    r += g;
    c += 2 * qd;
    a[0] = pack_bf16(S[r][c], S[r][c + 1]);
    a[1] = pack_bf16(S[r + 8][c], S[r + 8][c + 1]);
    a[2] = pack_bf16(S[r][c + 8], S[r][c + 9]);
    a[3] = pack_bf16(S[r + 8][c + 8], S[r + 8][c + 9]);
}

// bfrag_rows loads the B fragment (k = columns c .. c+15, n = rows r .. r+7)
// of a row-major tile read as its transpose: B[k][n] = S[r + n][c + k].
template <int LD>
__device__ __forceinline__ void bfrag_rows(unsigned* b, const bf16 (*S)[LD], int r, int c) {
    int g = (threadIdx.x & 31) >> 2, qd = threadIdx.x & 3;
    r += g;
    c += 2 * qd;
    b[0] = pack_bf16(S[r][c], S[r][c + 1]);
    b[1] = pack_bf16(S[r][c + 8], S[r][c + 9]);
}

// bfrag_cols loads the B fragment (k = rows r .. r+15, n = columns
// c .. c+7) of a row-major tile: B[k][n] = S[r + k][c + n].
template <int LD>
__device__ __forceinline__ void bfrag_cols(unsigned* b, const bf16 (*S)[LD], int r, int c) {
    int g = (threadIdx.x & 31) >> 2, qd = threadIdx.x & 3;
    r += 2 * qd;
    c += g;
    b[0] = pack_bf16(S[r][c], S[r + 1][c]);
    b[1] = pack_bf16(S[r + 8][c], S[r + 9][c]);
}

// cfrag_to_a turns two C tiles (16 x 8 each, columns 8 kk .. 8 kk + 15 of
// a 16-row product) into the bf16 A fragment of the next product.
__device__ __forceinline__ void cfrag_to_a(unsigned* a, const float* c0, const float* c1) {
    a[0] = pack_bf16(f2bf(c0[0]), f2bf(c0[1]));
    a[1] = pack_bf16(f2bf(c0[2]), f2bf(c0[3]));
    a[2] = pack_bf16(f2bf(c1[0]), f2bf(c1[1]));
    a[3] = pack_bf16(f2bf(c1[2]), f2bf(c1[3]));
}

// tc_delta fills Ds[r] = delta_i = dO_i . O_i, also stored to
// delta[bh T + i], and Ls[r] = lse_i log2(e) for the R rows from i0 (zeros
// past T), one thread per row.
template <int D, int R>
__device__ void tc_delta(float* Ds, float* Ls, float* delta, const float* dout, const float* out,
                         const float* lse, i64 base, i64 rs, int bh, int i0, int T) {
    for (int r = threadIdx.x; r < R; r += blockDim.x) {
        int i = i0 + r;
        float dl = 0.0f;
        if (i < T) {
            for (int d = 0; d < D; d++) dl += dout[base + i * rs + d] * out[base + i * rs + d];
            delta[(i64)bh * T + i] = dl;
        }
        Ds[r] = dl;
        Ls[r] = i < T ? lse[(i64)bh * T + i] * TC_LOG2E : 0.0f;
    }
}

// tc_rows fills Ds[r] = delta_i and Ls[r] = lse_i log2(e) from the saved
// buffers for the R rows from i0 (zeros past T).
template <int R>
__device__ void tc_rows(float* Ds, float* Ls, const float* delta, const float* lse, int bh, int i0, int T) {
    for (int r = threadIdx.x; r < R; r += blockDim.x) {
        int i = i0 + r;
        Ds[r] = i < T ? delta[(i64)bh * T + i] : 0.0f;
        Ls[r] = i < T ? lse[(i64)bh * T + i] * TC_LOG2E : 0.0f;
    }
}

#define TC_BK_DQ 32  // keys per tile of the dq kernel
#define TC_BQ_KV 32  // queries per tile of the dk, dv kernel

template <int D>
__device__ void attn_bwd_dq_tc(float* dq, float* delta, const float* dout, const float* q, const float* k,
                               const float* v, const float* out, const float* lse, int T, int H, float scale) {
    __shared__ bf16 Ks[TC_BK_DQ][D + TC_PAD];
    __shared__ bf16 Vs[TC_BK_DQ][D + TC_PAD];
    __shared__ bf16 Qs[TC_BQ][D + TC_PAD];  // Q, then dO
    __shared__ float Ls[TC_BQ], Ds[TC_BQ];
    int bh = blockIdx.y;
    int q0 = (gridDim.x - 1 - blockIdx.x) * TC_BQ;
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, qd = lane & 3;
    int w0 = q0 + warp * 16;
    int rows[2] = {w0 + g, w0 + g + 8};
    i64 rs = (i64)H * D, base = tc_head_base(bh, T, H, D);
    tc_delta<D, TC_BQ>(Ds, Ls, delta, dout, out, lse, base, rs, bh, q0, T);
    tc_load<D, TC_BQ>(Qs, q, base, rs, q0, T);
    __syncthreads();
    unsigned qa[D / 16][4], ga[D / 16][4];
#pragma unroll
    for (int kk = 0; kk < D / 16; kk++) afrag<D + TC_PAD>(qa[kk], Qs, warp * 16, kk * 16);
    float Lr[2] = {Ls[warp * 16 + g], Ls[warp * 16 + g + 8]}, Dr[2] = {Ds[warp * 16 + g], Ds[warp * 16 + g + 8]};
    float scale2 = scale * TC_LOG2E;
    __syncthreads();
    tc_load<D, TC_BQ>(Qs, dout, base, rs, q0, T);
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < D / 16; kk++) afrag<D + TC_PAD>(ga[kk], Qs, warp * 16, kk * 16);
    float acc[D / 8][4];
#pragma unroll
    for (int n = 0; n < D / 8; n++) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
    int kend = min(T, q0 + TC_BQ);
    for (int k0 = 0; k0 < kend; k0 += TC_BK_DQ) {
        __syncthreads();
        tc_load<D, TC_BK_DQ>(Ks, k, base, rs, k0, T);
        tc_load<D, TC_BK_DQ>(Vs, v, base, rs, k0, T);
        __syncthreads();
        float s[TC_BK_DQ / 8][4], dp[TC_BK_DQ / 8][4];
#pragma unroll
        for (int n = 0; n < TC_BK_DQ / 8; n++) {
            s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
            dp[n][0] = dp[n][1] = dp[n][2] = dp[n][3] = 0.0f;
            if (k0 + n * 8 > w0 + 15) continue;  // warp-uniform
#pragma unroll
            for (int kk = 0; kk < D / 16; kk++) {
                unsigned b[2];
                bfrag_rows<D + TC_PAD>(b, Ks, n * 8, kk * 16);
                mma_bf16(s[n], qa[kk], b);
                bfrag_rows<D + TC_PAD>(b, Vs, n * 8, kk * 16);
                mma_bf16(dp[n], ga[kk], b);
            }
        }
#pragma unroll
        for (int n = 0; n < TC_BK_DQ / 8; n++) {
#pragma unroll
            for (int r = 0; r < 4; r++) {
                int j = k0 + n * 8 + 2 * qd + (r & 1), h = r >> 1;
                float p = j <= rows[h] ? exp2f(s[n][r] * scale2 - Lr[h]) : 0.0f;
                s[n][r] = p * (dp[n][r] - Dr[h]);  // dS
            }
        }
#pragma unroll
        for (int kk = 0; kk < TC_BK_DQ / 16; kk++) {
            if (k0 + kk * 16 > w0 + 15) continue;  // warp-uniform
            unsigned a[4];
            cfrag_to_a(a, s[2 * kk], s[2 * kk + 1]);
#pragma unroll
            for (int n = 0; n < D / 8; n++) {
                unsigned b[2];
                bfrag_cols<D + TC_PAD>(b, Ks, kk * 16, n * 8);
                mma_bf16(acc[n], a, b);
            }
        }
    }
#pragma unroll
    for (int h = 0; h < 2; h++) {
        int i = rows[h];
        if (i >= T) continue;
#pragma unroll
        for (int n = 0; n < D / 8; n++) {
            int c = n * 8 + 2 * qd;
            dq[base + i * rs + c] = acc[n][2 * h] * scale;
            dq[base + i * rs + c + 1] = acc[n][2 * h + 1] * scale;
        }
    }
}

// NW warps, 16 keys each, per block.
template <int D, int NW>
__device__ void attn_bwd_dkdv_tc(float* dk, float* dv, const float* dout, const float* q, const float* k,
                                 const float* v, const float* delta, const float* lse, int T, int H, float scale) {
    __shared__ bf16 Ks[NW * 16][D + TC_PAD];
    __shared__ bf16 Vs[NW * 16][D + TC_PAD];
    __shared__ bf16 Qs[TC_BQ_KV][D + TC_PAD];
    __shared__ bf16 Gs[TC_BQ_KV][D + TC_PAD];
    __shared__ float Ls[TC_BQ_KV], Ds[TC_BQ_KV];
    int bh = blockIdx.y;
    int k0 = blockIdx.x * NW * 16;
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, qd = lane & 3;
    int w0 = k0 + warp * 16;
    int keys[2] = {w0 + g, w0 + g + 8};
    i64 rs = (i64)H * D, base = tc_head_base(bh, T, H, D);
    float scale2 = scale * TC_LOG2E;
    tc_load<D, NW * 16>(Ks, k, base, rs, k0, T);
    tc_load<D, NW * 16>(Vs, v, base, rs, k0, T);
    float dka[D / 8][4], dva[D / 8][4];
#pragma unroll
    for (int n = 0; n < D / 8; n++)
        for (int r = 0; r < 4; r++) dka[n][r] = dva[n][r] = 0.0f;
    for (int i0 = (k0 / TC_BQ_KV) * TC_BQ_KV; i0 < T; i0 += TC_BQ_KV) {
        __syncthreads();
        tc_load<D, TC_BQ_KV>(Qs, q, base, rs, i0, T);
        tc_load<D, TC_BQ_KV>(Gs, dout, base, rs, i0, T);
        tc_rows<TC_BQ_KV>(Ds, Ls, delta, lse, bh, i0, T);
        __syncthreads();
        if (i0 + TC_BQ_KV - 1 < w0) continue;  // warp-uniform: every query precedes the warp's keys
        float st[TC_BQ_KV / 8][4], dpt[TC_BQ_KV / 8][4];  // S^T, dP^T: keys x queries
#pragma unroll
        for (int n = 0; n < TC_BQ_KV / 8; n++) {
            st[n][0] = st[n][1] = st[n][2] = st[n][3] = 0.0f;
            dpt[n][0] = dpt[n][1] = dpt[n][2] = dpt[n][3] = 0.0f;
            if (i0 + n * 8 + 7 < w0) continue;  // warp-uniform
#pragma unroll
            for (int kk = 0; kk < D / 16; kk++) {
                unsigned a[4], b[2];
                afrag<D + TC_PAD>(a, Ks, warp * 16, kk * 16);
                bfrag_rows<D + TC_PAD>(b, Qs, n * 8, kk * 16);
                mma_bf16(st[n], a, b);
                afrag<D + TC_PAD>(a, Vs, warp * 16, kk * 16);
                bfrag_rows<D + TC_PAD>(b, Gs, n * 8, kk * 16);
                mma_bf16(dpt[n], a, b);
            }
        }
#pragma unroll
        for (int n = 0; n < TC_BQ_KV / 8; n++) {
#pragma unroll
            for (int r = 0; r < 4; r++) {
                int ri = n * 8 + 2 * qd + (r & 1), i = i0 + ri, j = keys[r >> 1];
                float p = i >= j && i < T ? exp2f(st[n][r] * scale2 - Ls[ri]) : 0.0f;
                dpt[n][r] = p * (dpt[n][r] - Ds[ri]);  // dS^T
                st[n][r] = p;                          // P^T
            }
        }
#pragma unroll
        for (int kk = 0; kk < TC_BQ_KV / 16; kk++) {
            if (i0 + kk * 16 + 15 < w0) continue;  // warp-uniform
            unsigned pa[4], sa[4];
            cfrag_to_a(pa, st[2 * kk], st[2 * kk + 1]);
            cfrag_to_a(sa, dpt[2 * kk], dpt[2 * kk + 1]);
#pragma unroll
            for (int n = 0; n < D / 8; n++) {
                unsigned b[2];
                bfrag_cols<D + TC_PAD>(b, Gs, kk * 16, n * 8);
                mma_bf16(dva[n], pa, b);
                bfrag_cols<D + TC_PAD>(b, Qs, kk * 16, n * 8);
                mma_bf16(dka[n], sa, b);
            }
        }
    }
#pragma unroll
    for (int h = 0; h < 2; h++) {
        int j = keys[h];
        if (j >= T) continue;
#pragma unroll
        for (int n = 0; n < D / 8; n++) {
            int c = n * 8 + 2 * qd;
            dk[base + j * rs + c] = dka[n][2 * h] * scale;
            dk[base + j * rs + c + 1] = dka[n][2 * h + 1] * scale;
            dv[base + j * rs + c] = dva[n][2 * h];
            dv[base + j * rs + c + 1] = dva[n][2 * h + 1];
        }
    }
}

#define ATT_TC_INSTANTIATE(D, NW)                                                                        \
    extern "C" __global__ void __launch_bounds__(128) h_attn_fwd_tc_d##D(                                \
        float* out, float* lse, const float* q, const float* k, const float* v, int T, int H, float scale) { \
        attn_fwd_tc<D>(out, lse, q, k, v, T, H, scale);                                                  \
    }                                                                                                    \
    extern "C" __global__ void __launch_bounds__(128) h_attn_bwd_dq_tc_d##D(                             \
        float* dq, float* delta, const float* dout, const float* q, const float* k, const float* v,      \
        const float* out, const float* lse, int T, int H, float scale) {                                 \
        attn_bwd_dq_tc<D>(dq, delta, dout, q, k, v, out, lse, T, H, scale);                              \
    }                                                                                                    \
    extern "C" __global__ void __launch_bounds__(NW * 32) h_attn_bwd_dkdv_tc_d##D(                       \
        float* dk, float* dv, const float* dout, const float* q, const float* k, const float* v,         \
        const float* delta, const float* lse, int T, int H, float scale) {                               \
        attn_bwd_dkdv_tc<D, NW>(dk, dv, dout, q, k, v, delta, lse, T, H, scale);                         \
    }

// Keep in step with attentionTCHeadDims and attTCKeyWarps in
// attention_tc.go: dk, dv blocks of 4 warps (64 keys) at head dim 64, 2
// warps at 128 (shared memory).
ATT_TC_INSTANTIATE(64, 4)
ATT_TC_INSTANTIATE(128, 2)
