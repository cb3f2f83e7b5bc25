// pairs.cu: PairDistanceMax, the scan of a Gram tile for each row's
// farthest column (the exact row diameter of optim/geometry).

#define H_PAIR_THREADS 256

// One block of H_PAIR_THREADS threads per tile row i: each thread keeps the
// largest x_ij = na[i] + nb[j] - 2 g[i,j] over its columns (a strict > over
// increasing j keeps the smallest j of a tie; NaN never wins), then a
// shared-memory tree picks the block's largest, smallest column first.
extern "C" __global__ void __launch_bounds__(H_PAIR_THREADS) h_pair_distance_max_f32(
    float* best, int* arg, const float* g, const float* na, const float* nb,
    i64 rows, i64 cols, i64 r0, i64 c0) {
    __shared__ float sv[H_PAIR_THREADS];
    __shared__ i64 sj[H_PAIR_THREADS];
    const i64 i = blockIdx.x;
    const int t = threadIdx.x;
    i64 j0 = r0 + i + 1 - c0;
    if (j0 < 0) j0 = 0;
    const float* row = g + i * cols;
    const float ni = na[i];
    float m = H_NEG_INF;
    i64 mj = cols; // no column yet
    for (i64 j = j0 + t; j < cols; j += H_PAIR_THREADS) {
        float x = ni + nb[j] - 2.0f * row[j];
        if (x > m) {
            m = x;
            mj = j;
        }
    }
    sv[t] = m;
    sj[t] = mj;
    __syncthreads();
    for (int s = H_PAIR_THREADS / 2; s > 0; s >>= 1) {
        if (t < s) {
            float ov = sv[t + s];
            i64 oj = sj[t + s];
            if (ov > sv[t] || (ov == sv[t] && oj < sj[t])) {
                sv[t] = ov;
                sj[t] = oj;
            }
        }
        __syncthreads();
    }
    if (t == 0 && sj[0] < cols && sv[0] > best[i]) {
        best[i] = sv[0];
        arg[i] = (int)(c0 + sj[0]);
    }
}
