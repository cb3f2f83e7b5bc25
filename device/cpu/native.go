package cpu

import (
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"unsafe"
)

//go:generate go run ./internal/nativegen

// The native GEMM is Hilbert's own, in Go and Go assembly, after BLIS and
// GotoBLAS: C = alpha op(A) op(B) + beta C is cut into tasks, each a block
// of rows times a block of columns of C; a task walks K in steps of kc,
// packs the kc x nc block of op(B) it needs into panels of NR columns (a
// buffer sized for the L2 cache), and for every MR rows of its row block
// packs those rows of op(A) (a micro-panel sized for the L1 cache) and runs
// the register micro-kernel against each B panel. The micro-kernel keeps
// an MR x NR block of C in vector registers across kc rank-1 updates and
// applies alpha and beta as it writes C, so edges, scaling and beta 0
// (which never reads C) cost nothing extra.
//
// Kernels, chosen at start-up from the CPU's features:
//
//	avx512  12 x 32, 24 zmm accumulators (amd64 with AVX-512F)
//	avx2     6 x 16, 12 ymm accumulators (amd64 with AVX2 and FMA)
//	go        2 x 4, portable Go (everything else; native_portable.go)
//
// Blocking, from the cache sizes Linux reports in /sys (32 KiB L1d and
// 1 MiB L2 when unknown):
//
//	kc = L1d / 2 / (4 MR), a multiple of 8 in [64, 1024]: the A
//	     micro-panel (MR x kc floats) takes half of L1, the other half
//	     streams B and C;
//	nc = L2 / 2 / (4 kc), a multiple of NR in [4 NR, 4096]: the packed B
//	     block (kc x nc floats) takes half of L2.
//
// On this project's development machines (48 KiB L1d, 2 MiB L2) the AVX-512
// kernel gets kc = 512, nc = 512. K longer than kc is cut into equal steps.
//
// Tasks have no shared state: each packs its own B block and A panels into
// buffers of its worker (pooled, 64-byte aligned, reused across calls), so
// any number of goroutines may call the GEMM at once. The task grid is
// chosen to give every worker at least three tasks (the fastest worker takes
// more when another core is busy) while packing as little twice as
// possible: splitting rows repacks B, splitting columns repacks A.

// nativeKernel is one micro-kernel with its packing routines.
type nativeKernel struct {
	name   string
	mr, nr int
	// micro computes C = alpha A B + beta C on rows < rows and columns <
	// cols of an mr x nr block of C at c (row pitch ldc); A is read at
	// a[r rs + l cs], B is a packed panel (nr floats per k). k >= 1.
	micro func(k int, a []float32, rs, cs int, b []float32, c []float32, ldc int, alpha, beta float32, rows, cols int)
	// packAT writes the interleaved micro-panel dst[l mr + r] = a[l lda +
	// r] (r < rows, zero beyond) of a transposed A, l < k.
	packAT func(dst, a []float32, lda, k, rows int)
	// packATG packs the ceil(rows/mr) consecutive micro-panels of rows
	// rows at once, panel g at dst[g mr k:], the last zero-padded.
	packATG func(dst, a []float32, lda, k, rows int)
	// packBN writes a panel dst[l nr + j] = b[l ldb + j] (j < cols, zero
	// beyond) of a B stored k x n; packBT the same from b[j ldb + l] of a
	// transposed B.
	packBN func(dst, b []float32, ldb, k, cols int)
	packBT func(dst, b []float32, ldb, k, cols int)
	// packBNB packs the ceil(cols/nr) panels of cols columns of a B stored
	// k x n at once, panel q at dst[q nr k:], the last zero-padded.
	packBNB func(dst, b []float32, ldb, k, cols int)
}

// nativeKernels lists the kernels this CPU can run, fastest first; the
// last is always the portable one. Tests run each.
var nativeKernels []*nativeKernel

// nativeBest is the kernel the native GEMM uses.
var nativeBest *nativeKernel

func init() {
	nativeKernels = append(archKernels(), goKernel)
	nativeBest = nativeKernels[0]
}

// Cache sizes the blocking is computed from.
var cacheL1d, cacheL2 = cacheSizes()

// cacheSizes reads the L1 data and L2 cache sizes of CPU 0 from Linux's
// sysfs, with 32 KiB and 1 MiB where it cannot.
func cacheSizes() (l1d, l2 int) {
	l1d, l2 = 32<<10, 1<<20
	for i := 0; i < 8; i++ {
		dir := "/sys/devices/system/cpu/cpu0/cache/index" + strconv.Itoa(i) + "/"
		read := func(name string) string {
			b, err := os.ReadFile(dir + name)
			if err != nil {
				return ""
			}
			return strings.TrimSpace(string(b))
		}
		level, typ, size := read("level"), read("type"), parseCacheSize(read("size"))
		if level == "" {
			break
		}
		switch {
		case size <= 0:
		case level == "1" && typ == "Data":
			l1d = size
		case level == "2" && (typ == "Unified" || typ == "Data"):
			l2 = size
		}
	}
	return l1d, l2
}

// parseCacheSize parses sysfs sizes like "48K" or "2048K" (0 if it cannot).
func parseCacheSize(s string) int {
	mult := 1
	switch {
	case strings.HasSuffix(s, "K"):
		mult, s = 1<<10, s[:len(s)-1]
	case strings.HasSuffix(s, "M"):
		mult, s = 1<<20, s[:len(s)-1]
	}
	v, err := strconv.Atoi(s)
	if err != nil {
		return 0
	}
	return v * mult
}

// blocking returns kc and nc for a kernel (see the package comment).
func (kn *nativeKernel) blocking() (kc, nc int) {
	kc = cacheL1d / 2 / (4 * kn.mr)
	kc = min(max(kc&^7, 64), 1024)
	nc = cacheL2 / 2 / (4 * kc)
	nc = min(max(nc/kn.nr*kn.nr, 4*kn.nr), 4096)
	return kc, nc
}

// aPad is the gap, in floats, between rows of a packed A micro-panel of a
// non-transposed A, so that rows kc*4 bytes apart do not all fall on the
// same L1 sets.
const aPad = 16

// directPanels is the most B panels per task for which the micro-kernel
// reads A in place rather than packed.
const directPanels = 4

// directOK reports whether an A micro-panel read in place (pitch lda,
// kc deep) stays in a 64-set L1 cache: the mr rows of a non-transposed A
// must not all be a multiple of 4 KiB apart; the kc rows of a transposed A,
// one or two lines each, must spread over enough sets to take at most
// half of their ways (taking 12 ways per set).
func directOK(tA bool, lda, kc int) bool {
	if !tA {
		return lda%1024 != 0
	}
	sets := 64
	if lda%16 == 0 {
		sets = 64 / gcd(lda/16, 64)
	}
	return 2*kc <= sets*6
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// aGroup is how many micro-panels of a transposed A are packed at once:
// A's rows are then read in runs of aGroup*mr floats rather than mr.
const aGroup = 8

// nativeWorker is one worker's packing buffers.
type nativeWorker struct {
	a, b []float32
	tile []float32 // the AMX kernel's 32 x 32 scratch block
	aMem []float32
	bMem []float32
	// tileMem backs tile.
	tileMem []float32
	// aT holds the pairs of a transposed A before their transpose (the
	// AVX-512 bfloat16 packer), aTMem backs it.
	aT, aTMem []float32
}

// nativeWorkers keeps idle workers' buffers. Unlike a sync.Pool it is not
// emptied by the garbage collector, which would make the next GEMMs
// reallocate their (up to L2-sized) buffers; it holds at most as many as
// ever worked at once, up to its capacity.
var nativeWorkers = newFreeList[nativeWorker](2 * nativeMaxHelpers)

func getWorker() *nativeWorker { return nativeWorkers.get() }

func putWorker(w *nativeWorker) { nativeWorkers.put(w) }

// aligned returns n floats starting at a 64-byte boundary within *mem.
// When *mem is too small it grows to at least full floats, the most any
// task of the kernel needs, so that a worker grows once and a warm step
// allocates no buffer whichever worker meets which shape.
func aligned(mem *[]float32, n, full int) []float32 {
	if cap(*mem) < n+16 {
		*mem = make([]float32, max(n, full)+16)
	}
	m := (*mem)[:cap(*mem)]
	off := int((64 - uintptr(unsafe.Pointer(&m[0]))%64) % 64 / 4)
	return m[off : off+n]
}

// nativeJob is one GEMM call split into tasks.
type nativeJob struct {
	kn            *nativeKernel
	kb            *bf16Kernel // a bfloat16 product (a16, b16) when set
	gk            *gemvKernel // a small-M product (gemv.go) when set
	mr, nr        int         // the kernel's register block
	tA, tB        bool
	m, n, k       int
	alpha, beta   float32
	a, b, c       []float32
	a16, b16      []uint16
	lda, ldb, ldc int
	kc            int // K step
	rowsPer       int // rows of C per task (a multiple of mr)
	colsPer       int // columns of C per task (a multiple of nr)
	ms, nb        int // row blocks, column blocks
	next          atomic.Int64
	// state is jobClosed, the helper slots left (times slotUnit) and the
	// helpers working (the low 32 bits); done receives one value when the
	// last helper leaves a closed job.
	state atomic.Int64
	done  chan struct{}
}

const (
	jobClosed  = 1 << 62
	slotUnit   = 1 << 32
	activeMask = slotUnit - 1
)

// nativeJobs keeps finished jobs for reuse (as nativeWorkers).
var nativeJobs = make(chan *nativeJob, 2*nativeMaxHelpers)

// join takes a helper slot of j, reporting false when there is none or j
// is closed.
func (j *nativeJob) join() bool {
	for {
		s := j.state.Load()
		if s&jobClosed != 0 || s < slotUnit {
			return false
		}
		if j.state.CompareAndSwap(s, s-slotUnit+1) {
			return true
		}
	}
}

// leave ends a helper's part in j.
func (j *nativeJob) leave() {
	if s := j.state.Add(-1); s&jobClosed != 0 && s&activeMask == 0 {
		j.done <- struct{}{}
	}
}

// close refuses further helpers and waits for those working to leave.
func (j *nativeJob) close() {
	if s := j.state.Or(jobClosed); s&activeMask != 0 {
		<-j.done
	}
}

// minWorkerFlops is the least work, in flops, worth a helper; taskFlops is
// the work per task below which workers get fewer than three tasks each.
//
// From workerTaskFlops of work per worker on (a few milliseconds), each
// worker gets one task: the tasks split C, and each packs its own blocks
// of A and B, so fewer tasks pack less (a third less on GPT-2's 1024 x
// 768 x 768 products, two fifths on the LM head's dX = dY W), and a
// worker held up for a fraction of a millisecond (a helper waking up)
// costs little of such a task.
const (
	minWorkerFlops  = 2e6
	taskFlops       = 6e6
	workerTaskFlops = 4e8
)

// sgemmNative computes C = alpha op(A) op(B) + beta C (row-major, as
// Sgemm) with kernel kn on up to threads workers. alpha != 0, k >= 1,
// m, n >= 1.
func sgemmNative(kn *nativeKernel, threads int, tA, tB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if sgemvNative(kn, threads, tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc) {
		return // a few rows of A: the small-M path (gemv.go)
	}
	j := takeJob()
	j.kn, j.mr, j.nr = kn, kn.mr, kn.nr
	j.a, j.b = a, b
	kcMax, ncMax := kn.blocking()
	j.run(threads, kcMax, ncMax, 1, tA, tB, m, n, k, alpha, lda, ldb, beta, c, ldc)
}

// takeJob returns a finished job to reuse, or a new one.
func takeJob() *nativeJob {
	select {
	case j := <-nativeJobs:
		return j
	default:
		return &nativeJob{done: make(chan struct{}, 1)}
	}
}

// run splits the product set up in j (its kernel and operands) into tasks
// and works on them with up to threads workers, K in steps of at most
// kcMax and column blocks of at most ncMax; then it puts j back for reuse.
// speed is the kernel's rate over the float32 AVX-512 kernel's, for which
// minWorkerFlops and taskFlops are set: a faster kernel needs more work to
// be worth a helper or a task.
func (j *nativeJob) run(threads, kcMax, ncMax int, speed float64, tA, tB bool, m, n, k int, alpha float32, lda, ldb int, beta float32, c []float32, ldc int) {
	j.setProduct(kcMax, tA, tB, m, n, k, alpha, lda, ldb, beta, c, ldc)
	flops := 2 * float64(m) * float64(n) * float64(k) / speed
	workers := max(1, min(threads, int(flops/minWorkerFlops)))
	perWorker := min(3, max(1, int(flops/(float64(workers)*taskFlops))))
	if flops/float64(workers) >= workerTaskFlops {
		perWorker = 1
	}
	j.plan(workers, perWorker, ncMax)
	j.dispatch(workers)
}

// setProduct sets j's product, all but its kernel, A and B: the shape,
// scalars, C and the pitches, and the K step, K cut into equal steps of at
// most kcMax; and it restarts the task count.
func (j *nativeJob) setProduct(kcMax int, tA, tB bool, m, n, k int, alpha float32, lda, ldb int, beta float32, c []float32, ldc int) {
	j.tA, j.tB, j.m, j.n, j.k, j.alpha, j.beta = tA, tB, m, n, k, alpha, beta
	j.c, j.lda, j.ldb, j.ldc = c, lda, ldb, ldc
	j.next.Store(0)
	steps := (k + kcMax - 1) / kcMax
	j.kc = (k + steps - 1) / steps
}

// plan chooses the task grid: ms row blocks by nb column blocks, at least
// perWorker tasks per worker when there are several, column blocks at most
// ncMax wide, and the least repacking (rows split: B packed ms times;
// columns split: A packed nb times). Tasks are dealt out whole, so a grid
// is balanced when its last round leaves few workers idle (3 equal tasks on
// 2 workers take as long as 4); a balanced grid is preferred to a cheaper
// unbalanced one.
func (j *nativeJob) plan(workers, perWorker, ncMax int) {
	mr, nr := j.mr, j.nr
	mp, np := (j.m+mr-1)/mr, (j.n+nr-1)/nr
	nbMin := (j.n + ncMax - 1) / ncMax
	want := 1
	if workers > 1 {
		want = perWorker * workers
	}
	// Grids rank 2 when balanced with enough tasks, 1 with enough tasks, 0
	// otherwise; the highest rank wins, then the least cost (with too few
	// tasks, the most tasks).
	bestMs, bestNb, bestRank, bestCost := 1, nbMin, -1, 0.0
	for nb := nbMin; nb <= min(np, max(nbMin, want)+workers); nb++ {
		ms := min(mp, (want+nb-1)/nb)
		tasks := ms * nb
		rank, cost := 0, -float64(tasks)
		if tasks >= want {
			rank, cost = 1, float64(ms)*float64(j.n)+float64(nb)*float64(j.m)
			if idle := (tasks+workers-1)/workers*workers - tasks; 8*idle <= tasks {
				rank = 2
			}
		}
		if rank > bestRank || rank == bestRank && cost < bestCost {
			bestMs, bestNb, bestRank, bestCost = ms, nb, rank, cost
		}
	}
	j.rowsPer = (mp + bestMs - 1) / bestMs * mr
	j.colsPer = (np + bestNb - 1) / bestNb * nr
	j.ms = (j.m + j.rowsPer - 1) / j.rowsPer
	j.nb = (j.n + j.colsPer - 1) / j.colsPer
}

// work runs tasks until none are left.
func (j *nativeJob) work() {
	w := getWorker()
	tasks := int64(j.ms * j.nb)
	for {
		t := j.next.Add(1) - 1
		if t >= tasks {
			break
		}
		ib, jb := int(t)%j.ms, int(t)/j.ms
		j.task(w, ib*j.rowsPer, min(j.m, (ib+1)*j.rowsPer), jb*j.colsPer, min(j.n, (jb+1)*j.colsPer))
	}
	putWorker(w)
}

// task computes rows [i0, i1) by columns [j0, j1) of C.
func (j *nativeJob) task(w *nativeWorker, i0, i1, j0, j1 int) {
	if j.kb != nil {
		j.taskBF16(w, i0, i1, j0, j1)
		return
	}
	if j.gk != nil {
		for g := j0; g < j1; g += 16 {
			j.gk.group(j.kc, j.m, j.n, j.k, j.alpha, j.a, j.lda, j.b, j.ldb, j.beta, j.c, j.ldc, g)
		}
		return
	}
	kn := j.kn
	mr, nr := kn.mr, kn.nr
	panels := (j1 - j0 + nr - 1) / nr
	aStride := j.kc + aPad
	aSize := mr * aStride
	if j.tA {
		aSize = aGroup * mr * j.kc // interleaved: mr floats per k
	}
	kcMax, ncMax := kn.blocking()
	w.b = aligned(&w.bMem, panels*j.kc*nr, kcMax*ncMax)
	w.a = aligned(&w.aMem, aSize, max(mr*(kcMax+aPad), aGroup*mr*kcMax))
	// With few B panels to reuse a packed A micro-panel on, packing costs
	// more than reading A where it is, if the micro-panel in place stays
	// in L1 (directOK).
	direct := panels <= directPanels && directOK(j.tA, j.lda, j.kc)
	for p0 := 0; p0 < j.k; p0 += j.kc {
		kc := min(j.kc, j.k-p0)
		beta := j.beta
		if p0 > 0 {
			beta = 1
		}
		// Pack op(B)[p0:p0+kc, j0:j1] into panels of nr columns.
		if j.tB {
			for q := 0; q < panels; q++ {
				jq := j0 + q*nr
				kn.packBT(w.b[q*kc*nr:(q+1)*kc*nr], j.b[jq*j.ldb+p0:], j.ldb, kc, min(nr, j1-jq))
			}
		} else {
			kn.packBNB(w.b, j.b[p0*j.ldb+j0:], j.ldb, kc, j1-j0)
		}
		for i := i0; i < i1; i += mr {
			rows := min(mr, i1-i)
			var ap []float32
			var rs, cs int
			if direct && rows == mr {
				// Read A in place: its rows (or, transposed, its columns)
				// are the micro-panel.
				if j.tA {
					ap, rs, cs = j.a[p0*j.lda+i:], 1, j.lda
				} else {
					ap, rs, cs = j.a[i*j.lda+p0:], j.lda, 1
				}
			} else if j.tA {
				if direct { // the last, partial micro-panel
					kn.packAT(w.a, j.a[p0*j.lda+i:], j.lda, kc, rows)
					ap, rs, cs = w.a, 1, mr
				} else {
					// Micro-panels in groups of aGroup, packed together.
					g := (i - i0) / mr % aGroup
					if g == 0 {
						kn.packATG(w.a, j.a[p0*j.lda+i:], j.lda, kc, min(aGroup*mr, i1-i))
					}
					ap, rs, cs = w.a[g*mr*kc:(g+1)*mr*kc], 1, mr
				}
			} else {
				packAN(w.a, j.a[i*j.lda+p0:], j.lda, kc, rows, mr, aStride)
				ap, rs, cs = w.a, aStride, 1
			}
			for q := 0; q < panels; q++ {
				jq := j0 + q*nr
				kn.micro(kc, ap, rs, cs, w.b[q*kc*nr:(q+1)*kc*nr], j.c[i*j.ldc+jq:], j.ldc, j.alpha, beta, rows, min(nr, j1-jq))
			}
		}
	}
}

// packAN copies rows < rows of a non-transposed A (k floats each, pitch
// lda) to dst at pitch stride, and zeroes the rest of the mr rows.
func packAN(dst, a []float32, lda, k, rows, mr, stride int) {
	for r := 0; r < mr; r++ {
		d := dst[r*stride : r*stride+k]
		if r < rows {
			copy(d, a[r*lda:r*lda+k])
		} else {
			clear(d)
		}
	}
}
