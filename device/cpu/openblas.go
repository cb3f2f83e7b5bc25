package cpu

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/ebitengine/purego"
)

// openBLAS holds the functions bound from libopenblas at run time.
//
// GEMM goes through the Fortran entry point sgemm_, whose arguments are
// all pointers: it is called with purego.SyscallN, which costs no
// reflection and no per-call allocation, unlike a bound function with
// float arguments (cblas_sgemm).
type openBLAS struct {
	path       string
	sgemm      uintptr // sgemm_
	setThreads func(n int32)
	// threads is the count every call asks for (see gemm).
	threads atomic.Int32
	// getThreads is openblas_get_num_threads: the count the last call ran
	// with (nil when not exported).
	getThreads func() int32
	config     func() *byte
	corename   func() *byte // openblas_get_corename, nil when not exported
}

// sgemmArgs holds the by-reference scalars of one sgemm_ call; instances
// are pooled so that a call allocates nothing.
type sgemmArgs struct {
	transA, transB byte
	m, n, k        int32
	lda, ldb, ldc  int32
	alpha, beta    float32
}

var sgemmArgsPool = sync.Pool{New: func() any { return new(sgemmArgs) }}

// openBLASCandidates lists the library names tried, in order.
func openBLASCandidates() []string {
	if p := os.Getenv("HILBERT_OPENBLAS"); p != "" {
		return []string{p}
	}
	return []string{
		"libopenblas.so.0",
		"libopenblas.so",
		"/usr/lib/x86_64-linux-gnu/libopenblas.so.0",
		"/usr/lib/aarch64-linux-gnu/libopenblas.so.0",
		"libopenblas.dylib",
	}
}

// loadOpenBLAS binds cblas_sgemm and the thread control of the first
// library in openBLASCandidates that loads.
func loadOpenBLAS() (*openBLAS, error) {
	passiveOpenMP()
	var errs []string
	for _, name := range openBLASCandidates() {
		h, err := purego.Dlopen(name, purego.RTLD_NOW|purego.RTLD_LOCAL)
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", name, err))
			continue
		}
		lib := &openBLAS{path: name}
		sym, err := purego.Dlsym(h, "sgemm_")
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: no sgemm_: %v", name, err))
			continue
		}
		lib.sgemm = sym
		if sym, err := purego.Dlsym(h, "openblas_set_num_threads"); err == nil {
			purego.RegisterFunc(&lib.setThreads, sym)
		}
		if sym, err := purego.Dlsym(h, "openblas_get_num_threads"); err == nil {
			purego.RegisterFunc(&lib.getThreads, sym)
		}
		if sym, err := purego.Dlsym(h, "openblas_get_config"); err == nil {
			purego.RegisterFunc(&lib.config, sym)
		}
		if sym, err := purego.Dlsym(h, "openblas_get_corename"); err == nil {
			purego.RegisterFunc(&lib.corename, sym)
		}
		return lib, nil
	}
	return nil, fmt.Errorf("cpu: OpenBLAS not found (tried %v)", errs)
}

// useThreads makes n the thread count of every later call (see gemm),
// setting it now on the calling thread too.
func (lib *openBLAS) useThreads(n int) {
	if lib.setThreads == nil {
		return
	}
	lib.threads.Store(int32(n))
	lib.setThreads(int32(n))
}

// configString returns OpenBLAS's build description, or "".
func (lib *openBLAS) configString() string {
	if lib.config == nil {
		return ""
	}
	return cString(lib.config())
}

// coreName returns the kernel set OpenBLAS picked for this CPU
// (openblas_get_corename: "Cooperlake", "SkylakeX", "Haswell", or the
// generic "Prescott" on a CPU it does not know), or "" when the library
// does not say.
func (lib *openBLAS) coreName() string {
	if lib.corename == nil {
		return ""
	}
	return strings.TrimSpace(cString(lib.corename()))
}

// cString copies a NUL-terminated C string (at most 256 bytes; "" for nil).
func cString(p *byte) string {
	if p == nil {
		return ""
	}
	var s []byte
	for q := unsafe.Pointer(p); *(*byte)(q) != 0 && len(s) < 256; q = unsafe.Add(q, 1) {
		s = append(s, *(*byte)(q))
	}
	return string(s)
}

func fortranTranspose(t bool) byte {
	if t {
		return 'T'
	}
	return 'N'
}

// gemm computes the row-major product C = alpha op(A) op(B) + beta C with
// the column-major sgemm_: row-major C is column-major C^T = op(B)^T op(A)^T,
// so the operands and their sizes are swapped. Slices must be non-empty.
//
// The thread count is set again on the calling OS thread, which is held
// for the call: the OpenMP build takes each call's thread count from the
// calling thread's OpenMP setting (omp_get_max_threads), which
// openblas_set_num_threads sets only for the thread it runs on, so a
// goroutine that moved to another OS thread ran on every core whatever
// -threads said (1-thread benchmarks measured 320 GFLOP/s, above one
// core's peak).
func (lib *openBLAS) gemm(tA, tB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if lib.setThreads != nil {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		lib.setThreads(lib.threads.Load())
	}
	p := sgemmArgsPool.Get().(*sgemmArgs)
	*p = sgemmArgs{
		transA: fortranTranspose(tB), transB: fortranTranspose(tA),
		m: int32(n), n: int32(m), k: int32(k),
		lda: int32(ldb), ldb: int32(lda), ldc: int32(ldc),
		alpha: alpha, beta: beta,
	}
	purego.SyscallN(lib.sgemm,
		uintptr(unsafe.Pointer(&p.transA)), uintptr(unsafe.Pointer(&p.transB)),
		uintptr(unsafe.Pointer(&p.m)), uintptr(unsafe.Pointer(&p.n)), uintptr(unsafe.Pointer(&p.k)),
		uintptr(unsafe.Pointer(&p.alpha)),
		uintptr(unsafe.Pointer(&b[0])), uintptr(unsafe.Pointer(&p.lda)),
		uintptr(unsafe.Pointer(&a[0])), uintptr(unsafe.Pointer(&p.ldb)),
		uintptr(unsafe.Pointer(&p.beta)),
		uintptr(unsafe.Pointer(&c[0])), uintptr(unsafe.Pointer(&p.ldc)))
	sgemmArgsPool.Put(p)
}

// passiveOpenMP asks an OpenMP build of OpenBLAS to put its threads to
// sleep between calls instead of spinning (OMP_WAIT_POLICY=PASSIVE), unless
// the user set a policy. Spinning threads would steal both cores from the
// Go kernels that run between GEMMs. The variable must be in the C
// environment before libgomp initialises, so it is set through libc's
// setenv (os.Setenv does not reach the C environment without cgo).
func passiveOpenMP() {
	if _, set := os.LookupEnv("OMP_WAIT_POLICY"); set {
		return
	}
	libc, err := purego.Dlopen("libc.so.6", purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return
	}
	sym, err := purego.Dlsym(libc, "setenv")
	if err != nil {
		return
	}
	name, value := []byte("OMP_WAIT_POLICY\x00"), []byte("PASSIVE\x00")
	purego.SyscallN(sym, uintptr(unsafe.Pointer(&name[0])), uintptr(unsafe.Pointer(&value[0])), 0)
}
