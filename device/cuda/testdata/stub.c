// stub.c: a fake CUDA driver, cuBLAS and NVRTC for the binding tests
// (stub_test.go). Built three times with gcc -shared: -DSTUB_CUDA as
// libcuda.so.1, -DSTUB_CUBLAS as libcublas.so.13, -DSTUB_NVRTC as
// libnvrtc.so.13. "Device memory" is host memory, copies are memcpy, and
// cublas*GemmStridedBatched* compute a real column-major product (batch <= 4), so
// results can be checked; launches and GEMM calls record their arguments.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef long long ll;

#ifdef STUB_CUDA
static int n_alloc, n_launch, fail_launch, fail_sync, n_params;
static char launch_name[128];
static ll launch_dims[9];
static uint64_t launch_params[32];

int cuInit(unsigned flags) { return getenv("STUB_NO_DEVICE") ? 100 : 0; }
int cuDriverGetVersion(int* v) { *v = 13000; return 0; }
int cuDeviceGetCount(int* n) { *n = 1; return 0; }
int cuDeviceGet(int* dev, int ordinal) { *dev = ordinal; return 0; }
int cuDeviceGetName(char* name, int len, int dev) { strncpy(name, "Stub GPU", len); return 0; }
int cuDeviceGetAttribute(int* v, int attr, int dev) {
    *v = attr == 75 ? 9 : attr == 76 ? 0 : attr == 16 ? 132 : 0;
    return 0;
}
int cuDevicePrimaryCtxRetain(void** ctx, int dev) { *ctx = (void*)0x1234; return 0; }
int cuDevicePrimaryCtxRelease_v2(int dev) { return 0; }
int cuCtxSetCurrent(void* ctx) { return ctx == (void*)0x1234 ? 0 : 201; }
int cuMemAlloc_v2(uint64_t* p, size_t n) { n_alloc++; *p = (uint64_t)calloc(1, n); return 0; }
int cuMemFree_v2(uint64_t p) { free((void*)p); return 0; }
int cuMemcpyHtoDAsync_v2(uint64_t dst, const void* src, size_t n, void* s) { memcpy((void*)dst, src, n); return 0; }
int cuMemcpyDtoHAsync_v2(void* dst, uint64_t src, size_t n, void* s) { memcpy(dst, (void*)src, n); return 0; }
int cuMemcpyDtoDAsync_v2(uint64_t dst, uint64_t src, size_t n, void* s) { memmove((void*)dst, (void*)src, n); return 0; }
int cuModuleLoadData(void** mod, const void* image) { *mod = (void*)0x5678; return memcmp(image, "STUBCUBN", 8) ? 200 : 0; }
int cuModuleUnload(void* mod) { return 0; }
int cuModuleGetFunction(void** fn, void* mod, const char* name) { *fn = strdup(name); return 0; }
int cuLaunchKernel(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                   unsigned shmem, void* stream, void** params, void** extra) {
    n_launch++;
    strncpy(launch_name, (const char*)f, sizeof launch_name - 1);
    ll d[9] = {gx, gy, gz, bx, by, bz, shmem, (ll)stream, (ll)extra};
    memcpy(launch_dims, d, sizeof d);
    for (int i = 0; i < n_params; i++) launch_params[i] = *(uint64_t*)params[i];
    return fail_launch ? 700 : 0;
}
int cuStreamCreate(void** s, unsigned flags) { *s = (void*)0x9abc; return 0; }
int cuStreamDestroy_v2(void* s) { return 0; }
int cuStreamSynchronize(void* s) { return fail_sync ? 719 : 0; }
int cuGetErrorString(int r, const char** s) { *s = r == 700 ? "stub illegal address" : "stub error"; return 0; }

void stub_set_nparams(int n) { n_params = n; }
void stub_set_fail(int launch, int sync) { fail_launch = launch; fail_sync = sync; }
int stub_alloc_count(void) { return n_alloc; }
int stub_launch_count(void) { return n_launch; }
const char* stub_launch_name(void) { return launch_name; }
void stub_launch_dims(ll* out) { memcpy(out, launch_dims, sizeof launch_dims); }
void stub_launch_params(uint64_t* out) { memcpy(out, launch_params, sizeof launch_params); }
#endif

#ifdef STUB_CUBLAS
static ll gemm_ints[24];
static float gemm_floats[2];
static void* blas_stream;

int cublasCreate_v2(void** h) { *h = (void*)0x42; return 0; }
int cublasDestroy_v2(void* h) { return 0; }
int cublasSetStream_v2(void* h, void* s) { blas_stream = s; return 0; }
int cublasSetMathMode(void* h, int mode) { return 0; }
int cublasGetVersion_v2(void* h, int* v) { *v = 130000; return 0; }

static float bf(uint16_t h) { uint32_t u = (uint32_t)h << 16; float f; memcpy(&f, &u, 4); return f; }
static uint16_t tobf(float f) { uint32_t u; memcpy(&u, &f, 4); u += 0x7fff + ((u >> 16) & 1); return u >> 16; }

// Column-major C = alpha op(A) op(B) + beta C, element type chosen per operand.
static void colmajor(int ta, int tb, int m, int n, int k, float alpha, const void* A, int at, int lda, ll sa,
                     const void* B, int bt, int ldb, ll sb, float beta, void* C, int ct, int ldc, ll sc, int batch) {
    for (int p = 0; p < batch; p++)
        for (int j = 0; j < n; j++)
            for (int i = 0; i < m; i++) {
                double acc = 0;
                for (int l = 0; l < k; l++) {
                    ll ai = p * sa + (ta ? (ll)i * lda + l : (ll)l * lda + i);
                    ll bi = p * sb + (tb ? (ll)l * ldb + j : (ll)j * ldb + l);
                    float a = at == 14 ? bf(((const uint16_t*)A)[ai]) : ((const float*)A)[ai];
                    float b = bt == 14 ? bf(((const uint16_t*)B)[bi]) : ((const float*)B)[bi];
                    acc += (double)a * b;
                }
                ll ci = p * sc + (ll)j * ldc + i;
                float old = beta == 0 ? 0 : (ct == 14 ? bf(((uint16_t*)C)[ci]) : ((float*)C)[ci]);
                float r = alpha * (float)acc + (beta == 0 ? 0 : beta * old);
                if (ct == 14) ((uint16_t*)C)[ci] = tobf(r); else ((float*)C)[ci] = r;
            }
}

int cublasSgemmStridedBatched(void* h, int ta, int tb, int m, int n, int k, const float* alpha, const float* A, int lda,
                              ll sa, const float* B, int ldb, ll sb, const float* beta, float* C, int ldc, ll sc, int batch) {
    ll v[24] = {(ll)h, ta, tb, m, n, k, (ll)A, lda, sa, (ll)B, ldb, sb, (ll)C, ldc, sc, batch, (ll)blas_stream};
    memcpy(gemm_ints, v, sizeof v);
    gemm_floats[0] = *alpha;
    gemm_floats[1] = *beta;
    if (batch <= 4) colmajor(ta, tb, m, n, k, *alpha, A, 0, lda, sa, B, 0, ldb, sb, *beta, C, 0, ldc, sc, batch);
    return 0;
}

int cublasGemmStridedBatchedEx(void* h, int ta, int tb, int m, int n, int k, const void* alpha, const void* A, int at,
                               int lda, ll sa, const void* B, int bt, int ldb, ll sb, const void* beta, void* C, int ct,
                               int ldc, ll sc, int batch, int compute, int algo) {
    ll v[24] = {(ll)h, ta, tb, m, n, k, (ll)A, lda, sa, (ll)B, ldb, sb, (ll)C, ldc, sc, batch, (ll)blas_stream,
                at, bt, ct, compute, algo};
    memcpy(gemm_ints, v, sizeof v);
    gemm_floats[0] = *(const float*)alpha;
    gemm_floats[1] = *(const float*)beta;
    if (batch <= 4) colmajor(ta, tb, m, n, k, gemm_floats[0], A, at, lda, sa, B, bt, ldb, sb, gemm_floats[1], C, ct, ldc, sc, batch);
    return 0;
}

void stub_gemm_args(ll* ints, float* floats) { memcpy(ints, gemm_ints, sizeof gemm_ints); memcpy(floats, gemm_floats, sizeof gemm_floats); }
#endif

#ifdef STUB_NVRTC
static int n_compile;
static char options[1024];

int nvrtcVersion(int* major, int* minor) { *major = 13; *minor = 0; return 0; }
int nvrtcCreateProgram(void** prog, const char* src, const char* name, int nh, const char** h, const char** in) {
    *prog = (void*)0x77;
    return strstr(src, "h_adamw_f32") ? 0 : 3;
}
int nvrtcCompileProgram(void* prog, int n, const char** opts) {
    n_compile++;
    options[0] = 0;
    for (int i = 0; i < n; i++) { strncat(options, opts[i], sizeof options - strlen(options) - 2); strcat(options, " "); }
    return 0;
}
int nvrtcGetProgramLogSize(void* prog, size_t* n) { *n = 1; return 0; }
int nvrtcGetProgramLog(void* prog, char* log) { log[0] = 0; return 0; }
int nvrtcGetCUBINSize(void* prog, size_t* n) { *n = 8; return 0; }
int nvrtcGetCUBIN(void* prog, char* out) { memcpy(out, "STUBCUBN", 8); return 0; }
int nvrtcDestroyProgram(void** prog) { *prog = 0; return 0; }
const char* nvrtcGetErrorString(int s) { return "stub nvrtc error"; }

int stub_compile_count(void) { return n_compile; }
const char* stub_compile_options(void) { return options; }
#endif
