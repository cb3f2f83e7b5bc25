// attention_tc.cu: causal flash attention forward on tensor cores
// (mma.sync m16n8k16, bf16 operands, f32 accumulation) for head dims 64
// and 128, on the same [B, T, H, D] f32 tensors and saved log-sum-exp as
// attention.cu, which stays the fallback for other head dims and for the
// backward.
//
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

#define TC_BQ 64   // queries per block (16 per warp)
#define TC_BK 64   // keys per shared tile
#define TC_PAD 8   // bf16 of padding per shared row, against bank conflicts

// tc_head_base is the offset of head h of batch b (bh = b H + h) in a
// [B, T, H, D] tensor (each kernel file compiles on its own in the clang
// test, so attention.cu's head_base is not visible here).
__device__ __forceinline__ i64 tc_head_base(int bh, int T, int H, int D) {
    return (i64)(bh / H) * T * H * D + (i64)(bh % H) * D;
}

// tc_load converts rows r0 .. r0+TC_BK-1 of a head slice to bf16, zeros
// past row T.
template <int D>
__device__ void tc_load(bf16 (*S)[D + TC_PAD], const float* x, i64 base, i64 rs, int r0, int T) {
    for (int e = threadIdx.x; e < TC_BK * D; e += blockDim.x) {
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
    tc_load<D>(Ks, q, base, rs, q0, T);
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
    float m[2] = {H_NEG_INF, H_NEG_INF}, l[2] = {0.0f, 0.0f};

    int kend = min(T, q0 + TC_BQ);
    for (int k0 = 0; k0 < kend; k0 += TC_BK) {
        __syncthreads();
        tc_load<D>(Ks, k, base, rs, k0, T);
        tc_load<D>(Vs, v, base, rs, k0, T);
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
                float x = j <= rows[r >> 1] ? s[n][r] * scale : H_NEG_INF;
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
            float corr = expf(m[h] - mb[h]);
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
                p[e] = f2bf(expf(s[n][r] - mb[r >> 1]));
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
        if (qd == 0) lse[(i64)bh * T + i] = m[h] + logf(l[h]);
    }
}

#define ATT_TC_INSTANTIATE(D)                                                                            \
    extern "C" __global__ void __launch_bounds__(128) h_attn_fwd_tc_d##D(                                \
        float* out, float* lse, const float* q, const float* k, const float* v, int T, int H, float scale) { \
        attn_fwd_tc<D>(out, lse, q, k, v, T, H, scale);                                                  \
    }

// Keep in step with attentionTCHeadDims in attention_tc.go.
ATT_TC_INSTANTIATE(64)
ATT_TC_INSTANTIATE(128)
