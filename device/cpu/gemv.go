package cpu

// The small-M path of the native GEMM: C = alpha A B^T + beta C with A
// (M x K) and B (N x K) stored by rows and M at most gemvMaxRows, as in
// every nn.Linear of a generation step (one row of A per sequence and
// token). The packed GEMM copies all of B into panels and runs its 12 x 32
// register block on them, so with one row of A it packs every number of
// B to use it once and leaves 11 of 12 FMA rows idle. Here a kernel reads
// B where it is, 16 rows at a time, transposes each 16 x 16 tile in
// registers and runs up to 8 rows of A against it.
//
// The arithmetic is the packed kernel's, bit for bit: each sum is one FMA
// chain over K in order, cut into the same kc steps (kn.blocking), and
// written as alpha times the sum plus beta C (1 after the first step) by
// FMA. So whether a product takes this path changes no number: the paper's
// job, its diagnostics (their Gram products have a few rows) and the
// pinned digests are what the packed GEMM gives, and a row's result does
// not depend on the other rows (a batch of prompts generates each
// prompt's tokens).
//
// Only the AVX-512 kernel has a small-M path (sgemvKernel8x16, in native_amd64.s): the AVX2
// kernel writes its edge tiles through Go (storeTile), whose rounding a
// transposing AVX2 kernel would have to copy, and the portable kernel is
// bound by Go's scalar arithmetic either way. They keep the packed path.
//
// The product is a nativeJob whose tasks are runs of column groups of
// 16, worked on by the caller and the GEMM's helpers (native_helpers.go),
// each worker taking at least gemvWorkerElems numbers of B.

// gemvMaxRows is the most rows of C (M) the small-M path takes: the
// kernel's accumulators, 8 rows of 16 columns.
const gemvMaxRows = 8

// gemvWorkerElems is the least work per worker, in numbers of B (about 5
// microseconds of streaming from memory: the helpers are already polling
// between the products of a decoding step).
const gemvWorkerElems = 16 << 10

// gemvKernel is a small-M kernel for one native kernel.
type gemvKernel struct {
	name string
	// block computes C = alpha A B^T + beta C on m rows (1 to gemvMaxRows)
	// and cols columns (1 to 16): rows of A at pitch lda, 16 rows of B at
	// pitch ldb (those past cols may hold anything finite or not: their
	// columns are not written), k >= 1.
	block func(k int, a []float32, lda, m int, b []float32, ldb int, c []float32, ldc int, alpha, beta float32, cols int)
}

// gemvFor returns the small-M kernel of the native kernel kn, nil for
// none.
func gemvFor(kn *nativeKernel) *gemvKernel { return gemvKernels[kn] }

// sgemvNative runs C = alpha A B^T + beta C (row-major, as Sgemm) on the
// small-M path of kernel kn with up to threads workers when the product
// is one it takes (A as stored, B transposed, m at most gemvMaxRows, and
// a small-M kernel for kn), reporting whether it did. alpha != 0, k >= 1,
// m, n >= 1.
func sgemvNative(kn *nativeKernel, threads int, tA, tB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) bool {
	if tA || !tB || m > gemvMaxRows || gemvOff {
		return false
	}
	gk := gemvFor(kn)
	if gk == nil {
		return false
	}
	kcMax, _ := kn.blocking()
	groups := (n + 15) / 16
	workers := max(1, min(threads, groups, n*k/gemvWorkerElems))
	j := takeJob()
	j.kn, j.gk = kn, gk
	j.a, j.b = a, b
	j.setProduct(kcMax, tA, tB, m, n, k, alpha, lda, ldb, beta, c, ldc)
	j.ms, j.rowsPer = 1, m
	j.colsPer = 16 * max(1, min(gemvTaskGroups, groups/(workers*gemvTasksPerWorker)))
	j.nb = (n + j.colsPer - 1) / j.colsPer
	j.dispatch(workers)
	return true
}

// gemvTaskGroups is the most column groups (of 16) in one task of the
// small-M path, and gemvTasksPerWorker the least tasks each worker gets:
// workers take tasks as they come free, so one that starts late (a
// helper waking up) takes fewer.
const (
	gemvTaskGroups     = 8
	gemvTasksPerWorker = 4
)

// gemvOff sends every product to the packed GEMM (benchmarks and tests
// compare the two paths).
var gemvOff bool

// gemvEdges keeps the buffers the last, partial column group of B is
// copied into (16 rows, the missing ones zero), so that the kernel never
// reads past B.
var gemvEdges = newFreeList[[]float32](4)

// group computes the 16 columns of C from j0 (fewer at the end) in K
// steps of kc.
func (gk *gemvKernel) group(kc, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc, j0 int) {
	cols := min(16, n-j0)
	bs, lds := b[j0*ldb:], ldb
	if cols < 16 {
		buf := gemvEdges.get()
		defer gemvEdges.put(buf)
		if cap(*buf) < 16*k {
			*buf = make([]float32, 16*k)
		}
		bs, lds = (*buf)[:16*k], k
		for j := range 16 {
			row := bs[j*k : (j+1)*k]
			if j < cols {
				copy(row, b[(j0+j)*ldb:(j0+j)*ldb+k])
			} else {
				clear(row)
			}
		}
	}
	for p0 := 0; p0 < k; p0 += kc {
		be := beta
		if p0 > 0 {
			be = 1
		}
		gk.block(min(kc, k-p0), a[p0:], lda, m, bs[p0:], lds, c[j0:], ldc, alpha, be, cols)
	}
}
