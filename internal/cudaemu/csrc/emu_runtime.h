// emu_runtime.h: what CUDA C kernels need to compile as host C++ and run on
// the CPU, one thread block at a time. The fake NVRTC of emu.cc includes it
// first in every translation unit it compiles.
//
// Model: a launch runs its blocks one after another on the calling thread.
// (Threads run in index order, or the reverse with EMU_SCHEDULE=reverse.)
// Each CUDA thread of a block is a fiber (ucontext) with its own stack; a
// fiber runs until it reaches __syncthreads, a warp shuffle or its end, and
// then yields to the block scheduler. The scheduler releases a barrier when
// every live thread waits at it, from the same call site (a divergent
// barrier is reported), and a shuffle when every lane of the warp reached
// it. A warp-wide matrix instruction (mma.sync, emu_mma_m16n8k16_bf16) is
// released the same way once all 32 lanes reached the same instruction; it
// then computes the warp's product from every lane's fragments, in the
// layout of the PTX ISA. Anything else that leaves no thread runnable is a deadlock and fails
// the launch. __shared__ variables are static: one block runs at a time.
#pragma once
// EMU_RUNTIME tells shared kernel sources that they run on the emulator.
#define EMU_RUNTIME 1
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>

#include <tuple>
#include <type_traits>
#include <utility>

#define __host__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define __constant__ static
#ifdef EMU_SCAN
// The scan pass preprocesses the source and lists kernels by this marker.
#define __global__ __emu_kernel__
#else
#define __global__
#endif

struct emu_dim3 {
    unsigned x, y, z;
};
typedef emu_dim3 uint3;
typedef emu_dim3 dim3;
static emu_dim3 threadIdx, blockIdx, blockDim, gridDim;

template <typename To, typename From>
static inline To emu_bit_cast(From f) {
    static_assert(sizeof(To) == sizeof(From), "bit cast between sizes");
    To t;
    memcpy(&t, &f, sizeof t);
    return t;
}
static inline float __int_as_float(int i) { return emu_bit_cast<float>(i); }
static inline float __uint_as_float(unsigned u) { return emu_bit_cast<float>(u); }
static inline unsigned __float_as_uint(float f) { return emu_bit_cast<unsigned>(f); }
static inline int __float_as_int(float f) { return emu_bit_cast<int>(f); }
static inline int min(int a, int b) { return a < b ? a : b; }
static inline int max(int a, int b) { return a > b ? a : b; }
static inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
static inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
static inline long long min(long long a, long long b) { return a < b ? a : b; }
static inline long long max(long long a, long long b) { return a > b ? a : b; }

#if defined(__x86_64__) && !defined(EMU_UCONTEXT)
// A fiber switch that saves only what the ABI requires (callee-saved
// registers, MXCSR, x87 control word): much cheaper than swapcontext, which
// makes a system call for the signal mask on every switch.
#define EMU_FAST_SWITCH 1
extern "C" {
void emu_switch(void** save_sp, void* new_sp);
void emu_fiber_start();
__attribute__((used, visibility("hidden"))) void emu_fiber_main();
}
asm(R"(
    .text
    .globl emu_switch
    .hidden emu_switch
    .type emu_switch, @function
emu_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    subq $8, %rsp
    stmxcsr (%rsp)
    fnstcw 4(%rsp)
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    ldmxcsr (%rsp)
    fldcw 4(%rsp)
    addq $8, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size emu_switch, .-emu_switch

    .globl emu_fiber_start
    .hidden emu_fiber_start
    .type emu_fiber_start, @function
emu_fiber_start:
    call emu_fiber_main
    ud2
    .size emu_fiber_start, .-emu_fiber_start
)");
#else
#define EMU_FAST_SWITCH 0
#endif

namespace emu {

enum State { RUNNABLE, AT_BARRIER, AT_SHUFFLE, AT_WARP_OP, DONE };

struct Thread;
// WarpOp computes a warp-wide instruction from the 32 lanes' operands.
typedef void (*WarpOp)(Thread* lanes);

struct Thread {
#if EMU_FAST_SWITCH
    void* sp;  // saved stack pointer while suspended
#else
    ucontext_t ctx;
#endif
    State state;
    unsigned tid;
    const void* site;        // barrier call site
    unsigned long long val;  // shuffle: this lane's value
    unsigned mask;           // shuffle: member mask
    int src;                 // shuffle: source lane
    unsigned long long out;  // shuffle: received value
    WarpOp op;               // warp op: what to compute
    const void* in;          // warp op: this lane's operands
    void* res;               // warp op: this lane's results
};

const size_t kStack = 256 << 10;
const unsigned kMaxThreads = 1024;

static Thread threads[kMaxThreads];
static char* stacks;  // kMaxThreads * kStack, mapped on first use
static Thread* current;
static unsigned nthreads;
static void (*body)(void*);
static void* body_arg;
static char error[512];

static void fail(const char* fmt, unsigned a = 0, unsigned b = 0) {
    if (!error[0]) snprintf(error, sizeof error, fmt, a, b);
}

#if EMU_FAST_SWITCH
static void* scheduler_sp;

// start prepares thread t to run fiber_main on its stack: the frame that
// emu_switch pops (MXCSR and x87 control word, six callee-saved registers,
// then the return address emu_fiber_start).
static void start(Thread& t, char* stack, size_t size) {
    uintptr_t top = ((uintptr_t)(stack + size) & ~(uintptr_t)15) - 16;
    void** sp = (void**)top;
    *--sp = (void*)&emu_fiber_start;
    for (int i = 0; i < 6; i++) *--sp = nullptr;
    uint32_t ctl[2] = {0x1f80, 0x037f};  // default MXCSR, x87 control word
    --sp;
    memcpy(sp, ctl, 8);
    t.sp = sp;
}
static void resume(Thread& t) { emu_switch(&scheduler_sp, t.sp); }
static void yield(State s) {
    current->state = s;
    emu_switch(&current->sp, scheduler_sp);
}
#else
static ucontext_t scheduler;

static void entry() {
    body(body_arg);
    current->state = DONE;
    // uc_link returns to the scheduler.
}
static void start(Thread& t, char* stack, size_t size) {
    getcontext(&t.ctx);
    t.ctx.uc_stack.ss_sp = stack;
    t.ctx.uc_stack.ss_size = size;
    t.ctx.uc_link = &scheduler;
    makecontext(&t.ctx, entry, 0);
}
static void resume(Thread& t) { swapcontext(&scheduler, &t.ctx); }
static void yield(State s) {
    current->state = s;
    swapcontext(&current->ctx, &scheduler);
}
#endif

static void set_thread_index(unsigned tid) {
    threadIdx.x = tid % blockDim.x;
    threadIdx.y = (tid / blockDim.x) % blockDim.y;
    threadIdx.z = tid / (blockDim.x * blockDim.y);
}

// release_warps completes every shuffle whose warp has all its lanes (the
// ones the mask names) waiting; it reports whether any was completed.
static bool release_warps() {
    bool any = false;
    for (unsigned w = 0; w * 32 < nthreads; w++) {
        unsigned lanes = nthreads - w * 32 < 32 ? nthreads - w * 32 : 32;
        Thread* t = threads + w * 32;
        unsigned waiting = 0;
        for (unsigned l = 0; l < lanes; l++)
            if (t[l].state == AT_SHUFFLE) waiting |= 1u << l;
        if (!waiting) continue;
        unsigned mask = 0;
        for (unsigned l = 0; l < lanes; l++)
            if (waiting >> l & 1) mask = t[l].mask;
        if ((waiting & mask) != mask) continue;  // lanes still on their way
        if (lanes < 32 && (mask >> lanes) != 0) {
            fail("warp shuffle with mask %#x in a warp of %u lanes", mask, lanes);
            return false;
        }
        for (unsigned l = 0; l < lanes; l++) {
            if (!(mask >> l & 1)) continue;
            if (t[l].mask != mask) {
                fail("lanes of one warp shuffle with different masks (%#x, %#x)", mask, t[l].mask);
                return false;
            }
            int s = t[l].src;
            t[l].out = (s >= 0 && (unsigned)s < lanes && (mask >> s & 1)) ? t[s].val : t[l].val;
        }
        for (unsigned l = 0; l < lanes; l++)
            if (mask >> l & 1) t[l].state = RUNNABLE;
        any = true;
    }
    return any;
}

// release_warp_ops runs every warp-wide instruction that all 32 lanes of a
// warp reached; lanes of one warp at different instructions, or a warp of
// fewer than 32 lanes, fail the launch.
static bool release_warp_ops() {
    bool any = false;
    for (unsigned w = 0; w * 32 < nthreads; w++) {
        unsigned lanes = nthreads - w * 32 < 32 ? nthreads - w * 32 : 32;
        Thread* t = threads + w * 32;
        unsigned waiting = 0;
        WarpOp op = nullptr;
        for (unsigned l = 0; l < lanes; l++)
            if (t[l].state == AT_WARP_OP) {
                waiting++;
                if (op == nullptr) op = t[l].op;
                else if (t[l].op != op) {
                    fail("lanes of warp %u wait at different warp-wide matrix instructions", w);
                    return false;
                }
            }
        if (waiting == 0) continue;
        if (lanes < 32) {
            fail("warp-wide matrix instruction in a warp of %u lanes (needs 32)", lanes);
            return false;
        }
        if (waiting < 32) continue;  // lanes still on their way
        op(t);
        for (unsigned l = 0; l < 32; l++) t[l].state = RUNNABLE;
        any = true;
    }
    return any;
}

// reverse runs the threads of each scheduling pass last to first
// (EMU_SCHEDULE=reverse, read at each launch). A kernel whose threads race
// between two barriers (one reads what another writes) gives different
// results under the two orders, which the tests compare.
static bool reverse;

// run_block runs every thread of the current block to its end.
static bool run_block() {
    for (unsigned i = 0; i < nthreads; i++) {
        Thread& t = threads[i];
        t.tid = i;
        t.state = RUNNABLE;
        start(t, stacks + (size_t)i * kStack, kStack);
    }
    for (;;) {
        bool ran = false;
        for (unsigned n = 0; n < nthreads; n++) {
            unsigned i = reverse ? nthreads - 1 - n : n;
            Thread& t = threads[i];
            if (t.state != RUNNABLE) continue;
            current = &t;
            set_thread_index(i);
            resume(t);
            ran = true;
            if (error[0]) return false;
        }
        if (ran) continue;
        if (release_warps()) continue;
        if (release_warp_ops()) continue;
        if (error[0]) return false;
        unsigned live = 0, barrier = 0, shuffle = 0;
        const void* site = nullptr;
        for (unsigned i = 0; i < nthreads; i++) {
            Thread& t = threads[i];
            if (t.state == DONE) continue;
            live++;
            if (t.state == AT_SHUFFLE || t.state == AT_WARP_OP) shuffle++;
            if (t.state == AT_BARRIER) {
                barrier++;
                if (site == nullptr) site = t.site;
                else if (t.site != site) {
                    fail("threads wait at different __syncthreads calls (thread %u and an earlier one): divergent barrier", i);
                    return false;
                }
            }
        }
        if (live == 0) return true;
        if (shuffle == 0 && barrier == live) {
            for (unsigned i = 0; i < nthreads; i++)
                if (threads[i].state == AT_BARRIER) threads[i].state = RUNNABLE;
            continue;
        }
        fail("deadlock: %u threads wait at a barrier and %u at a warp shuffle that can never complete", barrier, shuffle);
        return false;
    }
}

// run executes fn(arg) as the body of every thread of a grid. dims holds
// grid x, y, z and block x, y, z. It returns 0, or 1 with msg filled.
static int run(const unsigned* dims, void (*fn)(void*), void* arg, char* msg, int msglen) {
    unsigned bx = dims[3], by = dims[4], bz = dims[5];
    unsigned long long n = (unsigned long long)bx * by * bz;
    if (n == 0 || n > kMaxThreads) {
        snprintf(msg, msglen, "block of %llu threads (want 1 to %u)", n, kMaxThreads);
        return 1;
    }
    if (stacks == nullptr) {
        void* p = mmap(nullptr, (size_t)kMaxThreads * kStack, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED) {
            snprintf(msg, msglen, "cannot map thread stacks");
            return 1;
        }
        stacks = (char*)p;
    }
    error[0] = 0;
    const char* sched = getenv("EMU_SCHEDULE");
    reverse = sched != nullptr && strcmp(sched, "reverse") == 0;
    body = fn;
    body_arg = arg;
    nthreads = (unsigned)n;
    gridDim = {dims[0], dims[1], dims[2]};
    blockDim = {bx, by, bz};
    for (unsigned z = 0; z < dims[2]; z++)
        for (unsigned y = 0; y < dims[1]; y++)
            for (unsigned x = 0; x < dims[0]; x++) {
                blockIdx = {x, y, z};
                if (!run_block()) {
                    snprintf(msg, msglen, "block (%u,%u,%u): %s", x, y, z, error);
                    return 1;
                }
            }
    return 0;
}

// launch unpacks cuLaunchKernel's parameter array into the kernel's typed
// arguments and runs the grid.
template <typename... A, size_t... I>
static int launch_impl(void (*k)(A...), const unsigned* dims, void** params, char* msg, int msglen,
                       std::index_sequence<I...>) {
    std::tuple<std::decay_t<A>...> args{*(std::decay_t<A>*)params[I]...};
    struct Call {
        void (*k)(A...);
        std::tuple<std::decay_t<A>...>* args;
    } call{k, &args};
    return run(
        dims, [](void* p) { auto* c = (Call*)p; std::apply(c->k, *c->args); }, &call, msg, msglen);
}

template <typename... A>
static int launch(void (*k)(A...), const unsigned* dims, void** params, char* msg, int msglen) {
    return launch_impl(k, dims, params, msg, msglen, std::index_sequence_for<A...>{});
}

}  // namespace emu

#if EMU_FAST_SWITCH
// emu_fiber_main is where a new fiber starts; it never returns: after the
// body it parks the thread as DONE and switches to the scheduler for good.
void emu_fiber_main() {
    emu::body(emu::body_arg);
    emu::yield(emu::DONE);
    __builtin_unreachable();
}
#endif

// __syncthreads must not be inlined: its return address names the call site.
__attribute__((noinline)) static void __syncthreads() {
    emu::current->site = __builtin_return_address(0);
    emu::yield(emu::AT_BARRIER);
}

template <typename T>
static T emu_shuffle(unsigned mask, T v, int src) {
    static_assert(sizeof(T) <= 8, "shuffle of more than 8 bytes");
    emu::Thread* t = emu::current;
    t->val = 0;
    memcpy(&t->val, &v, sizeof v);
    t->mask = mask;
    t->src = src;
    emu::yield(emu::AT_SHUFFLE);
    T r;
    memcpy(&r, &t->out, sizeof r);
    return r;
}

static inline unsigned emu_lane() { return emu::current->tid & 31; }

template <typename T>
static T __shfl_xor_sync(unsigned mask, T v, int laneMask, int width = 32) {
    unsigned lane = emu_lane();
    return emu_shuffle(mask, v, (int)((lane & ~(unsigned)(width - 1)) | ((lane ^ laneMask) & (width - 1))));
}
template <typename T>
static T __shfl_sync(unsigned mask, T v, int srcLane, int width = 32) {
    unsigned lane = emu_lane();
    return emu_shuffle(mask, v, (int)((lane & ~(unsigned)(width - 1)) + (srcLane & (width - 1))));
}
template <typename T>
static T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32) {
    unsigned lane = emu_lane(), seg = lane & (width - 1);
    return emu_shuffle(mask, v, (int)(seg + delta < (unsigned)width ? lane + delta : lane));
}

// emu_bf16 widens a bf16 (the upper half of a float) to float.
static inline float emu_bf16(unsigned short h) { return emu_bit_cast<float>((unsigned)h << 16); }

// emu_mma_bf16_in holds one lane's operands of mma.sync.aligned.m16n8k16.row.col
// .f32.bf16.bf16.f32: four A registers and two B registers of two bf16
// each (the lower half holds the lower column or row index) and four f32
// of C.
struct emu_mma_bf16_in {
    unsigned a[4], b[2];
    float c[4];
};

// emu_mma_bf16_op computes D = A B + C for the warp. Fragment layout (PTX
// ISA, "Matrix Fragments for mma.m16n8k16" with .bf16): with g = lane >> 2
// and q = lane % 4,
//   A (16x16, row): a0 (g, 2q..2q+1), a1 (g+8, 2q..), a2 (g, 2q+8..), a3 (g+8, 2q+8..)
//   B (16x8, col):  b0 (k 2q..2q+1, n g), b1 (k 2q+8..2q+9, n g)
//   C, D (16x8):    c0,c1 (g, 2q..2q+1), c2,c3 (g+8, 2q..2q+1)
// Products are exact in float (bf16 has 8 significant bits) and summed in
// k order, then C is added: the hardware's order within a k-step is not
// documented, so kernels must tolerate float rounding in either.
static void emu_mma_bf16_op(emu::Thread* t) {
    float A[16][16], B[16][8], C[16][8];
    for (int l = 0; l < 32; l++) {
        const emu_mma_bf16_in* in = (const emu_mma_bf16_in*)t[l].in;
        int g = l >> 2, q = l & 3;
        for (int r = 0; r < 4; r++) {
            int row = g + (r & 1) * 8, col = 2 * q + (r >> 1) * 8;
            A[row][col] = emu_bf16((unsigned short)(in->a[r] & 0xffff));
            A[row][col + 1] = emu_bf16((unsigned short)(in->a[r] >> 16));
        }
        for (int r = 0; r < 2; r++) {
            int k = 2 * q + r * 8;
            B[k][g] = emu_bf16((unsigned short)(in->b[r] & 0xffff));
            B[k + 1][g] = emu_bf16((unsigned short)(in->b[r] >> 16));
        }
        for (int r = 0; r < 4; r++) C[g + (r >> 1) * 8][2 * q + (r & 1)] = in->c[r];
    }
    for (int l = 0; l < 32; l++) {
        float* d = (float*)t[l].res;
        int g = l >> 2, q = l & 3;
        for (int r = 0; r < 4; r++) {
            int row = g + (r >> 1) * 8, col = 2 * q + (r & 1);
            float acc = 0.0f;
            for (int k = 0; k < 16; k++) acc += A[row][k] * B[k][col];
            d[r] = acc + C[row][col];
        }
    }
}

// emu_mma_m16n8k16_bf16 is mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16
// .f32 {d0..d3}, {a0..a3}, {b0, b1}, {c0..c3}: every lane of the warp must
// reach it. d may alias c.
static void emu_mma_m16n8k16_bf16(float* d, const unsigned* a, const unsigned* b, const float* c) {
    emu_mma_bf16_in in;
    memcpy(in.a, a, sizeof in.a);
    memcpy(in.b, b, sizeof in.b);
    memcpy(in.c, c, sizeof in.c);
    float out[4];
    emu::Thread* t = emu::current;
    t->op = emu_mma_bf16_op;
    t->in = &in;
    t->res = out;
    emu::yield(emu::AT_WARP_OP);
    memcpy(d, out, sizeof out);
}

// One fiber runs at a time, so atomics are plain read-modify-writes.
template <typename T>
static T atomicAdd(T* p, T v) {
    T old = *p;
    *p = old + v;
    return old;
}
static inline float atomicMax(float* p, float v) {
    float old = *p;
    if (v > old) *p = v;
    return old;
}
