// nn.cu: SwiGLU, GELU, RoPE, Gather, ScatterAdd and the AdamW step.

__device__ __forceinline__ float sigmoidf_(float x) { return 1.0f / (1.0f + expf(-x)); }

extern "C" __global__ void h_swiglu_f32(float* out, const float* a, const float* b, i64 n) {
    H_FOR(i, n) {
        float x = a[i];
        out[i] = x * sigmoidf_(x) * b[i];
    }
}

// d/da silu(a) = s (1 + a (1 - s)) with s = sigmoid(a).
extern "C" __global__ void h_swiglu_bwd_f32(float* da, float* db, const float* dout, const float* a, const float* b, i64 n) {
    H_FOR(i, n) {
        float x = a[i], s = sigmoidf_(x), g = dout[i], y = b[i];
        da[i] = g * y * s * (1.0f + x * (1.0f - s));
        db[i] = g * x * s;
    }
}

// GELU's tanh approximation of z = x + bias[col] (bias null: x), as
// z sigmoid(2u) with u = sqrt(2/pi) (z + 0.044715 z^3).
#define H_GELU_K2 1.5957691216057308f
#define H_GELU_C 0.044715f

extern "C" __global__ void h_gelu_tanh_f32(float* out, const float* x, const float* bias, i64 n, i64 cols) {
    H_FOR(i, n) {
        float z = bias ? x[i] + bias[i % cols] : x[i];
        out[i] = z * sigmoidf_(H_GELU_K2 * (z + H_GELU_C * z * z * z));
    }
}

// gelu'(z) = s + z s (1 - s) 2 sqrt(2/pi) (1 + 3 0.044715 z^2), s = sigmoid(2u)
// = 1/(1 + e), e = e^(-2u); 1 - s = e s, without cancellation near s = 1.
// The exponent is capped at 88, as the CPU's exp is: for z below about
// -9.3 an uncapped e is +Inf, s 0 and e s NaN.
extern "C" __global__ void h_gelu_tanh_bwd_f32(float* dx, const float* dout, const float* x, const float* bias, i64 n, i64 cols) {
    H_FOR(i, n) {
        float z = bias ? x[i] + bias[i % cols] : x[i];
        float a = -H_GELU_K2 * (z + H_GELU_C * z * z * z);
        float e = expf(a < 88.0f ? a : 88.0f), s = 1.0f / (1.0f + e);
        dx[i] = dout[i] * (s + z * s * (e * s) * H_GELU_K2 * (1.0f + 3.0f * H_GELU_C * z * z));
    }
}

// Half-split rotary embedding on [B, T, H, D]; one thread per (l, r) pair,
// so out may alias x. cos and sin are T x D/2.
extern "C" __global__ void h_rope_f32(float* out, const float* x, const float* cs, const float* sn,
                                      int B, int T, int H, int D, int inverse) {
    int half = D / 2;
    i64 n = (i64)B * T * H * half;
    H_FOR(i, n) {
        int j = (int)(i % half);
        i64 row = i / half;  // (b*T + t)*H + h
        int t = (int)((row / H) % T);
        float c = cs[(i64)t * half + j], s = sn[(i64)t * half + j];
        if (inverse) s = -s;
        i64 base = row * D;
        float l = x[base + j], r = x[base + half + j];
        out[base + j] = l * c - r * s;
        out[base + half + j] = r * c + l * s;
    }
}

extern "C" __global__ void h_gather_f32(float* dst, const float* table, const int* idx, i64 rows, i64 cols) {
    H_FOR(i, rows * cols) {
        i64 r = i / cols, c = i % cols;
        dst[i] = table[(i64)idx[r] * cols + c];
    }
}

extern "C" __global__ void h_scatter_add_f32(float* dst, const float* src, const int* idx, i64 rows, i64 cols) {
    H_FOR(i, rows * cols) {
        i64 r = i / cols, c = i % cols;
        atomicAdd(dst + (i64)idx[r] * cols + c, src[i]);
    }
}

// One decoupled-weight-decay Adam update; step may be null. c1 = 1-b1,
// c2 = 1-b2 and decay = 1-lr*wd come computed in float64 (1.0f - b2 in
// float32 would be 1.3e-5 off for b2 = 0.999).
extern "C" __global__ void h_adamw_f32(float* p, const float* g, float* m, float* v, float* step, i64 n,
                                       float lr, float b1, float b2, float c1, float c2, float eps, float decay,
                                       float bc1, float bc2) {
    H_FOR(i, n) {
        float gi = g[i];
        float mi = b1 * m[i] + c1 * gi;
        float vi = b2 * v[i] + c2 * gi * gi;
        m[i] = mi;
        v[i] = vi;
        float s = -lr * (mi / bc1) / (sqrtf(vi / bc2) + eps);
        if (step) step[i] = s;
        p[i] = p[i] * decay + s;
    }
}
