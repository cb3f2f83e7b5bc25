package cpu

import "unsafe"

// The native GEMM's bfloat16 products: C (float32) = alpha op(A) op(B) +
// beta C with A and B bfloat16 (autocast's operands), multiplied in pairs
// along K by a bfloat16 kernel and accumulated in float32, without
// widening the operands first. The task grid, the K steps and the helpers
// are the float32 GEMM's (native.go); the packed formats are the kernels':
//
//	A  mr rows of kp bfloat16 each, at a pitch of kp+aPad16 (a row-major
//	   A with an even K step is read in place instead), zero-padded to kp
//	   and to mr rows;
//	B  panels of nr columns, one uint32 per pair of K and column: the
//	   bfloat16 of row 2p in the low half, of row 2p+1 in the high half
//	   (the pair order of VDPBF16PS and of AMX's TDPBF16PS), kp/2 pairs,
//	   zero-padded,
//
// where kp is the K step rounded up to the kernel's kAlign (2 for pairs,
// 32 for AMX tiles). Odd K and the padding contribute exact zeros.

// bf16Kernel is one bfloat16 micro-kernel with its blocking.
type bf16Kernel struct {
	name   string
	mr, nr int
	// kAlign is the multiple of K the kernel works in (packed K is padded
	// to it; A is read in place only for K steps that are multiples).
	kAlign int
	// tiles: the kernel sums as AMX's TDPBF16PS does, in two chains per
	// 32 K (even and odd K) added to C together; otherwise as VDPBF16PS,
	// one chain over the pairs (native_bf16_ref_test.go has both).
	tiles bool
	// micro computes C = alpha A B + beta C on rows < rows and columns <
	// cols of a block of C at c (row pitch ldc): A is mr rows of kp
	// bfloat16 at a[r lda + l], B the ceil(cols/nr) packed panels at b,
	// panel q at b[q nr kp/2:]. kp is a positive multiple of kAlign; w
	// gives scratch memory.
	micro func(kp int, a []uint16, lda int, b []uint32, c []float32, ldc int, alpha, beta float32, rows, cols int, w *nativeWorker)
	// blocking returns the most K per step (kc) and columns per block
	// (nc, a multiple of nr).
	blocking func() (kc, nc int)
	// pack packs the operands.
	pack *bf16Packer
	// speed is the kernel's rate over the float32 AVX-512 kernel's, which
	// sizes the tasks (nativeJob.run); 0 is taken as 1.
	speed float64
}

// bf16Packer packs the operands of the bfloat16 kernels (the formats above).
type bf16Packer struct {
	name string
	// a writes the micro-panel of rows < rows (zero to mr rows) of op(A),
	// K < k (zero to kp), at pitch: op(A)[r, l] is a[r lda + l], or
	// a[l lda + r] when tA. tmp is scratch of kp*16 uint32.
	a func(dst []uint16, pitch int, a []uint16, lda int, tA bool, k, kp, rows, mr int, tmp []uint32)
	// b writes the ceil(cols/nr) panels of op(B)'s columns < cols, panel q
	// at dst[q kp/2 nr:], kp/2 pairs each (zero past k and cols): op(B)[l,
	// j] is b[l ldb + j], or b[j ldb + l] when tB.
	b func(dst []uint32, b []uint16, ldb int, tB bool, k, kp, cols, nr int)
}

// goPacker is the portable packer.
var goPacker = &bf16Packer{
	name: "go",
	a: func(dst []uint16, pitch int, a []uint16, lda int, tA bool, k, kp, rows, mr int, _ []uint32) {
		if tA {
			packA16T(dst, pitch, a, lda, k, kp, rows, mr)
		} else {
			packA16N(dst, pitch, a, lda, k, kp, rows, mr)
		}
	},
	b: func(dst []uint32, b []uint16, ldb int, tB bool, k, kp, cols, nr int) {
		size := kp / 2 * nr
		for q := 0; q*nr < cols; q++ {
			d := dst[q*size : (q+1)*size]
			if tB {
				packB16T(d, b[q*nr*ldb:], ldb, k, min(nr, cols-q*nr), nr)
			} else {
				packB16N(d, b[q*nr:], ldb, k, min(nr, cols-q*nr), nr)
			}
		}
	},
}

// bf16Kernels lists the bfloat16 kernels this CPU can run, fastest first
// (none without the instructions). Tests run each.
var bf16Kernels = archBF16Kernels()

// aPad16 is the gap, in bfloat16, between rows of a packed A (as aPad).
const aPad16 = 32

// bf16Blocking returns a kernel's blocking from the cache sizes as
// nativeKernel.blocking does for float32, counted in pairs of K (a pair
// takes the bytes of one float32): the A micro-panel takes half of L1, the
// packed B block half of L2. kc is a multiple of 32.
func bf16Blocking(mr, nr int) (kc, nc int) {
	pairs := cacheL1d / 2 / (4 * mr)
	pairs = min(max(pairs&^15, 32), 1024)
	nc = cacheL2 / 2 / (4 * pairs)
	nc = min(max(nc/nr*nr, 4*nr), 4096)
	return 2 * pairs, nc
}

// bf16Gemm runs C = alpha op(A) op(B) + beta C (row-major, as Sgemm) with
// bfloat16 A and B on kernel kb with up to threads workers. alpha != 0,
// k >= 1, m, n >= 1.
func bf16Gemm(kb *bf16Kernel, threads int, tA, tB bool, m, n, k int, alpha float32, a []uint16, lda int, b []uint16, ldb int, beta float32, c []float32, ldc int) {
	j := takeJob()
	j.kb, j.mr, j.nr = kb, kb.mr, kb.nr
	j.a16, j.b16 = a, b
	kcMax, ncMax := kb.blocking()
	speed := kb.speed
	if speed == 0 {
		speed = 1
	}
	j.run(threads, kcMax, ncMax, speed, tA, tB, m, n, k, alpha, lda, ldb, beta, c, ldc)
}

// roundUp returns x rounded up to a multiple of m.
func roundUp(x, m int) int { return (x + m - 1) / m * m }

// uint16s and uint32s view float32 memory (a worker's buffers) as
// bfloat16 and as pairs of them.
func uint16s(s []float32) []uint16 {
	return unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(s))), 2*len(s))
}

func uint32s(s []float32) []uint32 {
	return unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(s))), len(s))
}

// taskBF16 computes rows [i0, i1) by columns [j0, j1) of C of a bfloat16
// product (task's counterpart).
func (j *nativeJob) taskBF16(w *nativeWorker, i0, i1, j0, j1 int) {
	kb := j.kb
	mr, nr := kb.mr, kb.nr
	panels := (j1 - j0 + nr - 1) / nr
	kcMax, ncMax := kb.blocking()
	kpMax := roundUp(kcMax, kb.kAlign)
	kpStep := roundUp(j.kc, kb.kAlign)
	pitch := kpStep + aPad16
	// Float32 counts: a pair of B is one float32, two bfloat16 of A one;
	// A gets at least 16 rows (the AVX-512 packer transposes 16 at once).
	aRows := roundUp(mr, 16)
	w.b = aligned(&w.bMem, panels*kpStep/2*nr, kpMax/2*ncMax)
	w.a = aligned(&w.aMem, aRows*pitch/2, aRows*(kpMax+aPad16)/2)
	bp, ap := uint32s(w.b), uint16s(w.a)
	var tmp []uint32
	if j.tA {
		w.aT = aligned(&w.aTMem, kpStep*16, kpMax*16)
		tmp = uint32s(w.aT)
	}
	for p0 := 0; p0 < j.k; p0 += j.kc {
		kc := min(j.kc, j.k-p0)
		kp := roundUp(kc, kb.kAlign)
		beta := j.beta
		if p0 > 0 {
			beta = 1
		}
		size := kp / 2 * nr
		if j.tB {
			kb.pack.b(bp, j.b16[j0*j.ldb+p0:], j.ldb, true, kc, kp, j1-j0, nr)
		} else {
			kb.pack.b(bp, j.b16[p0*j.ldb+j0:], j.ldb, false, kc, kp, j1-j0, nr)
		}
		for i := i0; i < i1; i += mr {
			rows := min(mr, i1-i)
			var a []uint16
			var lda int
			switch {
			case !j.tA && rows == mr && kp == kc:
				// Row-major A in place: its rows are the micro-panel's.
				a, lda = j.a16[i*j.lda+p0:], j.lda
			case j.tA:
				kb.pack.a(ap, pitch, j.a16[p0*j.lda+i:], j.lda, true, kc, kp, rows, mr, tmp)
				a, lda = ap, pitch
			default:
				kb.pack.a(ap, pitch, j.a16[i*j.lda+p0:], j.lda, false, kc, kp, rows, mr, tmp)
				a, lda = ap, pitch
			}
			kb.micro(kp, a, lda, bp[:panels*size], j.c[i*j.ldc+j0:], j.ldc, j.alpha, beta, rows, j1-j0, w)
		}
	}
}

// packA16N copies rows < rows of a row-major A (k bfloat16 each, pitch
// lda) to dst at pitch pitch, zero from k to kp and in rows rows..mr-1.
func packA16N(dst []uint16, pitch int, a []uint16, lda, k, kp, rows, mr int) {
	for r := 0; r < mr; r++ {
		d := dst[r*pitch : r*pitch+kp]
		if r < rows {
			copy(d, a[r*lda:r*lda+k])
			clear(d[k:])
		} else {
			clear(d)
		}
	}
}

// packA16T writes the rows < rows of op(A) = A^T of an A stored k x m
// (pitch lda): dst[r pitch + l] = a[l lda + r], zero-padded as packA16N.
func packA16T(dst []uint16, pitch int, a []uint16, lda, k, kp, rows, mr int) {
	for l := 0; l < k; l++ {
		src := a[l*lda : l*lda+rows]
		for r, v := range src {
			dst[r*pitch+l] = v
		}
	}
	for r := 0; r < mr; r++ {
		if r < rows {
			clear(dst[r*pitch+k : r*pitch+kp])
		} else {
			clear(dst[r*pitch : r*pitch+kp])
		}
	}
}

// packB16N writes a panel of nr columns of a B stored k x n (pitch ldb):
// dst[p nr + j] = b[2p ldb + j] | b[(2p+1) ldb + j] << 16 for j < cols,
// rows past k and columns past cols zero, over all of dst's pairs.
func packB16N(dst []uint32, b []uint16, ldb, k, cols, nr int) {
	pairs := len(dst) / nr
	for p := 0; p < pairs; p++ {
		d := dst[p*nr : (p+1)*nr]
		switch {
		case 2*p+1 < k:
			r0, r1 := b[2*p*ldb:2*p*ldb+cols], b[(2*p+1)*ldb:(2*p+1)*ldb+cols]
			for jj, v := range r0 {
				d[jj] = uint32(v) | uint32(r1[jj])<<16
			}
			clear(d[cols:])
		case 2*p < k:
			r0 := b[2*p*ldb : 2*p*ldb+cols]
			for jj, v := range r0 {
				d[jj] = uint32(v)
			}
			clear(d[cols:])
		default:
			clear(d)
		}
	}
}

// packB16T writes a panel of nr columns of op(B) = B^T of a B stored n x k
// (pitch ldb): column j is row j of b, dst[p nr + j] = b[j ldb + 2p] |
// b[j ldb + 2p+1] << 16, zero-padded as packB16N.
func packB16T(dst []uint32, b []uint16, ldb, k, cols, nr int) {
	packB16TFrom(dst, b, ldb, k, cols, nr, 0)
}

// packB16TFrom is packB16T on the pairs from from on.
func packB16TFrom(dst []uint32, b []uint16, ldb, k, cols, nr, from int) {
	pairs := len(dst) / nr
	for jj := 0; jj < nr; jj++ {
		if jj >= cols {
			for p := from; p < pairs; p++ {
				dst[p*nr+jj] = 0
			}
			continue
		}
		row := b[jj*ldb : jj*ldb+k]
		p := from
		for ; 2*p+1 < k; p++ {
			dst[p*nr+jj] = uint32(row[2*p]) | uint32(row[2*p+1])<<16
		}
		if 2*p < k {
			dst[p*nr+jj] = uint32(row[2*p])
			p++
		}
		for ; p < pairs; p++ {
			dst[p*nr+jj] = 0
		}
	}
}
