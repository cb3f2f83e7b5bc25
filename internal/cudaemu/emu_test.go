package cudaemu

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"github.com/ebitengine/purego"
)

// The emulator's own tests: small kernels written for the purpose, compiled
// by the fake NVRTC and launched through the fake driver, check the
// execution model that the backend tests rely on (thread and block
// indices, barriers, shuffles, argument passing) and that broken kernels
// fail with a message instead of passing or hanging.

// testKernels is CUDA C as NVRTC would get it.
const testKernels = `
extern "C" __global__ void t_index(int* out) {
    int tid = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    int bid = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    int nt = blockDim.x * blockDim.y * blockDim.z;
    out[bid * nt + tid] = bid * 10000 + tid;
}

// Reverses each block's slice through shared memory: wrong without the barrier.
extern "C" __global__ void t_reverse(float* x) {
    __shared__ float s[256];
    int i = threadIdx.x, o = blockIdx.x * blockDim.x;
    s[i] = x[o + i];
    __syncthreads();
    x[o + i] = s[blockDim.x - 1 - i];
}

// Tree sum over shared memory with a barrier per level, repeated so that a
// thread overtaking another would read a stale partial sum.
extern "C" __global__ void t_tree(float* out, const float* x) {
    __shared__ float s[128];
    float total = 0;
    for (int rep = 0; rep < 3; rep++) {
        s[threadIdx.x] = x[threadIdx.x] * (rep + 1);
        __syncthreads();
        for (int h = blockDim.x / 2; h > 0; h >>= 1) {
            if (threadIdx.x < h) s[threadIdx.x] += s[threadIdx.x + h];
            __syncthreads();
        }
        total += s[0];
        __syncthreads();
    }
    out[threadIdx.x] = total;
}

extern "C" __global__ void t_shuffle(float* out, double* outd) {
    float v = threadIdx.x;
    out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, v, 5);
    out[64 + threadIdx.x] = __shfl_down_sync(0xffffffffu, v, 3);
    out[128 + threadIdx.x] = __shfl_sync(0xffffffffu, v, 7);
    outd[threadIdx.x] = __shfl_xor_sync(0xffffffffu, 1e300 + (double)threadIdx.x * 1e285, 1);
}

// Mixed parameters: more than the registers hold, so some go on the stack.
extern "C" __global__ void t_args(double* out, char c, int i, long long l, float f, double d,
                                  const float* p, unsigned short h, float f2, long long l2) {
    out[0] = c; out[1] = i; out[2] = (double)l; out[3] = f; out[4] = d;
    out[5] = p[1]; out[6] = h; out[7] = f2; out[8] = (double)l2;
}

// A race: each thread reads its neighbour's shared slot with no barrier
// after the writes.
extern "C" __global__ void t_racy(float* x) {
    __shared__ float s[64];
    s[threadIdx.x] = x[threadIdx.x];
    x[threadIdx.x] = s[(threadIdx.x + 1) % blockDim.x];
}

// Which fiber switch the module was built with (1: x86-64 assembly).
extern "C" __global__ void t_switch(int* out) { out[0] = EMU_FAST_SWITCH; }

// One m16n8k16 bf16 product per warp: lane l of warp w passes its
// fragment registers a[w][l][0..3], b[w][l][0..1], c[w][l][0..3] as given
// and writes its d registers, so the test alone decides the layout.
extern "C" __global__ void t_mma(float* d, const unsigned* a, const unsigned* b, const float* c) {
    int t = threadIdx.x;
    float r[4];
    emu_mma_m16n8k16_bf16(r, a + 4 * t, b + 2 * t, c + 4 * t);
    for (int i = 0; i < 4; i++) d[4 * t + i] = r[i];
}

// Half the warp at a warp-wide matrix instruction never completes.
extern "C" __global__ void t_mma_divergent(float* x) {
    unsigned a[4] = {0, 0, 0, 0}, b[2] = {0, 0};
    float c[4] = {0, 0, 0, 0};
    if (threadIdx.x < 16) emu_mma_m16n8k16_bf16(c, a, b, c);
    x[threadIdx.x] = c[0];
}

extern "C" __global__ void t_deadlock(float* x) {
    if (threadIdx.x < 16) x[threadIdx.x] = __shfl_xor_sync(0xffffffffu, 1.0f, 1);
}

extern "C" __global__ void t_divergent(float* x) {
    if (threadIdx.x & 1) {
        __syncthreads();
        x[threadIdx.x] = 1;
    } else {
        __syncthreads();
        x[threadIdx.x] = 2;
    }
}
`

// emu is the emulator's C API as the tests call it.
type emu struct {
	cuInit            func(flags uint32) int32
	cuMemAlloc        func(p *uint64, n uint64) int32
	cuMemcpyHtoD      func(dst uint64, src unsafe.Pointer, n uint64, s uintptr) int32
	cuMemcpyDtoH      func(dst unsafe.Pointer, src uint64, n uint64, s uintptr) int32
	cuModuleLoadData  func(mod *uintptr, image unsafe.Pointer) int32
	cuModuleGetFunc   func(fn *uintptr, mod uintptr, name string) int32
	cuLaunchKernel    func(fn uintptr, gx, gy, gz, bx, by, bz, shmem uint32, stream uintptr, params, extra unsafe.Pointer) int32
	cuStreamSync      func(s uintptr) int32
	lastError         func() string
	reset             func()
	nvrtcCreate       func(prog *uintptr, src, name string, n int32, h, inc unsafe.Pointer) int32
	nvrtcCompile      func(prog uintptr, n int32, opts unsafe.Pointer) int32
	nvrtcCubinSize    func(prog uintptr, n *uint64) int32
	nvrtcCubin        func(prog uintptr, out unsafe.Pointer) int32
	nvrtcLogSize      func(prog uintptr, n *uint64) int32
	nvrtcLog          func(prog uintptr, out unsafe.Pointer) int32
	nvrtcDestroy      func(prog *uintptr) int32
	cublasSgemmStride func(h uintptr, ta, tb, m, n, k int32, alpha *float32, a uint64, lda int32, sa int64,
		b uint64, ldb int32, sb int64, beta *float32, c uint64, ldc int32, sc int64, batch int32) int32
}

func open(t *testing.T) *emu {
	t.Helper()
	dir, err := Dir()
	if err == ErrNoCompiler {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	lib := func(name string) uintptr {
		h, err := purego.Dlopen(filepath.Join(dir, name), purego.RTLD_NOW|purego.RTLD_LOCAL)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	cu, nv, bl := lib("libcuda.so.1"), lib("libnvrtc.so.13"), lib("libcublas.so.13")
	e := &emu{}
	for _, f := range []struct {
		lib  uintptr
		fn   any
		name string
	}{
		{cu, &e.cuInit, "cuInit"}, {cu, &e.cuMemAlloc, "cuMemAlloc_v2"},
		{cu, &e.cuMemcpyHtoD, "cuMemcpyHtoDAsync_v2"}, {cu, &e.cuMemcpyDtoH, "cuMemcpyDtoHAsync_v2"},
		{cu, &e.cuModuleLoadData, "cuModuleLoadData"}, {cu, &e.cuModuleGetFunc, "cuModuleGetFunction"},
		{cu, &e.cuLaunchKernel, "cuLaunchKernel"}, {cu, &e.cuStreamSync, "cuStreamSynchronize"},
		{cu, &e.lastError, "emu_last_error"}, {cu, &e.reset, "emu_reset"},
		{nv, &e.nvrtcCreate, "nvrtcCreateProgram"}, {nv, &e.nvrtcCompile, "nvrtcCompileProgram"},
		{nv, &e.nvrtcCubinSize, "nvrtcGetCUBINSize"}, {nv, &e.nvrtcCubin, "nvrtcGetCUBIN"},
		{nv, &e.nvrtcLogSize, "nvrtcGetProgramLogSize"}, {nv, &e.nvrtcLog, "nvrtcGetProgramLog"},
		{nv, &e.nvrtcDestroy, "nvrtcDestroyProgram"}, {bl, &e.cublasSgemmStride, "cublasSgemmStridedBatched"},
	} {
		purego.RegisterLibFunc(f.fn, f.lib, f.name)
	}
	if r := e.cuInit(0); r != 0 {
		t.Fatalf("cuInit = %d", r)
	}
	return e
}

// compile runs the fake NVRTC; it returns the image, or nil and the log.
func (e *emu) compile(t *testing.T, src string, opts ...string) ([]byte, string) {
	t.Helper()
	var prog uintptr
	if r := e.nvrtcCreate(&prog, src, "test.cu", 0, nil, nil); r != 0 {
		t.Fatalf("nvrtcCreateProgram = %d", r)
	}
	defer e.nvrtcDestroy(&prog)
	cstrs := make([][]byte, len(opts))
	ptrs := make([]uintptr, len(opts)+1)
	for i, o := range opts {
		cstrs[i] = append([]byte(o), 0)
		ptrs[i] = uintptr(unsafe.Pointer(&cstrs[i][0]))
	}
	r := e.nvrtcCompile(prog, int32(len(opts)), unsafe.Pointer(&ptrs[0]))
	var n uint64
	e.nvrtcLogSize(prog, &n)
	log := make([]byte, n)
	e.nvrtcLog(prog, unsafe.Pointer(&log[0]))
	if r != 0 {
		return nil, string(log)
	}
	e.nvrtcCubinSize(prog, &n)
	img := make([]byte, n)
	e.nvrtcCubin(prog, unsafe.Pointer(&img[0]))
	return img, string(log)
}

// testImages holds testKernels compiled, by EMU_CXXFLAGS.
var testImages = map[string][]byte{}

// module compiles testKernels (once per process and EMU_CXXFLAGS) and
// loads it.
func (e *emu) module(t *testing.T) uintptr {
	t.Helper()
	flags := os.Getenv("EMU_CXXFLAGS")
	img := testImages[flags]
	if img == nil {
		var log string
		img, log = e.compile(t, testKernels, "--gpu-architecture=sm_90", "--std=c++17")
		if img == nil {
			t.Fatalf("compile: %s", log)
		}
		testImages[flags] = img
	}
	var mod uintptr
	if r := e.cuModuleLoadData(&mod, unsafe.Pointer(&img[0])); r != 0 {
		t.Fatalf("cuModuleLoadData = %d", r)
	}
	return mod
}

func (e *emu) alloc(t *testing.T, bytes int) uint64 {
	t.Helper()
	var p uint64
	if r := e.cuMemAlloc(&p, uint64(bytes)); r != 0 {
		t.Fatalf("cuMemAlloc = %d", r)
	}
	return p
}

// launch runs kernel name with 8-byte parameter slots and synchronizes;
// it returns the launch or synchronize status.
func (e *emu) launch(t *testing.T, mod uintptr, name string, grid, block [3]uint32, args ...uint64) int32 {
	t.Helper()
	var fn uintptr
	if r := e.cuModuleGetFunc(&fn, mod, name); r != 0 {
		t.Fatalf("cuModuleGetFunction(%s) = %d", name, r)
	}
	vals := make([]uint64, len(args)+1)
	copy(vals, args)
	ptrs := make([]unsafe.Pointer, len(args)+1)
	for i := range args {
		ptrs[i] = unsafe.Pointer(&vals[i])
	}
	if r := e.cuLaunchKernel(fn, grid[0], grid[1], grid[2], block[0], block[1], block[2], 0, 0, unsafe.Pointer(&ptrs[0]), nil); r != 0 {
		return r
	}
	return e.cuStreamSync(0)
}

func getFloats(e *emu, p uint64, n int) []float32 {
	x := make([]float32, n)
	e.cuMemcpyDtoH(unsafe.Pointer(&x[0]), p, uint64(4*n), 0)
	return x
}

func putFloats(e *emu, p uint64, x []float32) {
	e.cuMemcpyHtoD(p, unsafe.Pointer(&x[0]), uint64(4*len(x)), 0)
}

func TestIndices(t *testing.T) {
	e := open(t)
	mod := e.module(t)
	grid, block := [3]uint32{3, 2, 2}, [3]uint32{4, 3, 2}
	n := 12 * 24
	out := e.alloc(t, 4*n)
	if r := e.launch(t, mod, "t_index", grid, block, out); r != 0 {
		t.Fatalf("launch = %d: %s", r, e.lastError())
	}
	got := make([]int32, n)
	e.cuMemcpyDtoH(unsafe.Pointer(&got[0]), out, uint64(4*n), 0)
	for i, v := range got {
		if want := int32(i/24*10000 + i%24); v != want {
			t.Fatalf("out[%d] = %d, want %d", i, v, want)
		}
	}
}

func TestBarriers(t *testing.T) {
	e := open(t)
	checkBarriers(t, e, e.module(t))
}

func checkBarriers(t *testing.T, e *emu, mod uintptr) {
	x := make([]float32, 3*256)
	for i := range x {
		x[i] = float32(i)
	}
	p := e.alloc(t, 4*len(x))
	putFloats(e, p, x)
	if r := e.launch(t, mod, "t_reverse", [3]uint32{3, 1, 1}, [3]uint32{256, 1, 1}, p); r != 0 {
		t.Fatalf("t_reverse: %d %s", r, e.lastError())
	}
	for i, v := range getFloats(e, p, len(x)) {
		if want := float32(i/256*256 + 255 - i%256); v != want {
			t.Fatalf("reverse[%d] = %v, want %v", i, v, want)
		}
	}

	in := make([]float32, 128)
	var sum float32
	for i := range in {
		in[i] = float32(i%7) - 2
		sum += in[i]
	}
	ip, op := e.alloc(t, 4*128), e.alloc(t, 4*128)
	putFloats(e, ip, in)
	if r := e.launch(t, mod, "t_tree", [3]uint32{1, 1, 1}, [3]uint32{128, 1, 1}, op, ip); r != 0 {
		t.Fatalf("t_tree: %d %s", r, e.lastError())
	}
	for i, v := range getFloats(e, op, 128) {
		if v != 6*sum {
			t.Fatalf("tree sum at thread %d = %v, want %v", i, v, 6*sum)
		}
	}
}

func TestShuffles(t *testing.T) {
	e := open(t)
	checkShuffles(t, e, e.module(t))
}

func checkShuffles(t *testing.T, e *emu, mod uintptr) {
	out, outd := e.alloc(t, 4*192), e.alloc(t, 8*64)
	if r := e.launch(t, mod, "t_shuffle", [3]uint32{1, 1, 1}, [3]uint32{64, 1, 1}, out, outd); r != 0 {
		t.Fatalf("t_shuffle: %d %s", r, e.lastError())
	}
	got := getFloats(e, out, 192)
	d := make([]float64, 64)
	e.cuMemcpyDtoH(unsafe.Pointer(&d[0]), outd, 8*64, 0)
	for l := range 64 {
		down := l + 3
		if l%32+3 >= 32 {
			down = l // out of the warp: own value
		}
		want := []float32{float32(l ^ 5), float32(down), float32(l/32*32 + 7)}
		for k, w := range want {
			if got[64*k+l] != w {
				t.Errorf("shuffle %d, lane %d: got %v, want %v", k, l, got[64*k+l], w)
			}
		}
		if wd := 1e300 + float64(l^1)*1e285; d[l] != wd {
			t.Errorf("double xor shuffle, lane %d: got %v, want %v", l, d[l], wd)
		}
	}
}

func TestArguments(t *testing.T) {
	e := open(t)
	mod := e.module(t)
	out, src := e.alloc(t, 8*9), e.alloc(t, 8)
	putFloats(e, src, []float32{0, 2.5})
	if r := e.launch(t, mod, "t_args", [3]uint32{1, 1, 1}, [3]uint32{1, 1, 1},
		out, 0xf9 /* int8 -7 */, 0xfffe1dc0 /* int32 -123456 */, uint64(1)<<40+3, uint64(math.Float32bits(-1.5)),
		math.Float64bits(1e-300), src, 65535, uint64(math.Float32bits(3.25)), uint64(1<<62)); r != 0 {
		t.Fatalf("t_args: %d %s", r, e.lastError())
	}
	got := make([]float64, 9)
	e.cuMemcpyDtoH(unsafe.Pointer(&got[0]), out, 8*9, 0)
	want := []float64{-7, -123456, 1<<40 + 3, -1.5, 1e-300, 2.5, 65535, 3.25, 1 << 62}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("argument %d: got %v, want %v", i, got[i], want[i])
		}
	}
}

func TestFreshMemoryIsNaN(t *testing.T) {
	e := open(t)
	p := e.alloc(t, 4*10)
	for i, v := range getFloats(e, p, 10) {
		if v == v {
			t.Fatalf("fresh memory [%d] = %v, want NaN", i, v)
		}
	}
}

// TestBrokenKernelsFail: a shuffle half the warp never reaches and threads
// split across two barriers fail the launch with the reason, and the
// failure is sticky until reset, as a real context's is.
func TestBrokenKernelsFail(t *testing.T) {
	e := open(t)
	mod := e.module(t)
	defer e.reset()
	p := e.alloc(t, 4*64)
	for _, c := range []struct{ kernel, want string }{
		{"t_deadlock", "deadlock"},
		{"t_divergent", "divergent barrier"},
		{"t_mma_divergent", "deadlock"},
	} {
		e.reset()
		r := e.launch(t, mod, c.kernel, [3]uint32{1, 1, 1}, [3]uint32{32, 1, 1}, p)
		if r != 719 || !strings.Contains(e.lastError(), c.want) || !strings.Contains(e.lastError(), c.kernel) {
			t.Errorf("%s: status %d, error %q; want 719 and %q", c.kernel, r, e.lastError(), c.want)
		}
		if r2 := e.launch(t, mod, "t_index", [3]uint32{1, 1, 1}, [3]uint32{1, 1, 1}, p); r2 != 719 {
			t.Errorf("launch after %s: status %d, want the sticky 719", c.kernel, r2)
		}
	}
}

func TestCompileErrorsAndOptions(t *testing.T) {
	e := open(t)
	if img, log := e.compile(t, "extern \"C\" __global__ void k(float* x) {\n  x[0] = undefined_name;\n}\n", "--gpu-architecture=sm_90"); img != nil ||
		!strings.Contains(log, "undefined_name") || !strings.Contains(log, "kernels.cu:2") {
		t.Errorf("compile error log %q should name the identifier and kernels.cu:2", log)
	}
	if img, log := e.compile(t, testKernels); img != nil || !strings.Contains(log, "gpu-architecture") {
		t.Errorf("compile without an architecture: log %q", log)
	}
}

// TestGemm checks the emulated cuBLAS's column-major convention on a case
// small enough to write out: C = A B with A 2x3, B 3x2 (column-major).
func TestGemm(t *testing.T) {
	e := open(t)
	a, b, c := e.alloc(t, 4*6), e.alloc(t, 4*6), e.alloc(t, 4*4)
	putFloats(e, a, []float32{1, 4, 2, 5, 3, 6}) // [[1 2 3] [4 5 6]]
	putFloats(e, b, []float32{1, 0, 2, 0, 1, 3}) // [[1 0] [0 1] [2 3]]
	putFloats(e, c, []float32{1, 1, 1, 1})
	alpha, beta := float32(1), float32(0.5)
	if r := e.cublasSgemmStride(1, 0, 0, 2, 2, 3, &alpha, a, 2, 0, b, 3, 0, &beta, c, 2, 0, 1); r != 0 {
		t.Fatalf("sgemm = %d", r)
	}
	want := []float32{7.5, 16.5, 11.5, 23.5} // A B = [[7 11] [16 23]], + 0.5
	for i, v := range getFloats(e, c, 4) {
		if v != want[i] {
			t.Errorf("C[%d] = %v, want %v", i, v, want[i])
		}
	}
}

// TestPortableFiberSwitch builds the kernels with -DEMU_UCONTEXT, the
// swapcontext fibers used off x86-64, and runs the barrier and shuffle
// checks on them.
func TestPortableFiberSwitch(t *testing.T) {
	e := open(t)
	for _, c := range []struct {
		flags string
		want  int32
	}{{"-DEMU_UCONTEXT", 0}, {"", fastSwitch}} {
		t.Setenv("EMU_CXXFLAGS", c.flags)
		mod := e.module(t)
		out := e.alloc(t, 4)
		if r := e.launch(t, mod, "t_switch", [3]uint32{1, 1, 1}, [3]uint32{1, 1, 1}, out); r != 0 {
			t.Fatalf("t_switch: %d %s", r, e.lastError())
		}
		var got int32
		e.cuMemcpyDtoH(unsafe.Pointer(&got), out, 4, 0)
		if got != c.want {
			t.Fatalf("EMU_CXXFLAGS=%q: EMU_FAST_SWITCH = %d, want %d", c.flags, got, c.want)
		}
		checkBarriers(t, e, mod)
		checkShuffles(t, e, mod)
	}
}

// TestReverseScheduleExposesRaces: a kernel that races between barriers
// gives different results in the forward and the reverse thread order
// (EMU_SCHEDULE=reverse), which is how the backend's tests look for races.
func TestReverseScheduleExposesRaces(t *testing.T) {
	e := open(t)
	mod := e.module(t)
	run := func(schedule string) []float32 {
		t.Setenv("EMU_SCHEDULE", schedule)
		x := make([]float32, 64)
		for i := range x {
			x[i] = float32(i + 1)
		}
		p := e.alloc(t, 4*64)
		putFloats(e, p, x)
		if r := e.launch(t, mod, "t_racy", [3]uint32{1, 1, 1}, [3]uint32{64, 1, 1}, p); r != 0 {
			t.Fatalf("t_racy: %d %s", r, e.lastError())
		}
		return getFloats(e, p, 64)
	}
	fwd, rev := run(""), run("reverse")
	differ := 0
	for i := range fwd {
		if fwd[i] != rev[i] {
			differ++
		}
	}
	if differ == 0 {
		t.Fatalf("the racy kernel gave the same result in both orders: %v", fwd)
	}
	// Reversed, every thread but the last reads a slot already written.
	for i := 0; i < 63; i++ {
		if rev[i] != float32(i+2) {
			t.Fatalf("reverse order: x[%d] = %v, want %v", i, rev[i], i+2)
		}
	}
}

// bf16Bits rounds x to bf16 (nearest even) and returns its bits and value.
func bf16Bits(x float64) (uint16, float64) {
	u := math.Float32bits(float32(x))
	u += 0x7fff + (u>>16)&1
	h := uint16(u >> 16)
	return h, float64(math.Float32frombits(uint32(h) << 16))
}

// TestMmaFragmentLayout checks mma.m16n8k16.row.col.f32.bf16 against the
// fragment layout of the PTX ISA, written out here independently of the
// emulator: with g = lane>>2 and q = lane%4, A register r of a lane holds
// row g+8(r&1), columns 2q+8(r>>1) and the next; B register r holds rows
// (k) 2q+8r and the next of column g; C and D element r hold row g+8(r>>1),
// column 2q+(r&1). Two warps get different matrices; every lane's every D
// element is compared with a float64 product: exactly for small integers,
// to float32 rounding for random values.
func TestMmaFragmentLayout(t *testing.T) {
	e := open(t)
	mod := e.module(t)
	for _, tc := range []struct {
		name string
		val  func(w, m, i, j int) float64 // m: 0 A, 1 B, 2 C
		tol  float64
	}{
		{"integers", func(w, m, i, j int) float64 { return float64((i*7+j*3+m*5+w*11)%9 - 4) }, 0},
		{"random", func(w, m, i, j int) float64 {
			h := uint32(w*1000003+m*7919+i*131+j) * 2654435761
			return float64(h>>8)/float64(1<<24)*4 - 2
		}, 1e-6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const warps = 2
			var A [warps][16][16]float64
			var B [warps][16][8]float64
			var C [warps][16][8]float64
			a := make([]uint32, warps*32*4)
			b := make([]uint32, warps*32*2)
			c := make([]float32, warps*32*4)
			for w := 0; w < warps; w++ {
				for i := 0; i < 16; i++ {
					for j := 0; j < 16; j++ {
						_, A[w][i][j] = bf16Bits(tc.val(w, 0, i, j))
						if j < 8 {
							_, B[w][i][j] = bf16Bits(tc.val(w, 1, i, j))
							C[w][i][j] = float64(float32(tc.val(w, 2, i, j)))
						}
					}
				}
				for l := 0; l < 32; l++ {
					g, q, base := l>>2, l%4, w*32+l
					for r := 0; r < 4; r++ {
						row, col := g+8*(r&1), 2*q+8*(r>>1)
						lo, _ := bf16Bits(A[w][row][col])
						hi, _ := bf16Bits(A[w][row][col+1])
						a[4*base+r] = uint32(lo) | uint32(hi)<<16
						c[4*base+r] = float32(C[w][g+8*(r>>1)][2*q+r&1])
					}
					for r := 0; r < 2; r++ {
						k := 2*q + 8*r
						lo, _ := bf16Bits(B[w][k][g])
						hi, _ := bf16Bits(B[w][k+1][g])
						b[2*base+r] = uint32(lo) | uint32(hi)<<16
					}
				}
			}
			dp, ap, bp, cp := e.alloc(t, 4*len(c)), e.alloc(t, 4*len(a)), e.alloc(t, 4*len(b)), e.alloc(t, 4*len(c))
			e.cuMemcpyHtoD(ap, unsafe.Pointer(&a[0]), uint64(4*len(a)), 0)
			e.cuMemcpyHtoD(bp, unsafe.Pointer(&b[0]), uint64(4*len(b)), 0)
			putFloats(e, cp, c)
			if r := e.launch(t, mod, "t_mma", [3]uint32{1, 1, 1}, [3]uint32{32 * warps, 1, 1}, dp, ap, bp, cp); r != 0 {
				t.Fatalf("t_mma: %d %s", r, e.lastError())
			}
			d := getFloats(e, dp, len(c))
			for w := 0; w < warps; w++ {
				for l := 0; l < 32; l++ {
					g, q := l>>2, l%4
					for r := 0; r < 4; r++ {
						row, col := g+8*(r>>1), 2*q+r&1
						want := C[w][row][col]
						for k := 0; k < 16; k++ {
							want += A[w][row][k] * B[w][k][col]
						}
						got := float64(d[4*(w*32+l)+r])
						if math.Abs(got-want) > tc.tol*(1+math.Abs(want)) {
							t.Errorf("warp %d lane %d d%d (row %d, col %d) = %v, want %v", w, l, r, row, col, got, want)
						}
					}
				}
			}
		})
	}
}

// TestMmaNeedsFullWarp: a warp of fewer than 32 lanes cannot run mma.sync.
func TestMmaNeedsFullWarp(t *testing.T) {
	e := open(t)
	mod := e.module(t)
	p := e.alloc(t, 4*64)
	e.reset()
	r := e.launch(t, mod, "t_mma_divergent", [3]uint32{1, 1, 1}, [3]uint32{16, 1, 1}, p)
	if r != 719 || !strings.Contains(e.lastError(), "needs 32") {
		t.Errorf("16-lane mma: status %d, error %q; want 719 and a full-warp message", r, e.lastError())
	}
}
