package cuda

import (
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ebitengine/purego"
	"github.com/hilbert-ml/hilbert/device"
)

// The stub tests load testdata/stub.c, built with gcc, as libcuda.so.1,
// libcublas.so.13 and libnvrtc.so.13, and check that every argument of the
// long calls arrives intact and that results computed by the stub's
// column-major GEMM match a row-major reference.

var (
	stubOnce sync.Once
	stubDir  string
	stubErr  string
)

// stubLibs builds the stub libraries once per test binary.
func stubLibs(t *testing.T) string {
	t.Helper()
	stubOnce.Do(func() {
		gcc, err := exec.LookPath("gcc")
		if err != nil {
			stubErr = "gcc not found: the stub CUDA libraries cannot be built"
			return
		}
		dir, err := os.MkdirTemp("", "hilbert-cuda-stub")
		if err != nil {
			stubErr = err.Error()
			return
		}
		for _, l := range [][2]string{{"CUDA", "libcuda.so.1"}, {"CUBLAS", "libcublas.so.13"}, {"NVRTC", "libnvrtc.so.13"}} {
			out, err := exec.Command(gcc, "-shared", "-fPIC", "-O1", "-DSTUB_"+l[0], "-o", filepath.Join(dir, l[1]), "testdata/stub.c").CombinedOutput()
			if err != nil {
				stubErr = "building stub " + l[1] + ": " + err.Error() + "\n" + string(out)
				return
			}
		}
		stubDir = dir
	})
	if stubErr != "" {
		if strings.HasPrefix(stubErr, "gcc not found") {
			t.Skip(stubErr)
		}
		t.Fatal(stubErr)
	}
	return stubDir
}

// stubControl exposes the recording functions of the stub libraries.
type stubControl struct {
	setNParams   func(n int32)
	setFail      func(launch, sync int32)
	allocCount   func() int32
	launchCount  func() int32
	launchName   func() string
	launchDims   func(out *[9]int64)
	launchParams func(out *[32]uint64)
	gemmArgs     func(ints *[24]int64, floats *[2]float32)
	compileCount func() int32
	compileOpts  func() string
}

func openStub(t *testing.T, dir string) *stubControl {
	t.Helper()
	open := func(name string) uintptr {
		h, err := purego.Dlopen(filepath.Join(dir, name), purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	cu, bl, nv := open("libcuda.so.1"), open("libcublas.so.13"), open("libnvrtc.so.13")
	s := &stubControl{}
	purego.RegisterLibFunc(&s.setNParams, cu, "stub_set_nparams")
	purego.RegisterLibFunc(&s.setFail, cu, "stub_set_fail")
	purego.RegisterLibFunc(&s.allocCount, cu, "stub_alloc_count")
	purego.RegisterLibFunc(&s.launchCount, cu, "stub_launch_count")
	purego.RegisterLibFunc(&s.launchName, cu, "stub_launch_name")
	purego.RegisterLibFunc(&s.launchDims, cu, "stub_launch_dims")
	purego.RegisterLibFunc(&s.launchParams, cu, "stub_launch_params")
	purego.RegisterLibFunc(&s.gemmArgs, bl, "stub_gemm_args")
	purego.RegisterLibFunc(&s.compileCount, nv, "stub_compile_count")
	purego.RegisterLibFunc(&s.compileOpts, nv, "stub_compile_options")
	return s
}

// newStubDevice opens a Device on the stub libraries.
func newStubDevice(t *testing.T) (*Device, *stubControl) {
	t.Helper()
	dir := stubLibs(t)
	t.Setenv(LibDirEnv, dir)
	t.Setenv("HILBERT_CUDA_NO_PYTHON", "1")
	if os.Getenv(CacheDirEnv) == "" {
		t.Setenv(CacheDirEnv, t.TempDir())
	}
	d, err := New(0)
	if err != nil {
		t.Fatalf("New on stub libraries: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	return d, openStub(t, dir)
}

func TestStubOpen(t *testing.T) {
	t.Setenv(CacheDirEnv, t.TempDir())
	d, s := newStubDevice(t)
	if d.Arch() != "sm_90" || d.Name() != "cuda:0" {
		t.Fatalf("arch %q name %q, want sm_90 cuda:0", d.Arch(), d.Name())
	}
	if desc := d.Describe(); !strings.Contains(desc, "Stub GPU") || !strings.Contains(desc, stubDir) {
		t.Errorf("Describe() = %q", desc)
	}
	if opts := s.compileOpts(); !strings.Contains(opts, "--gpu-architecture=sm_90") {
		t.Errorf("NVRTC options %q lack the architecture", opts)
	}
	n := s.compileCount()
	files, _ := filepath.Glob(filepath.Join(os.Getenv(CacheDirEnv), "*.cubin"))
	if len(files) != 1 {
		t.Fatalf("cache holds %v, want one cubin", files)
	}
	d2, err := New(0) // same source, arch and NVRTC: from the cache
	if err != nil {
		t.Fatal(err)
	}
	d2.Close()
	if s.compileCount() != n {
		t.Errorf("second New compiled again (%d -> %d compiles)", n, s.compileCount())
	}
}

func TestStubNoDevice(t *testing.T) {
	stubLibs(t)
	t.Setenv("STUB_NO_DEVICE", "1")
	t.Setenv(LibDirEnv, stubDir)
	if _, err := New(0); err == nil || !strings.Contains(err.Error(), "cuInit") {
		t.Fatalf("New without a device: err = %v, want a cuInit error", err)
	}
}

func TestStubCopiesAndAllocator(t *testing.T) {
	d, s := newStubDevice(t)
	src := []float32{1, -2, 3.5, 1e-3, 0, 7}
	for _, dt := range []device.DType{device.Float32, device.BFloat16} {
		b, err := d.Alloc(dt, len(src))
		if err != nil {
			t.Fatal(err)
		}
		d.CopyFromHost(b, src)
		got := make([]float32, len(src))
		d.CopyToHost(got, b)
		for i := range src {
			want := src[i]
			if dt == device.BFloat16 {
				want = float32FromBF16(bf16FromFloat32(want))
			}
			if got[i] != want {
				t.Errorf("%s round trip [%d] = %v, want %v", dt, i, got[i], want)
			}
		}
		d.Free(b)
	}
	ids, _ := d.Alloc(device.Int32, 3)
	d.CopyInt32FromHost(ids, []int32{5, -1, 1 << 30})
	back := make([]int32, 3)
	d.CopyInt32ToHost(back, ids)
	if back[0] != 5 || back[1] != -1 || back[2] != 1<<30 {
		t.Errorf("int32 round trip = %v", back)
	}
	// Same size class again: served from the cache, no cuMemAlloc.
	before := s.allocCount()
	for range 5 {
		b, _ := d.Alloc(device.Float32, 100)
		d.Free(b)
	}
	if got := s.allocCount() - before; got > 1 {
		t.Errorf("5 alloc/free cycles called cuMemAlloc %d times", got)
	}
	if err := d.Synchronize(); err != nil {
		t.Fatal(err)
	}
}

func TestStubLaunchArguments(t *testing.T) {
	d, s := newStubDevice(t)
	p, _ := d.Alloc(device.Float32, 1000)
	g, _ := d.Alloc(device.Float32, 1000)
	m, _ := d.Alloc(device.Float32, 1000)
	v, _ := d.Alloc(device.Float32, 1000)
	step := p.Slice(10, 990)
	s.setNParams(15)
	defer s.setNParams(0)
	decay := float32(1 - float64(float32(1e-3))*0.1)
	d.AdamWStep(p, g, m, v, step, 1e-3, 0.9, 0.999, float32(1-0.9), float32(1-0.999), 1e-10, decay, 0.1, 0.001)
	if s.launchName() != "h_adamw_f32" {
		t.Fatalf("launched %q", s.launchName())
	}
	var params [32]uint64
	s.launchParams(&params)
	ptr := func(b device.Buffer) uint64 { return b.(*Buffer).ptr }
	// The scalars in the kernel's order.
	want := []uint64{ptr(p), ptr(g), ptr(m), ptr(v), ptr(p) + 40, 1000,
		f32arg(1e-3), f32arg(0.9), f32arg(0.999), f32arg(float32(1 - 0.9)), f32arg(float32(1 - 0.999)), f32arg(1e-10),
		f32arg(decay), f32arg(0.1), f32arg(0.001)}
	for i, w := range want {
		got := params[i]
		if i >= 6 {
			got &= 0xffffffff // a float parameter is 4 bytes
		}
		if got != w {
			t.Errorf("AdamW param %d = %#x, want %#x", i, got, w)
		}
	}
	var dims [9]int64
	s.launchDims(&dims)
	if dims[0] != 4 || dims[1] != 1 || dims[3] != 256 || dims[6] != 0 || dims[7] != 0x9abc || dims[8] != 0 {
		t.Errorf("AdamW launch dims/stream = %v", dims)
	}

	// Attention: grid over query tiles and batch*heads, 8 parameters; head
	// dim 64 takes the tensor-core forward (four warps per 64 queries).
	sh := device.AttentionShape{Batch: 2, Seq: 2048, Heads: 3, HeadDim: 64, BFloat16Operands: true}
	q, _ := d.Alloc(device.Float32, 10)
	s.setNParams(8)
	d.Attention(q, q, q, q, q, sh, 0.125)
	s.launchDims(&dims)
	s.launchParams(&params)
	if s.launchName() != "h_attn_fwd_tc_d64" || dims[0] != 32 || dims[1] != 6 || dims[3] != 128 {
		t.Errorf("attention launch %s dims %v", s.launchName(), dims)
	}
	if params[5] != 2048 || params[6] != 3 || uint32(params[7]) != math.Float32bits(0.125) {
		t.Errorf("attention scalars %v", params[:8])
	}
	if err := d.Synchronize(); err != nil {
		t.Fatal(err)
	}
}

func TestStubStickyError(t *testing.T) {
	d, s := newStubDevice(t)
	b, _ := d.Alloc(device.Float32, 4)
	s.setFail(1, 0)
	d.Fill(b, 1)
	s.setFail(0, 0)
	d.Fill(b, 2)
	err := d.Synchronize()
	if err == nil || !strings.Contains(err.Error(), "cuLaunchKernel(h_fill_f32)") || !strings.Contains(err.Error(), "stub illegal address") {
		t.Fatalf("Synchronize after a failed launch = %v", err)
	}
	if err2 := d.Synchronize(); err2 == nil {
		t.Error("error is not sticky")
	}
	// An unsupported dtype is an error too, not a crash.
	d2, _ := newStubDevice(t)
	bf, _ := d2.Alloc(device.BFloat16, 4)
	d2.RMSNorm(bf, bf, bf, 2, 2, 1e-6)
	if err := d2.Synchronize(); err == nil || !strings.Contains(err.Error(), "RMSNorm") {
		t.Errorf("bf16 RMSNorm: %v", err)
	}
}
