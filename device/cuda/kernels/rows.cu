// rows.cu: row-wise kernels, one block per row: Reduce, RowScale, RMSNorm
// and LayerNorm and their backwards (LayerNorm's gain and bias gradients,
// column sums, one thread per column). Sums accumulate in double.

// op: 1 sum, 2 sum of squares, 3 max (device.ReduceOp).
extern "C" __global__ void h_reduce_rows_f32(float* dst, const float* src, i64 rows, i64 cols, int op) {
    __shared__ double shd[32];
    __shared__ float shf[32];
    const float* x = src + (i64)blockIdx.x * cols;
    if (op == 3) {
        float m = H_NEG_INF;
        for (i64 c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, x[c]);
        m = block_max(m, shf);
        if (threadIdx.x == 0) dst[blockIdx.x] = m;
        return;
    }
    double s = 0.0;
    for (i64 c = threadIdx.x; c < cols; c += blockDim.x) {
        double v = x[c];
        s += op == 2 ? v * v : v;
    }
    s = block_sum(s, shd);
    if (threadIdx.x == 0) dst[blockIdx.x] = (float)s;
}

// One thread per column.
extern "C" __global__ void h_reduce_cols_f32(float* dst, const float* src, i64 rows, i64 cols, int op) {
    H_FOR(c, cols) {
        if (op == 3) {
            float m = H_NEG_INF;
            for (i64 r = 0; r < rows; r++) m = fmaxf(m, src[r * cols + c]);
            dst[c] = m;
        } else {
            double s = 0.0;
            for (i64 r = 0; r < rows; r++) {
                double v = src[r * cols + c];
                s += op == 2 ? v * v : v;
            }
            dst[c] = (float)s;
        }
    }
}

// dst[i,:] = src[i,:] * alpha / (||src[i,:]|| + eps); dst may alias src.
extern "C" __global__ void h_row_scale_f32(float* dst, const float* src, i64 rows, i64 cols, float alpha, float eps) {
    __shared__ double sh[32];
    i64 off = (i64)blockIdx.x * cols;
    double s = 0.0;
    for (i64 c = threadIdx.x; c < cols; c += blockDim.x) {
        double v = src[off + c];
        s += v * v;
    }
    s = block_sum(s, sh);
    float f = alpha / ((float)sqrt(s) + eps);
    for (i64 c = threadIdx.x; c < cols; c += blockDim.x) dst[off + c] = src[off + c] * f;
}

extern "C" __global__ void h_rmsnorm_f32(float* out, float* rstd, const float* x, i64 rows, i64 cols, float eps) {
    __shared__ double sh[32];
    i64 off = (i64)blockIdx.x * cols;
    double s = 0.0;
    for (i64 c = threadIdx.x; c < cols; c += blockDim.x) {
        double v = x[off + c];
        s += v * v;
    }
    s = block_sum(s, sh);
    float r = 1.0f / sqrtf((float)(s / (double)cols) + eps);
    if (threadIdx.x == 0) rstd[blockIdx.x] = r;
    for (i64 c = threadIdx.x; c < cols; c += blockDim.x) out[off + c] = x[off + c] * r;
}

// y = x r with r = (mean(x^2) + eps)^(-1/2):
// dx = r dy - x r^3 (dy . x) / cols.
extern "C" __global__ void h_rmsnorm_bwd_f32(float* dx, const float* dy, const float* x, const float* rstd, i64 rows, i64 cols) {
    __shared__ double sh[32];
    i64 off = (i64)blockIdx.x * cols;
    double s = 0.0;
    for (i64 c = threadIdx.x; c < cols; c += blockDim.x) s += (double)dy[off + c] * (double)x[off + c];
    s = block_sum(s, sh);
    float r = rstd[blockIdx.x];
    float k = r * r * r * (float)(s / (double)cols);
    for (i64 c = threadIdx.x; c < cols; c += blockDim.x) dx[off + c] = r * dy[off + c] - x[off + c] * k;
}

// LayerNorm of each row: out = (x - mean) rstd w + b (w, b null: 1, 0),
// mean and rstd saved. The variance sums (x - mean)^2 in double.
extern "C" __global__ void h_layernorm_f32(float* out, float* mean, float* rstd, const float* x, const float* w,
                                           const float* b, i64 rows, i64 cols, float eps) {
    __shared__ double sh[32];
    i64 off = (i64)blockIdx.x * cols;
    double s = 0.0;
    for (i64 c = threadIdx.x; c < cols; c += blockDim.x) s += (double)x[off + c];
    s = block_sum(s, sh);
    float mu = (float)(s / (double)cols);
    double v = 0.0;
    for (i64 c = threadIdx.x; c < cols; c += blockDim.x) {
        double d = (double)(x[off + c] - mu);
        v += d * d;
    }
    v = block_sum(v, sh);
    float r = (float)(1.0 / sqrt(v / (double)cols + (double)eps));
    if (threadIdx.x == 0) {
        mean[blockIdx.x] = mu;
        rstd[blockIdx.x] = r;
    }
    for (i64 c = threadIdx.x; c < cols; c += blockDim.x) {
        float y = (x[off + c] - mu) * r;
        if (w) y *= w[c];
        if (b) y += b[c];
        out[off + c] = y;
    }
}

// LayerNorm's input gradient per row: with xh = (x - mean) rstd and
// g = dy w, dx = rstd (g - mean(g) - xh mean(g xh)).
extern "C" __global__ void h_layernorm_bwd_f32(float* dx, const float* dy, const float* x, const float* w,
                                               const float* mean, const float* rstd, i64 rows, i64 cols) {
    __shared__ double sh[32];
    i64 off = (i64)blockIdx.x * cols;
    float mu = mean[blockIdx.x], r = rstd[blockIdx.x];
    double sg = 0.0, sgx = 0.0;
    for (i64 c = threadIdx.x; c < cols; c += blockDim.x) {
        float g = w ? dy[off + c] * w[c] : dy[off + c];
        sg += (double)g;
        sgx += (double)g * (double)((x[off + c] - mu) * r);
    }
    sg = block_sum(sg, sh);
    sgx = block_sum(sgx, sh);
    float c1 = (float)(sg / (double)cols), c2 = (float)(sgx / (double)cols);
    for (i64 c = threadIdx.x; c < cols; c += blockDim.x) {
        float g = w ? dy[off + c] * w[c] : dy[off + c];
        dx[off + c] = r * (g - c1 - (x[off + c] - mu) * r * c2);
    }
}

// LayerNorm's gain and bias gradients: one thread per column sums the
// rows in order (double), dw = sum dy xh, db = sum dy; either may be null.
extern "C" __global__ void h_layernorm_params_bwd_f32(float* dw, float* db, const float* dy, const float* x,
                                                      const float* mean, const float* rstd, i64 rows, i64 cols) {
    H_FOR(c, cols) {
        double aw = 0.0, ab = 0.0;
        for (i64 r = 0; r < rows; r++) {
            float g = dy[r * cols + c];
            aw += (double)g * (double)((x[r * cols + c] - mean[r]) * rstd[r]);
            ab += (double)g;
        }
        if (dw) dw[c] = (float)aw;
        if (db) db[c] = (float)ab;
    }
}
