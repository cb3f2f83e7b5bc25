package cpu

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"

	"github.com/hilbert-ml/hilbert/device"
)

// The GEMM behind Sgemm and Device.Gemm is one of three:
//
//	native    Hilbert's own (native.go): Go and Go assembly, AVX-512 or
//	          AVX2+FMA micro-kernels chosen from the CPU's features, a
//	          portable Go kernel elsewhere; safe for concurrent calls
//	openblas  OpenBLAS's sgemm_, loaded at run time (openblas.go)
//	go        gonum's GEMM (SSE assembly on amd64, pure Go elsewhere)
//
// HILBERT_GEMM=native|openblas|go forces one. Unset (or auto), the choice is
// a rule, not a measurement (chooseGemm):
//
//  1. native when it has an assembly kernel for this CPU (amd64 with
//     AVX2+FMA or AVX-512): there it matches or beats OpenBLAS on the
//     shapes of "hilbert bench gemm";
//  2. else OpenBLAS if it loads (its SIMD kernels for this CPU);
//  3. else the faster of the native GEMM's portable Go kernel and gonum:
//     gonum where it has its SSE assembly (amd64 without AVX2, built without
//     the noasm tag: 10-19 GFLOP/s), the portable kernel everywhere else,
//     where gonum is pure Go and half as fast (native_portable.go).
const (
	gemmNative   = "native"
	gemmOpenBLAS = "openblas"
	gemmGo       = "go"
)

var (
	gemmOnce sync.Once
	gemmUse  string // gemmNative, gemmOpenBLAS or gemmGo
	gemmErr  error  // set when HILBERT_GEMM could not be honoured
	gemmDesc string // what GemmDescription returns
	bf16Desc string // its part on the bfloat16 products
	goBLAS   gonum.Implementation

	blasOnce sync.Once
	blasMu   sync.Mutex // guards blasLib against SetThreads during loading
	blasLib  *openBLAS  // nil until loaded, or when it cannot be
	blasErr  error      // why OpenBLAS did not load
)

// loadBLAS loads OpenBLAS once, on first need: the native GEMM does not
// need it, but the benchmarks compare against it.
func loadBLAS() (*openBLAS, error) {
	blasOnce.Do(func() {
		lib, err := loadOpenBLAS()
		blasMu.Lock()
		defer blasMu.Unlock()
		blasLib, blasErr = lib, err
		if lib != nil {
			lib.useThreads(Threads())
		}
	})
	return blasLib, blasErr
}

// What the slow GEMMs cost, for the start-up line. Measured on the 2-core
// AVX-512 development machine (2 threads): gonum's GEMM (SSE assembly) ran
// 512^3 at 13 GFLOP/s against 350 for the native AVX-512 kernel and 9 for
// the portable Go kernel, in one run taking turns (with -tags noasm,
// gonum's pure Go: 4.7 against the portable kernel's 11); the README's main
// job ran 8 to 13 times longer on gonum than on the native GEMM (issue 14:
// 194 against 1,580 tokens/s).
const (
	gonumCost       = "on a 2-core AVX-512 machine gonum ran the README's main job 8 to 13 times slower than the native GEMM (194 against 1,580 tokens/s; 512^3 at 13 against 350 GFLOP/s)"
	portableCost    = "it runs at about twice gonum's pure Go but, on a 2-core AVX-512 machine, 35 times slower than the AVX-512 kernel (512^3 at 9 against 350 GFLOP/s)"
	installOpenBLAS = "for a fast GEMM install OpenBLAS (Debian/Ubuntu: apt-get install libopenblas0-openmp) or set HILBERT_OPENBLAS to the path of a libopenblas.so.0"
)

// gemmEnv is what the choice of GEMM depends on.
type gemmEnv struct {
	mode     string        // HILBERT_GEMM, lower-cased
	kernel   *nativeKernel // the native GEMM's best kernel
	goarch   string        // runtime.GOARCH
	godebug  string        // GODEBUG, which can hide CPU features
	gonumAsm bool          // gonum runs on assembly (gonumAsm)
	loadBLAS func() (*openBLAS, error)
}

// gemmChoice is the GEMM chosen: its name, the start-up description (without
// the thread count) and the error when HILBERT_GEMM could not be honoured.
type gemmChoice struct {
	use  string
	desc string
	err  error
}

// noAsmKernel says why the native GEMM has only its portable kernel.
func (e gemmEnv) noAsmKernel() string {
	if e.goarch != "amd64" {
		return fmt.Sprintf("the native GEMM has assembly kernels only for amd64 (AVX2+FMA or AVX-512), not for GOARCH=%s", e.goarch)
	}
	why := "this CPU has no AVX2+FMA for the native GEMM's assembly kernels"
	if strings.Contains(e.godebug, "cpu.") {
		why += fmt.Sprintf(" (GODEBUG=%s may hide them)", e.godebug)
	}
	return why
}

// missingOpenBLAS extends a failure to load OpenBLAS with how to install it.
func missingOpenBLAS(err error) error {
	return fmt.Errorf("%w; %s", err, installOpenBLAS)
}

// chooseGemm applies the rule above (or HILBERT_GEMM) to e.
func chooseGemm(e gemmEnv) gemmChoice {
	switch e.mode {
	case "", "auto":
		if e.kernel != goKernel {
			return e.native("")
		}
		lib, err := e.loadBLAS()
		if err == nil {
			return e.openBLAS(lib, fmt.Sprintf(" (%s, so OpenBLAS runs in its place)", e.noAsmKernel()))
		}
		if e.gonumAsm {
			return gemmChoice{use: gemmGo, desc: fmt.Sprintf("gonum (SSE assembly): %s, and OpenBLAS did not load (%v); gonum's assembly outruns the native GEMM's portable Go kernel, but %s; %s",
				e.noAsmKernel(), err, gonumCost, installOpenBLAS)}
		}
		return gemmChoice{use: gemmNative, desc: fmt.Sprintf("native (%s kernel %dx%d): %s, and OpenBLAS did not load (%v); the portable kernel is the faster of the pure-Go GEMMs: %s; %s",
			e.kernel.name, e.kernel.mr, e.kernel.nr, e.noAsmKernel(), err, portableCost, installOpenBLAS)}
	case gemmNative:
		return e.native(", forced by HILBERT_GEMM")
	case gemmOpenBLAS:
		lib, err := e.loadBLAS()
		if err != nil {
			c := e.native("")
			c.err = fmt.Errorf("HILBERT_GEMM=openblas: %w", missingOpenBLAS(err))
			c.desc += fmt.Sprintf(" (%v)", c.err)
			return c
		}
		return e.openBLAS(lib, ", forced by HILBERT_GEMM")
	case gemmGo, "gonum":
		kind := "SSE assembly"
		if !e.gonumAsm {
			kind = "pure Go, half the speed of the native GEMM's portable kernel"
		}
		return gemmChoice{use: gemmGo, desc: fmt.Sprintf("gonum (%s), forced by HILBERT_GEMM: %s; unset HILBERT_GEMM for the native GEMM", kind, gonumCost)}
	default:
		c := e.native("")
		c.err = fmt.Errorf("HILBERT_GEMM=%q: want native, openblas, go or auto", e.mode)
		c.desc += fmt.Sprintf(" (%v)", c.err)
		return c
	}
}

// native chooses the native GEMM; on the portable kernel the description
// says why and what it costs.
func (e gemmEnv) native(note string) gemmChoice {
	kn := e.kernel
	if kn == goKernel {
		note += fmt.Sprintf("; %s, so its portable Go kernel runs: %s; %s", e.noAsmKernel(), portableCost, installOpenBLAS)
	}
	return gemmChoice{use: gemmNative, desc: fmt.Sprintf("native (%s kernel %dx%d)%s", kn.name, kn.mr, kn.nr, note)}
}

// openBLAS chooses OpenBLAS, warning when it runs its generic kernels.
func (e gemmEnv) openBLAS(lib *openBLAS, note string) gemmChoice {
	config := lib.configString()
	if strings.Contains(config, " Prescott ") || strings.HasSuffix(config, " Prescott") {
		// OpenBLAS 0.3.21's DYNAMIC_ARCH falls back to its generic SSE3
		// kernels on CPUs it does not know (Emerald Rapids among them).
		note += "; OpenBLAS did not recognise this CPU and runs its generic Prescott kernels, about 5 times slower: set OPENBLAS_CORETYPE (SkylakeX for AVX-512, Haswell for AVX2) or use the native GEMM"
	}
	return gemmChoice{use: gemmOpenBLAS, desc: fmt.Sprintf("OpenBLAS (%s) %s%s", lib.path, config, note)}
}

// initGemm chooses the GEMM once per process and reports the choice on
// stderr.
func initGemm() {
	gemmOnce.Do(func() {
		c := chooseGemm(gemmEnv{
			mode:     strings.ToLower(os.Getenv("HILBERT_GEMM")),
			kernel:   nativeBest,
			goarch:   runtime.GOARCH,
			godebug:  os.Getenv("GODEBUG"),
			gonumAsm: gonumAsm,
			loadBLAS: loadBLAS,
		})
		gemmUse, gemmDesc, gemmErr = c.use, c.desc, c.err
		b := chooseBF16(bf16Env{
			mode:    strings.ToLower(os.Getenv("HILBERT_GEMM_BF16")),
			gemm:    c.use,
			kernels: bf16Kernels,
			dotFast: dotBF16Fast(),
			godebug: os.Getenv("GODEBUG"),
		})
		bf16Use, bf16Desc = b.kernel, b.desc
		gemmDesc += "; " + b.desc
		gemmErr = errors.Join(gemmErr, b.err)
		if c.use == gemmGo {
			fmt.Fprintln(os.Stderr, "hilbert: GEMM: "+gemmDesc)
			return
		}
		fmt.Fprintf(os.Stderr, "hilbert: GEMM: %s, %d threads\n", gemmDesc, Threads())
	})
}

// GemmName reports the GEMM in use: "native", "openblas" or "go".
func GemmName() string {
	initGemm()
	return gemmUse
}

// GemmDescription says which GEMM is in use and why: the native kernel, the
// OpenBLAS library and its build, or gonum and what it costs; then what
// runs bfloat16 products (BFloat16Kernel) and why.
func GemmDescription() string {
	initGemm()
	return gemmDesc
}

// GemmError reports a GEMM request (HILBERT_GEMM, HILBERT_GEMM_BF16) that
// could not be met.
func GemmError() error {
	initGemm()
	return gemmErr
}

// NativeKernel names the native GEMM's micro-kernel on this CPU ("avx512",
// "avx2" or "go") and its register block.
func NativeKernel() (name string, mr, nr int) {
	return nativeBest.name, nativeBest.mr, nativeBest.nr
}

// UseNativeKernel makes the native GEMM run the micro-kernel called name
// ("avx512", "avx2" or "go", as NativeKernel names them) instead of the
// fastest this CPU has. Each kernel sums a product's terms in its own
// order, so numbers made on another machine are reproduced bit for bit
// only on the kernel that made them: tests that hold such a golden use
// this. It returns an error naming the kernels this CPU can run when name
// is not one of them. It must not be called while a GEMM runs.
func UseNativeKernel(name string) error {
	var names []string
	for _, kn := range nativeKernels {
		if kn.name == name {
			initGemm()
			nativeBest = kn
			if gemmUse == gemmNative {
				gemmDesc = fmt.Sprintf("native (%s kernel %dx%d), chosen by cpu.UseNativeKernel; %s", kn.name, kn.mr, kn.nr, bf16Desc)
			}
			return nil
		}
		names = append(names, kn.name)
	}
	return fmt.Errorf("cpu: no native GEMM kernel %q on this CPU (it runs %s)", name, strings.Join(names, ", "))
}

func setBLASThreads(n int) {
	blasMu.Lock()
	defer blasMu.Unlock()
	if blasLib != nil {
		blasLib.useThreads(n)
	}
}

// Sgemm computes C = alpha*op(A)*op(B) + beta*C on row-major host slices
// with the framework's GEMM (see GemmName). It is the entry point for
// host-side numerics (diagnostics, benchmarks) that work on plain slices.
// With beta 0, C is not read (NaNs in it are dropped). The native and
// gonum GEMMs may be called from several goroutines at once; with
// OpenBLAS, calls must not overlap: its OpenMP build shares per-thread
// buffers between concurrent calls and returns wrong results now and then.
func Sgemm(tA, tB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	initGemm()
	sgemmWith(gemmUse, Threads(), tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// sgemmWith runs one GEMM with the named implementation (native on
// threads workers).
func sgemmWith(use string, threads int, tA, tB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if m == 0 || n == 0 {
		return
	}
	if k == 0 || alpha == 0 {
		scaleMatrix(c, m, n, ldc, beta)
		return
	}
	switch use {
	case gemmOpenBLAS:
		blasLib.gemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
	case gemmGo:
		goBLAS.Sgemm(gonumTranspose(tA), gonumTranspose(tB), m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
	default:
		sgemmNative(nativeBest, threads, tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
	}
}

// SgemmNative runs the native GEMM whatever GemmName says, on Threads()
// workers; benchmarks compare it with SgemmOpenBLAS and SgemmGonum.
func SgemmNative(tA, tB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	sgemmWith(gemmNative, Threads(), tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// SgemmGonum runs gonum's pure-Go GEMM whatever GemmName says.
func SgemmGonum(tA, tB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	sgemmWith(gemmGo, Threads(), tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// SgemmOpenBLAS calls OpenBLAS directly, bypassing the framework's dispatch
// (loading it on first use); it reports false when OpenBLAS cannot be
// loaded. Benchmarks use it as the reference the other GEMMs are measured
// against.
func SgemmOpenBLAS(tA, tB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) bool {
	if lib, _ := loadBLAS(); lib == nil {
		return false
	}
	sgemmWith(gemmOpenBLAS, Threads(), tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
	return true
}

func gonumTranspose(t bool) blas.Transpose {
	if t {
		return blas.Trans
	}
	return blas.NoTrans
}

// scaleMatrix sets C = beta*C (C = 0 when beta is 0, dropping NaNs).
func scaleMatrix[T float32 | float64](c []T, m, n, ldc int, beta T) {
	if beta == 1 {
		return
	}
	for i := 0; i < m; i++ {
		row := c[i*ldc : i*ldc+n]
		if beta == 0 {
			clear(row)
			continue
		}
		for j := range row {
			row[j] *= beta
		}
	}
}

// Gemm runs a strided batched GEMM, one Sgemm per batch entry. BFloat16
// A and B run on the bfloat16 kernel (BFloat16Kernel: pairs of products
// accumulated in float32, denormal operands read as zero) or, where there
// is none, are widened to float32 (exactly) for the float32 GEMM, whose
// result is then the float32 product of the bfloat16 values; C is float32.
// A float64 C takes float64 A and B and the float64 GEMM (Dgemm).
func (d *Device) Gemm(g device.GemmArgs) {
	if g.C.DType() == device.Float64 {
		d.gemm64(&g)
		return
	}
	initGemm()
	batch, side := batchSideBySide(&g)
	if bf16Use != nil && g.A.DType() == device.BFloat16 && g.B.DType() == device.BFloat16 {
		a, b, c := BFloat16s(g.A), BFloat16s(g.B), Float32s(g.C)
		if side {
			gb := g // the goroutines' copy: g itself stays on the stack
			parallelFor(batch, 1, func(lo, hi int) {
				for i := lo; i < hi; i++ {
					gemmEntryBF16(&gb, a, b, c, i, 1)
				}
			})
			return
		}
		for i := 0; i < batch; i++ {
			gemmEntryBF16(&g, a, b, c, i, Threads())
		}
		return
	}
	a, b, c := gemmOperand(g.A), gemmOperand(g.B), Float32s(g.C)
	if side {
		gb := g
		parallelFor(batch, 1, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				gemmEntry(&gb, a, b, c, i, 1)
			}
		})
		return
	}
	for i := 0; i < batch; i++ {
		gemmEntry(&g, a, b, c, i, Threads())
	}
}

// batchSideBySide returns g's batch size and whether its entries run side
// by side, one worker each: small native products whose C entries do not
// overlap. The others run one after the other, each on every worker.
func batchSideBySide(g *device.GemmArgs) (batch int, side bool) {
	batch = max(g.Batch, 1)
	flops := 2 * float64(g.M) * float64(g.N) * float64(g.K)
	return batch, gemmUse == gemmNative && batch > 1 && g.M > 0 && g.N > 0 && g.StrideC >= (g.M-1)*g.LDC+g.N &&
		flops < float64(Threads())*8*minWorkerFlops
}

// operandShapes returns the stored shapes of g's A and B (op(A) is M x K,
// op(B) K x N).
func operandShapes(g *device.GemmArgs) (rowsA, colsA, rowsB, colsB int) {
	rowsA, colsA = g.M, g.K
	if g.TransA {
		rowsA, colsA = colsA, rowsA
	}
	rowsB, colsB = g.K, g.N
	if g.TransB {
		rowsB, colsB = colsB, rowsB
	}
	return rowsA, colsA, rowsB, colsB
}

// gemmEntry runs batch entry i of g on threads workers.
func gemmEntry(g *device.GemmArgs, a, b, c []float32, i, threads int) {
	rowsA, colsA, rowsB, colsB := operandShapes(g)
	sgemmWith(gemmUse, threads, g.TransA, g.TransB, g.M, g.N, g.K, g.Alpha,
		window(a, i*g.StrideA, rowsA, colsA, g.LDA), g.LDA,
		window(b, i*g.StrideB, rowsB, colsB, g.LDB), g.LDB,
		g.Beta, window(c, i*g.StrideC, g.M, g.N, g.LDC), g.LDC)
}

// gemmEntryBF16 runs batch entry i of g, bfloat16 A and B, on the bfloat16
// kernel with threads workers.
func gemmEntryBF16(g *device.GemmArgs, a, b []uint16, c []float32, i, threads int) {
	rowsA, colsA, rowsB, colsB := operandShapes(g)
	bf16With(bf16Use, threads, g.TransA, g.TransB, g.M, g.N, g.K, g.Alpha,
		window(a, i*g.StrideA, rowsA, colsA, g.LDA), g.LDA,
		window(b, i*g.StrideB, rowsB, colsB, g.LDB), g.LDB,
		g.Beta, window(c, i*g.StrideC, g.M, g.N, g.LDC), g.LDC)
}

// window returns the part of s holding a rows x cols matrix with row pitch
// ld starting at off (empty when the matrix is).
func window[T any](s []T, off, rows, cols, ld int) []T {
	if rows == 0 || cols == 0 {
		return s[off:off]
	}
	return s[off : off+(rows-1)*ld+cols]
}

// gemmOperand returns a float32 view of a GEMM input, widening bfloat16
// into a new slice.
func gemmOperand(b device.Buffer) []float32 {
	if b.DType() != device.BFloat16 {
		return Float32s(b)
	}
	h := BFloat16s(b)
	f := make([]float32, len(h))
	fromBFloat16(f, h)
	return f
}

// OpenBLASCoreName loads OpenBLAS if need be and returns the kernel set it
// picked for this CPU (openblas_get_corename, for example "Cooperlake" or
// the generic "Prescott"); "" when it does not load or does not say.
func OpenBLASCoreName() string {
	lib, err := loadBLAS()
	if err != nil {
		return ""
	}
	return lib.coreName()
}

// OpenBLASGenericCore reports whether core is OpenBLAS's generic SSE3
// kernel set, which it falls back to on CPUs it does not recognise (about 5
// times slower than its AVX-512 kernels).
func OpenBLASGenericCore(core string) bool {
	return strings.EqualFold(core, "Prescott")
}

// OpenBLASDescription loads OpenBLAS if need be and describes it: the
// library and its build (with the kernel set it picked for this CPU), or why
// it did not load.
func OpenBLASDescription() string {
	lib, err := loadBLAS()
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("%s %s", lib.path, lib.configString())
}

// OpenBLASMissing is what to do when OpenBLAS does not load.
const OpenBLASMissing = installOpenBLAS
