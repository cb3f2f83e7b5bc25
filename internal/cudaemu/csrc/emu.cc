// emu.cc: a CUDA driver, cuBLAS and NVRTC that run on the CPU, for testing
// the CUDA backend's host code and kernels on machines without a GPU. Built
// three times with g++ -shared: -DEMU_CUDA as libcuda.so.1, -DEMU_CUBLAS as
// libcublas.so.13, -DEMU_NVRTC as libnvrtc.so.13.
//
// The fake NVRTC really compiles: it hands the CUDA C source to g++ with
// emu_runtime.h (fibers for threads, static memory for __shared__) and
// returns the shared object as the "cubin". cuModuleLoadData dlopens it and
// cuLaunchKernel runs the kernel's blocks on the calling thread. Device
// memory is host memory from mmap, poisoned with NaN bytes and followed by
// an inaccessible page, so reads of memory never written show up as NaN
// and runs past an allocation fault. Only the entry points the backend
// binds are provided.
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <mutex>
#include <string>
#include <vector>

typedef long long ll;

#define EXPORT extern "C" __attribute__((visibility("default")))

#ifdef EMU_CUDA
enum {
    SUCCESS = 0,
    INVALID_VALUE = 1,
    OUT_OF_MEMORY = 2,
    NOT_INITIALIZED = 3,
    NO_DEVICE = 100,
    INVALID_IMAGE = 200,
    INVALID_CONTEXT = 201,
    INVALID_HANDLE = 400,
    NOT_FOUND = 500,
    LAUNCH_FAILED = 719,
};

// mu serialises allocation and launches: a kernel's threads share the
// module's static scheduler state, and Go may call from several threads.
static std::mutex mu;
static bool initialized;
static int sticky;  // a failed kernel poisons the context, as on a GPU
static char launch_error[1024];
static const uintptr_t kContext = 0xc0de;

struct Allocation {
    char* base;
    size_t mapped;
};
static std::vector<std::pair<uint64_t, Allocation>> allocations;

struct Module {
    void* handle;
};
struct Function {
    int (*entry)(const unsigned* dims, void** params, char* msg, int msglen);
    char name[128];
};

EXPORT int cuInit(unsigned flags) {
    if (getenv("EMU_NO_DEVICE")) return NO_DEVICE;
    initialized = true;
    return SUCCESS;
}
EXPORT int cuDriverGetVersion(int* v) {
    *v = 13000;
    return SUCCESS;
}
EXPORT int cuDeviceGetCount(int* n) {
    *n = initialized ? 1 : 0;
    return initialized ? SUCCESS : NOT_INITIALIZED;
}
EXPORT int cuDeviceGet(int* dev, int ordinal) {
    if (ordinal != 0) return INVALID_VALUE;
    *dev = 0;
    return SUCCESS;
}
EXPORT int cuDeviceGetName(char* name, int len, int dev) {
    snprintf(name, len, "CPU emulator");
    return SUCCESS;
}
// Compute capability 9.0 with 4 SMs: few SMs keep grids small, so the
// grid-stride loops wrap.
EXPORT int cuDeviceGetAttribute(int* v, int attr, int dev) {
    switch (attr) {
    case 75: *v = 9; break;
    case 76: *v = 0; break;
    case 16: *v = 4; break;
    default: return INVALID_VALUE;
    }
    return SUCCESS;
}
EXPORT int cuDevicePrimaryCtxRetain(uintptr_t* ctx, int dev) {
    *ctx = kContext;
    return SUCCESS;
}
EXPORT int cuDevicePrimaryCtxRelease_v2(int dev) { return SUCCESS; }
EXPORT int cuCtxSetCurrent(uintptr_t ctx) { return ctx == kContext ? SUCCESS : INVALID_CONTEXT; }

// cuMemAlloc_v2 maps the request rounded up to pages plus one guard page,
// and places the allocation so that it ends where the guard page starts.
EXPORT int cuMemAlloc_v2(uint64_t* p, size_t n) {
    if (n == 0) return INVALID_VALUE;
    std::lock_guard<std::mutex> lock(mu);
    if (getenv("EMU_MAX_ALLOC") && n > strtoull(getenv("EMU_MAX_ALLOC"), nullptr, 10)) return OUT_OF_MEMORY;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t body = (n + page - 1) / page * page;
    char* base = (char*)mmap(nullptr, body + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) return OUT_OF_MEMORY;
    mprotect(base + body, page, PROT_NONE);
    size_t off = (body - n) / 256 * 256;  // CUDA aligns allocations to 256 bytes
    memset(base, 0xff, body);
    *p = (uint64_t)(base + off);
    allocations.push_back({*p, {base, body + page}});
    return SUCCESS;
}
EXPORT int cuMemFree_v2(uint64_t p) {
    std::lock_guard<std::mutex> lock(mu);
    for (size_t i = 0; i < allocations.size(); i++) {
        if (allocations[i].first == p) {
            munmap(allocations[i].second.base, allocations[i].second.mapped);
            allocations.erase(allocations.begin() + i);
            return SUCCESS;
        }
    }
    return INVALID_VALUE;
}
EXPORT int cuMemcpyHtoDAsync_v2(uint64_t dst, const void* src, size_t n, void* s) {
    memcpy((void*)dst, src, n);
    return sticky;
}
EXPORT int cuMemcpyDtoHAsync_v2(void* dst, uint64_t src, size_t n, void* s) {
    memcpy(dst, (void*)src, n);
    return sticky;
}
EXPORT int cuMemcpyDtoDAsync_v2(uint64_t dst, uint64_t src, size_t n, void* s) {
    memmove((void*)dst, (void*)src, n);
    return sticky;
}

// elf_size returns the length of an ELF image: its section header table
// comes last in files written by the GNU toolchain.
static size_t elf_size(const unsigned char* p) {
    if (memcmp(p, "\x7f" "ELF", 4) != 0 || p[4] != 2) return 0;
    uint64_t shoff;
    uint16_t shentsize, shnum;
    memcpy(&shoff, p + 0x28, 8);
    memcpy(&shentsize, p + 0x3a, 2);
    memcpy(&shnum, p + 0x3c, 2);
    return shoff + (size_t)shentsize * shnum;
}

EXPORT int cuModuleLoadData(uintptr_t* mod, const void* image) {
    size_t n = elf_size((const unsigned char*)image);
    if (n == 0) return INVALID_IMAGE;
    char path[] = "/tmp/hilbert-emu-module-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) return INVALID_IMAGE;
    bool ok = write(fd, image, n) == (ssize_t)n;
    close(fd);
    void* h = ok ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : nullptr;
    if (!h) fprintf(stderr, "cudaemu: dlopen module: %s\n", dlerror());
    unlink(path);
    if (!h) return INVALID_IMAGE;
    *mod = (uintptr_t) new Module{h};
    return SUCCESS;
}
EXPORT int cuModuleUnload(uintptr_t mod) {
    if (!mod) return INVALID_HANDLE;
    // The handle stays open: functions fetched from it may still be held.
    delete (Module*)mod;
    return SUCCESS;
}
EXPORT int cuModuleGetFunction(uintptr_t* fn, uintptr_t mod, const char* name) {
    if (!mod) return INVALID_HANDLE;
    std::string sym = std::string("emu_kernel_") + name;
    void* entry = dlsym(((Module*)mod)->handle, sym.c_str());
    if (!entry) return NOT_FOUND;
    Function* f = new Function;
    f->entry = (int (*)(const unsigned*, void**, char*, int))entry;
    snprintf(f->name, sizeof f->name, "%s", name);
    *fn = (uintptr_t)f;
    return SUCCESS;
}

// cuLaunchKernel checks the configuration as the driver does and runs the
// grid at once; a fault inside the kernel is reported by the next call that
// synchronizes, and every call after it, with the kernel named.
EXPORT int cuLaunchKernel(uintptr_t fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                          unsigned shmem, void* stream, void** params, void** extra) {
    std::lock_guard<std::mutex> lock(mu);
    if (sticky) return sticky;
    if (!fn) return INVALID_HANDLE;
    Function* f = (Function*)fn;
    if (extra != nullptr || (params == nullptr)) return INVALID_VALUE;
    if (gx == 0 || gy == 0 || gz == 0 || gx > 0x7fffffffu || gy > 65535 || gz > 65535) {
        snprintf(launch_error, sizeof launch_error, "%s: grid (%u,%u,%u) out of range", f->name, gx, gy, gz);
        fprintf(stderr, "cudaemu: %s\n", launch_error);
        return INVALID_VALUE;
    }
    if ((ll)bx * by * bz > 1024 || bx == 0 || by == 0 || bz == 0 || bz > 64) {
        snprintf(launch_error, sizeof launch_error, "%s: block (%u,%u,%u) out of range", f->name, bx, by, bz);
        fprintf(stderr, "cudaemu: %s\n", launch_error);
        return INVALID_VALUE;
    }
    if (shmem > 48 * 1024) return INVALID_VALUE;
    unsigned dims[6] = {gx, gy, gz, bx, by, bz};
    char msg[512] = {0};
    if (f->entry(dims, params, msg, sizeof msg) != 0) {
        snprintf(launch_error, sizeof launch_error, "%s: %s", f->name, msg);
        fprintf(stderr, "cudaemu: kernel failed: %s\n", launch_error);
        sticky = LAUNCH_FAILED;
    }
    return SUCCESS;
}
EXPORT int cuStreamCreate(uintptr_t* s, unsigned flags) {
    *s = 0x5eed;
    return SUCCESS;
}
EXPORT int cuStreamDestroy_v2(uintptr_t s) { return SUCCESS; }
EXPORT int cuStreamSynchronize(uintptr_t s) { return sticky; }
EXPORT int cuGetErrorString(int r, const char** s) {
    switch (r) {
    case LAUNCH_FAILED: *s = launch_error; break;
    case INVALID_VALUE: *s = launch_error[0] ? launch_error : "invalid value"; break;
    case OUT_OF_MEMORY: *s = "out of memory"; break;
    case NO_DEVICE: *s = "no CUDA-capable device is detected (EMU_NO_DEVICE)"; break;
    case INVALID_IMAGE: *s = "device kernel image is invalid"; break;
    case NOT_FOUND: *s = "named symbol not found"; break;
    default: *s = "emulator error"; break;
    }
    return SUCCESS;
}
EXPORT const char* emu_last_error(void) { return launch_error; }
// emu_reset clears a kernel failure, which a real context never forgets;
// for the emulator's own tests.
EXPORT void emu_reset(void) {
    sticky = 0;
    launch_error[0] = 0;
}
#endif

#ifdef EMU_CUBLAS
EXPORT int cublasCreate_v2(uintptr_t* h) {
    *h = 0xb1a5;
    return 0;
}
EXPORT int cublasDestroy_v2(uintptr_t h) { return 0; }
EXPORT int cublasSetStream_v2(uintptr_t h, uintptr_t s) { return 0; }
EXPORT int cublasSetMathMode(uintptr_t h, int mode) { return 0; }
EXPORT int cublasGetVersion_v2(uintptr_t h, int* v) {
    *v = 130000;
    return 0;
}

enum { R32F = 0, R16BF = 14 };
enum { STATUS_INVALID_VALUE = 7, STATUS_NOT_SUPPORTED = 15 };

static float from_bf16(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static uint16_t to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fff + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}
static float load(const void* p, int type, ll i) {
    return type == R16BF ? from_bf16(((const uint16_t*)p)[i]) : ((const float*)p)[i];
}

// gemm computes column-major C = alpha op(A) op(B) + beta C per batch, with
// float accumulation: op(A) and op(B) are first unpacked to float, op(A)
// transposed so that each C element is a dot product of two unit-stride
// rows. beta == 0 ignores C's old contents (NaN included), as cuBLAS does.
static int gemm(int ta, int tb, int m, int n, int k, float alpha, const void* A, int at, int lda, ll sa,
                const void* B, int bt, int ldb, ll sb, float beta, void* C, int ct, int ldc, ll sc, int batch) {
    if (m < 0 || n < 0 || k < 0 || batch < 0) return STATUS_INVALID_VALUE;
    if (lda < (ta ? (k > 1 ? k : 1) : (m > 1 ? m : 1))) return STATUS_INVALID_VALUE;
    if (ldb < (tb ? (n > 1 ? n : 1) : (k > 1 ? k : 1))) return STATUS_INVALID_VALUE;
    if (ldc < (m > 1 ? m : 1)) return STATUS_INVALID_VALUE;
    std::vector<float> a((size_t)m * k), b((size_t)n * k);
    for (int p = 0; p < batch; p++) {
        for (int i = 0; i < m; i++)  // a[i*k + l] = op(A)[i, l]
            for (int l = 0; l < k; l++)
                a[(size_t)i * k + l] = load(A, at, p * sa + (ta ? (ll)i * lda + l : (ll)l * lda + i));
        for (int j = 0; j < n; j++)  // b[j*k + l] = op(B)[l, j]
            for (int l = 0; l < k; l++)
                b[(size_t)j * k + l] = load(B, bt, p * sb + (tb ? (ll)l * ldb + j : (ll)j * ldb + l));
        for (int j = 0; j < n; j++)
            for (int i = 0; i < m; i++) {
                const float* x = &a[(size_t)i * k];
                const float* y = &b[(size_t)j * k];
                float acc = 0;
                for (int l = 0; l < k; l++) acc += x[l] * y[l];
                ll ci = p * sc + (ll)j * ldc + i;
                float r = alpha * acc;
                if (beta != 0) r += beta * load(C, ct, ci);
                if (ct == R16BF) ((uint16_t*)C)[ci] = to_bf16(r);
                else ((float*)C)[ci] = r;
            }
    }
    return 0;
}

EXPORT int cublasSgemmStridedBatched(uintptr_t h, int ta, int tb, int m, int n, int k, const float* alpha,
                                     const float* A, int lda, ll sa, const float* B, int ldb, ll sb,
                                     const float* beta, float* C, int ldc, ll sc, int batch) {
    return gemm(ta, tb, m, n, k, *alpha, A, R32F, lda, sa, B, R32F, ldb, sb, *beta, C, R32F, ldc, sc, batch);
}

EXPORT int cublasGemmStridedBatchedEx(uintptr_t h, int ta, int tb, int m, int n, int k, const void* alpha,
                                      const void* A, int at, int lda, ll sa, const void* B, int bt, int ldb, ll sb,
                                      const void* beta, void* C, int ct, int ldc, ll sc, int batch, int compute,
                                      int algo) {
    for (int t : {at, bt, ct})
        if (t != R32F && t != R16BF) return STATUS_NOT_SUPPORTED;
    if (compute != 68 /* CUBLAS_COMPUTE_32F */) return STATUS_NOT_SUPPORTED;
    return gemm(ta, tb, m, n, k, *(const float*)alpha, A, at, lda, sa, B, bt, ldb, sb, *(const float*)beta, C, ct,
                ldc, sc, batch);
}
#endif

#ifdef EMU_NVRTC
#ifndef EMU_DIR
#error "EMU_DIR names the folder of emu_runtime.h"
#endif

enum { NVRTC_SUCCESS = 0, NVRTC_OUT_OF_MEMORY = 1, NVRTC_INVALID_INPUT = 3, NVRTC_INVALID_PROGRAM = 4,
       NVRTC_INVALID_OPTION = 5, NVRTC_COMPILATION = 6 };

struct Program {
    std::string source, log, image;  // image: the shared object's bytes
};

EXPORT int nvrtcVersion(int* major, int* minor) {
    *major = 13;
    *minor = 0;
    return NVRTC_SUCCESS;
}
EXPORT int nvrtcCreateProgram(uintptr_t* prog, const char* src, const char* name, int nh, const char** headers,
                              const char** includeNames) {
    if (!prog || !src) return NVRTC_INVALID_INPUT;
    if (nh != 0) return NVRTC_INVALID_INPUT;  // the backend sends one self-contained unit
    Program* p = new Program;
    p->source = src;
    *prog = (uintptr_t)p;
    return NVRTC_SUCCESS;
}

static bool slurp(const std::string& path, std::string* out) {
    FILE* f = fopen(path.c_str(), "rb");
    if (!f) return false;
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) out->append(buf, n);
    fclose(f);
    return true;
}

static bool spill(const std::string& path, const std::string& s) {
    FILE* f = fopen(path.c_str(), "wb");
    if (!f) return false;
    bool ok = fwrite(s.data(), 1, s.size(), f) == s.size();
    return fclose(f) == 0 && ok;
}

// sh runs a shell command with its output appended to log; true on success.
static bool sh(const std::string& cmd, std::string* log) {
    FILE* p = popen((cmd + " 2>&1").c_str(), "r");
    if (!p) return false;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) log->append(buf, n);
    int st = pclose(p);
    return st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

// kernel_names lists the identifiers that follow the __emu_kernel__ marker
// in the preprocessed source: "__emu_kernel__ void NAME (".
static std::vector<std::string> kernel_names(const std::string& pre) {
    std::vector<std::string> names;
    const std::string marker = "__emu_kernel__";
    for (size_t at = pre.find(marker); at != std::string::npos; at = pre.find(marker, at + 1)) {
        size_t i = at + marker.size();
        auto skip = [&] { while (i < pre.size() && isspace((unsigned char)pre[i])) i++; };
        skip();
        if (pre.compare(i, 4, "void") != 0) continue;
        i += 4;
        skip();
        size_t s = i;
        while (i < pre.size() && (isalnum((unsigned char)pre[i]) || pre[i] == '_')) i++;
        std::string name = pre.substr(s, i - s);
        skip();
        if (!name.empty() && i < pre.size() && pre[i] == '(') names.push_back(name);
    }
    return names;
}

// nvrtcCompileProgram checks the options the backend passes and builds the
// program with g++ (EMU_CXX overrides; EMU_CXXFLAGS adds flags, such as
// -DEMU_UCONTEXT for the portable fiber switch): a scan pass lists the kernels, then
// each gets an exported launcher emu_kernel_NAME.
EXPORT int nvrtcCompileProgram(uintptr_t prog, int n, const char** opts) {
    Program* p = (Program*)prog;
    if (!p) return NVRTC_INVALID_PROGRAM;
    bool arch = false;
    for (int i = 0; i < n; i++) {
        if (strncmp(opts[i], "--gpu-architecture=sm_", 22) == 0 || strncmp(opts[i], "-arch=sm_", 9) == 0) arch = true;
        else if (strncmp(opts[i], "-", 1) != 0) {
            p->log = std::string("unknown option ") + opts[i];
            return NVRTC_INVALID_OPTION;
        }
    }
    if (!arch) {
        p->log = "no --gpu-architecture=sm_XX option: NVRTC would build for an old default architecture";
        return NVRTC_INVALID_OPTION;
    }
    const char* cxx = getenv("EMU_CXX") ? getenv("EMU_CXX") : "g++";
    std::string extra = getenv("EMU_CXXFLAGS") ? std::string(" ") + getenv("EMU_CXXFLAGS") + " " : " ";
    char dir[] = "/tmp/hilbert-emu-nvrtc-XXXXXX";
    if (!mkdtemp(dir)) return NVRTC_OUT_OF_MEMORY;
    std::string d = dir, src = d + "/kernels.cu", full = d + "/module.cc", pre = d + "/scan.ii", so = d + "/module.so";
    std::string inc = std::string("-I") + EMU_DIR;
    int rc = NVRTC_COMPILATION;
    std::string text;
    if (!spill(src, p->source)) goto out;
    if (!sh(std::string(cxx) + " -std=c++17 -E -P -DEMU_SCAN -x c++ " + inc + " -include emu_runtime.h " + src + " -o " + pre,
            &p->log) ||
        !slurp(pre, &text))
        goto out;
    {
        std::string unit = "#include \"emu_runtime.h\"\n#line 1 \"kernels.cu\"\n" + p->source + "\n// launchers\n";
        std::vector<std::string> names = kernel_names(text);
        if (names.empty()) {
            p->log += "no __global__ kernels found\n";
            goto out;
        }
        for (const std::string& k : names)
            unit += "extern \"C\" __attribute__((visibility(\"default\"))) int emu_kernel_" + k +
                    "(const unsigned* dims, void** params, char* msg, int msglen) { return emu::launch(&" + k +
                    ", dims, params, msg, msglen); }\n";
        if (!spill(full, unit)) goto out;
    }
    if (!sh(std::string(cxx) + " -std=c++17 -O2 -g0 -fPIC -shared -fvisibility=hidden -Wno-unknown-pragmas" + extra + inc +
                " -o " + so + " " + full,
            &p->log))
        goto out;
    p->image.clear();
    if (!slurp(so, &p->image)) goto out;
    rc = NVRTC_SUCCESS;
out:
    for (const std::string& f : {src, full, pre, so}) unlink(f.c_str());
    rmdir(dir);
    return rc;
}
EXPORT int nvrtcGetProgramLogSize(uintptr_t prog, size_t* n) {
    *n = ((Program*)prog)->log.size() + 1;
    return NVRTC_SUCCESS;
}
EXPORT int nvrtcGetProgramLog(uintptr_t prog, char* log) {
    Program* p = (Program*)prog;
    memcpy(log, p->log.c_str(), p->log.size() + 1);
    return NVRTC_SUCCESS;
}
EXPORT int nvrtcGetCUBINSize(uintptr_t prog, size_t* n) {
    Program* p = (Program*)prog;
    if (p->image.empty()) return NVRTC_INVALID_PROGRAM;
    *n = p->image.size();
    return NVRTC_SUCCESS;
}
EXPORT int nvrtcGetCUBIN(uintptr_t prog, char* out) {
    Program* p = (Program*)prog;
    memcpy(out, p->image.data(), p->image.size());
    return NVRTC_SUCCESS;
}
EXPORT int nvrtcDestroyProgram(uintptr_t* prog) {
    delete (Program*)*prog;
    *prog = 0;
    return NVRTC_SUCCESS;
}
EXPORT const char* nvrtcGetErrorString(int s) {
    switch (s) {
    case NVRTC_SUCCESS: return "NVRTC_SUCCESS";
    case NVRTC_INVALID_OPTION: return "NVRTC_ERROR_INVALID_OPTION";
    case NVRTC_COMPILATION: return "NVRTC_ERROR_COMPILATION";
    default: return "NVRTC_ERROR (emulator)";
    }
}
#endif
