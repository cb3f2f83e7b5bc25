package cpu

import (
	"fmt"
	"os"
	"unsafe"

	"github.com/ebitengine/purego"
)

// CBLAS constants (cblas.h).
const (
	cblasRowMajor = 101
	cblasNoTrans  = 111
	cblasTrans    = 112
)

// openBLAS holds the functions bound from libopenblas at run time.
type openBLAS struct {
	path       string
	sgemm      func(order, transA, transB, m, n, k int32, alpha float32, a unsafe.Pointer, lda int32, b unsafe.Pointer, ldb int32, beta float32, c unsafe.Pointer, ldc int32)
	setThreads func(n int32)
	config     func() *byte
}

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
	var errs []string
	for _, name := range openBLASCandidates() {
		h, err := purego.Dlopen(name, purego.RTLD_NOW|purego.RTLD_LOCAL)
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", name, err))
			continue
		}
		lib := &openBLAS{path: name}
		sym, err := purego.Dlsym(h, "cblas_sgemm")
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: no cblas_sgemm: %v", name, err))
			continue
		}
		purego.RegisterFunc(&lib.sgemm, sym)
		if sym, err := purego.Dlsym(h, "openblas_set_num_threads"); err == nil {
			purego.RegisterFunc(&lib.setThreads, sym)
		}
		if sym, err := purego.Dlsym(h, "openblas_get_config"); err == nil {
			purego.RegisterFunc(&lib.config, sym)
		}
		return lib, nil
	}
	return nil, fmt.Errorf("cpu: OpenBLAS not found (tried %v)", errs)
}

// configString returns OpenBLAS's build description, or "".
func (lib *openBLAS) configString() string {
	if lib.config == nil {
		return ""
	}
	p := lib.config()
	if p == nil {
		return ""
	}
	var s []byte
	for q := unsafe.Pointer(p); *(*byte)(q) != 0 && len(s) < 256; q = unsafe.Add(q, 1) {
		s = append(s, *(*byte)(q))
	}
	return string(s)
}

func cblasTranspose(t bool) int32 {
	if t {
		return cblasTrans
	}
	return cblasNoTrans
}

// gemm calls cblas_sgemm in row-major order. Slices must be non-empty.
func (lib *openBLAS) gemm(tA, tB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	lib.sgemm(cblasRowMajor, cblasTranspose(tA), cblasTranspose(tB), int32(m), int32(n), int32(k),
		alpha, unsafe.Pointer(&a[0]), int32(lda), unsafe.Pointer(&b[0]), int32(ldb),
		beta, unsafe.Pointer(&c[0]), int32(ldc))
}
