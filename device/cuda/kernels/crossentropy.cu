// crossentropy.cu: fused cross-entropy over the vocabulary, one block per
// row; the log-sum-exp reads the logits once.

// row_lse returns log(sum_c exp(x[c])) over a row to every thread of the
// block: each thread keeps an online (max, sum of exp) pair over its
// columns, and the block combines them. sh holds 32 floats.
__device__ float row_lse(const float* x, i64 vocab, float* sh) {
    float m = H_NEG_INF, s = 0.0f;
    for (i64 c = threadIdx.x; c < vocab; c += blockDim.x) {
        float v = x[c];
        if (v > m) {
            s = s * expf(m - v) + 1.0f;
            m = v;
        } else {
            s += expf(v - m);
        }
    }
    float M = block_max(m, sh);
    float part = m == H_NEG_INF ? 0.0f : s * expf(m - M);
    return M + logf(block_sum(part, sh));
}

extern "C" __global__ void h_xent_f32(float* loss, float* lse, const float* logits, const int* targets, i64 rows, i64 vocab) {
    __shared__ float shf[32];
    const float* x = logits + (i64)blockIdx.x * vocab;
    float l = row_lse(x, vocab, shf);
    if (threadIdx.x == 0) {
        lse[blockIdx.x] = l;
        loss[blockIdx.x] = l - x[targets[blockIdx.x]];
    }
}

// dlogits[r,:] = dloss[r] (softmax(logits[r,:]) - onehot(targets[r]));
// dlogits may alias logits.
extern "C" __global__ void h_xent_bwd_f32(float* dl, const float* dloss, const float* logits, const float* lse,
                                          const int* targets, i64 rows, i64 vocab) {
    i64 off = (i64)blockIdx.x * vocab;
    float g = dloss[blockIdx.x], l = lse[blockIdx.x];
    int t = targets[blockIdx.x];
    for (i64 c = threadIdx.x; c < vocab; c += blockDim.x) {
        float p = expf(logits[off + c] - l);
        dl[off + c] = g * (p - (c == t ? 1.0f : 0.0f));
    }
}

// Forward and backward in one kernel: loss and lse as h_xent_f32, then the
// row of logits is overwritten with gradScale * (softmax - onehot).
extern "C" __global__ void h_xent_grad_f32(float* loss, float* lse, float* logits, const int* targets, i64 rows, i64 vocab,
                                           float gradScale) {
    __shared__ float shf[32];
    float* x = logits + (i64)blockIdx.x * vocab;
    int t = targets[blockIdx.x];
    float target = x[t];  // read before any thread overwrites the row
    float l = row_lse(x, vocab, shf);  // its barriers also order that read
    if (threadIdx.x == 0) {
        lse[blockIdx.x] = l;
        loss[blockIdx.x] = l - target;
    }
    for (i64 c = threadIdx.x; c < vocab; c += blockDim.x) {
        x[c] = gradScale * (expf(x[c] - l) - (c == t ? 1.0f : 0.0f));
    }
}
