// rows.cu: row-wise kernels, one block per row: Reduce, RowScale, RMSNorm
// and its backward. Sums accumulate in double.

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
