package devicetest

import (
	"fmt"
	"math"
	"testing"

	"github.com/hilbert-ml/hilbert/device"
)

// gemmCase is one strided batched product. The stored matrices get pad
// extra columns of row pitch and gap extra elements between batch entries
// (both filled with NaN, so a kernel that reads outside its matrices shows
// it); shareB gives B a batch stride of 0 (one B for every entry).
type gemmCase struct {
	tA, tB      bool
	m, n, k     int
	batch       int // 0 is the GemmArgs default (one product)
	alpha, beta float32
	pad, gap    int
	shareB      bool
	nanC        bool // C starts as NaN (with beta 0 it must not be read)
	special     bool // NaN and Inf in A and B, which must propagate
	bf16        bool // A and B are bfloat16 (C float32)
	name        string
	storedA     [2]int // rows, cols of one stored A
	storedB     [2]int
	lda, ldb    int
	sa, sb, sc  int
	lenA, lenB  int
	lenC, ldc   int
	entries     int
}

func (c *gemmCase) String() string {
	tf := func(t bool) string {
		if t {
			return "T"
		}
		return "N"
	}
	s := fmt.Sprintf("%s%s_m%d_n%d_k%d_b%d_a%g_b%g", tf(c.tA), tf(c.tB), c.m, c.n, c.k, c.batch, c.alpha, c.beta)
	if c.pad > 0 {
		s += fmt.Sprintf("_pad%d", c.pad)
	}
	if c.gap > 0 {
		s += fmt.Sprintf("_gap%d", c.gap)
	}
	flags := []struct {
		on  bool
		tag string
	}{{c.shareB, "_sharedB"}, {c.nanC, "_nanC"}, {c.special, "_naninf"}, {c.bf16, "_bf16"}}
	for _, f := range flags {
		if f.on {
			s += f.tag
		}
	}
	return s
}

// layout works out the stored shapes, pitches, strides and lengths.
func (c *gemmCase) layout() {
	c.entries = max(c.batch, 1)
	c.storedA = [2]int{c.m, c.k}
	if c.tA {
		c.storedA = [2]int{c.k, c.m}
	}
	c.storedB = [2]int{c.k, c.n}
	if c.tB {
		c.storedB = [2]int{c.n, c.k}
	}
	c.lda, c.ldb, c.ldc = c.storedA[1]+c.pad, c.storedB[1]+c.pad, c.n+c.pad
	span := func(rows, ld int) int { return max(rows*ld, 0) }
	c.sa = span(c.storedA[0], c.lda) + c.gap
	c.sb = span(c.storedB[0], c.ldb) + c.gap
	c.sc = span(c.m, c.ldc) + c.gap
	c.lenA = c.entries * c.sa
	c.lenB = c.entries * c.sb
	if c.shareB {
		c.sb, c.lenB = 0, c.sb
	}
	c.lenC = c.entries * c.sc
}

func gemmCases() []gemmCase {
	var cs []gemmCase
	for _, tA := range []bool{false, true} {
		for _, tB := range []bool{false, true} {
			cs = append(cs,
				gemmCase{tA: tA, tB: tB, m: 5, n: 7, k: 3, alpha: 1},
				gemmCase{tA: tA, tB: tB, m: 4, n: 3, k: 6, batch: 3, alpha: 1.5, beta: -0.5, pad: 2, gap: 3},
				gemmCase{tA: tA, tB: tB, m: 3, n: 5, k: 4, batch: 2, alpha: -1, beta: 0, nanC: true, pad: 1},
				gemmCase{tA: tA, tB: tB, m: 6, n: 2, k: 5, batch: 4, alpha: 1, beta: 1, shareB: true},
				gemmCase{tA: tA, tB: tB, m: 4, n: 4, k: 4, alpha: 1, special: true},
				// Ragged sizes that cross the kernels' register and cache blocks.
				gemmCase{tA: tA, tB: tB, m: 37, n: 29, k: 131, batch: 2, alpha: 0.75, beta: 0.25, pad: 3},
			)
		}
	}
	cs = append(cs,
		gemmCase{m: large(263, 67), n: large(517, 133), k: large(301, 71), alpha: 1, beta: 0, nanC: true},
		gemmCase{tB: true, m: large(130, 33), n: large(257, 65), k: large(700, 90), batch: 2, alpha: 1, beta: 1},
		// A few rows of A against a transposed B (a generation step's
		// products; the CPU's small-M path): columns around groups of 16,
		// K past several cache steps, alpha, beta, NaN in C, batches.
		gemmCase{tB: true, m: 1, n: 37, k: large(1100, 70), alpha: 1, beta: 0, nanC: true, pad: 2},
		gemmCase{tB: true, m: 3, n: 16, k: 33, batch: 2, alpha: -0.5, beta: 2, pad: 1, gap: 3},
		gemmCase{tB: true, m: 8, n: large(300, 45), k: large(520, 40), alpha: 1.5, beta: 1, shareB: true, batch: 3},
		gemmCase{tB: true, m: 5, n: 17, k: 17, alpha: 1, special: true},
		// Empty products: nothing to do for m or n 0; C = beta*C for k 0
		// (0 for beta 0, over NaN), and alpha 0 is the same.
		gemmCase{m: 0, n: 4, k: 3, alpha: 1, beta: 1},
		gemmCase{m: 4, n: 0, k: 3, alpha: 1, beta: 1, batch: 2},
		gemmCase{m: 3, n: 4, k: 0, alpha: 1, beta: 0, nanC: true, batch: 2},
		gemmCase{m: 3, n: 4, k: 0, alpha: 1, beta: 2, pad: 1},
		gemmCase{tA: true, m: 3, n: 4, k: 5, alpha: 0, beta: 0, nanC: true},
		gemmCase{m: 2, n: 3, k: 4, batch: 0, alpha: 2, beta: 0.5},
	)
	return cs
}

// gemm checks Gemm against a float64 product of the rounded operands,
// within the error bound of a k-term float sum: |got - want| <= (k+2) u
// (|alpha| sum |a||b| + |beta c|), u the dtype's unit roundoff. Padding and
// the gaps between batch entries of C must be left as they were.
func (h *harness) gemm(t *testing.T) {
	u := 0x1p-24
	if h.dt == device.Float64 {
		u = 0x1p-53
	}
	for i, c := range h.gemmCases(t) {
		c.layout()
		t.Run(c.String(), func(t *testing.T) { h.gemmCase(t, i, c, u) })
	}
}

// gemmCases are gemmCases, and for float32 on a device that stores
// bfloat16 the first 24 again with bfloat16 A and B (the autocast
// products).
func (h *harness) gemmCases(t *testing.T) []gemmCase {
	cases := gemmCases()
	if h.dt != device.Float32 {
		return cases
	}
	buf, err := h.dev.Alloc(device.BFloat16, 1)
	if err != nil {
		t.Logf("%s declares no bfloat16 (Alloc: %v): no bfloat16 Gemm operands checked", h.dev.Name(), err)
		return cases
	}
	h.dev.Free(buf)
	for _, c := range gemmCases()[:24] {
		c.bf16 = true
		cases = append(cases, c)
	}
	return cases
}

// inside marks the elements of one stored operand (rows x cols of pitch
// ld, entries of stride st) that belong to its matrices.
func inside(n, entries, st, rows, cols, ld int) []bool {
	in := make([]bool, n)
	for e := range entries {
		for r := range rows {
			for q := range cols {
				in[e*st+r*ld+q] = true
			}
		}
	}
	return in
}

// operands draws case i's A, B and C (rounded to the dtype, or to
// bfloat16), with NaN in A's and B's padding and gaps and a sentinel in
// C's, and returns which elements of C are inside its matrices.
func (h *harness) operands(i int, c gemmCase) (a, b, cv []float64, inC []bool) {
	operand := h.roundAll
	if c.bf16 {
		operand = func(v []float64) []float64 {
			out := make([]float64, len(v))
			for i, x := range v {
				out[i] = float64(bf16Reference(float32(x)))
			}
			return out
		}
	}
	a = operand(randoms(uint64(1000+i), c.lenA, 1))
	b = operand(randoms(uint64(2000+i), c.lenB, 1))
	cv = h.roundAll(randoms(uint64(3000+i), c.lenC, 1))
	nan := math.NaN()
	const sentinel = 7
	inA := inside(len(a), c.entries, c.sa, c.storedA[0], c.storedA[1], c.lda)
	inB := inside(len(b), c.entries, c.sb, c.storedB[0], c.storedB[1], c.ldb)
	inC = inside(len(cv), c.entries, c.sc, c.m, c.n, c.ldc)
	for j := range a {
		if !inA[j] {
			a[j] = nan
		}
	}
	for j := range b {
		if !inB[j] {
			b[j] = nan
		}
	}
	for j := range cv {
		switch {
		case !inC[j]:
			cv[j] = sentinel
		case c.nanC:
			cv[j] = nan
		}
	}
	if c.special {
		a[1] = nan                 // op(A) row or column: NaN must spread
		b[len(b)-1] = math.Inf(1)  // one element of B
		a[len(a)-1] = math.Inf(-1) // and of A
	}
	return a, b, cv, inC
}

// gemmCase runs case i and checks every element of C.
func (h *harness) gemmCase(t *testing.T, i int, c gemmCase, u float64) {
	a, b, cv, inC := h.operands(i, c)
	A, B, C := h.upload(t, a), h.upload(t, b), h.upload(t, cv)
	if c.bf16 {
		A, B = h.alloc(t, device.BFloat16, len(a)), h.alloc(t, device.BFloat16, len(b))
		h.dev.CopyFloat64FromHost(A, a) // exact: the values are bfloat16
		h.dev.CopyFloat64FromHost(B, b)
	}
	h.dev.Gemm(device.GemmArgs{TransA: c.tA, TransB: c.tB, M: c.m, N: c.n, K: c.k,
		Alpha: c.alpha, Beta: c.beta,
		A: A, LDA: c.lda, StrideA: c.sa, B: B, LDB: c.ldb, StrideB: c.sb,
		C: C, LDC: c.ldc, StrideC: c.sc, Batch: c.batch})
	got := h.download(t, C)
	bad := 0
	for j := range cv {
		want, bound := cv[j], 0.0
		if inC[j] {
			want, bound = c.reference(a, b, cv[j], j, u)
		}
		ok := false
		switch {
		case math.IsNaN(want):
			ok = math.IsNaN(got[j])
		case math.IsInf(want, 0):
			ok = got[j] == want
		case !inC[j]:
			ok = math.Float64bits(got[j]) == math.Float64bits(want)
		default:
			ok = math.Abs(got[j]-want) <= bound
		}
		if !ok {
			if bad < 5 {
				where := "element"
				if !inC[j] {
					where = "padding element (must be left alone)"
				}
				t.Errorf("C %s %d = %v, want %v (bound %.3g)", where, j, got[j], want, bound)
			}
			bad++
		}
	}
	if bad > 5 {
		t.Errorf("%d of %d elements of C differ", bad, len(cv))
	}
}

// reference returns element j of alpha op(A) op(B) + beta C in float64
// (c0 its starting value) and the error bound of a float sum of it.
func (c gemmCase) reference(a, b []float64, c0 float64, j int, u float64) (want, bound float64) {
	opA := func(e, i, p int) float64 {
		if c.tA {
			return a[e*c.sa+p*c.lda+i]
		}
		return a[e*c.sa+i*c.lda+p]
	}
	opB := func(e, p, j int) float64 {
		if c.tB {
			return b[e*c.sb+j*c.ldb+p]
		}
		return b[e*c.sb+p*c.ldb+j]
	}
	e, r := j/max(c.sc, 1), j%max(c.sc, 1)
	row, col := r/c.ldc, r%c.ldc
	var sum, mag float64
	for p := range c.k {
		x := opA(e, row, p) * opB(e, p, col)
		sum += x
		mag += math.Abs(x)
	}
	want = float64(c.alpha) * sum
	mag = math.Abs(float64(c.alpha)) * mag
	if c.alpha == 0 || c.k == 0 {
		want, mag = 0, 0
	}
	if c.beta != 0 {
		want += float64(c.beta) * c0
		mag += math.Abs(float64(c.beta) * c0)
	}
	return want, float64(c.k+2)*u*mag + 1e-300
}
