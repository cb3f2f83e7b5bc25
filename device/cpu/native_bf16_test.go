package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/hilbert-ml/hilbert/device"
)

// bf16Case is one bfloat16 product for the native GEMM tests (pitches
// padded by pad, as nativeCase).
type bf16Case struct {
	tA, tB      bool
	m, n, k     int
	alpha, beta float32
	pad         int
	nanC        bool // C starts as NaN (beta 0 must not read it)
	// fill: "" normal values; "wide": magnitudes over 2^-12..2^12;
	// "cancel": +-4096, +-1 and 0.5, whose sums cancel, so that the order
	// of the additions shows; "naninf": a NaN and Infs; "tiny": denormals
	// and underflow.
	fill string
}

func (c bf16Case) String() string {
	s := fmt.Sprintf("tA=%v,tB=%v/%dx%dx%d/alpha%g,beta%g,pad%d", c.tA, c.tB, c.m, c.n, c.k, c.alpha, c.beta, c.pad)
	if c.nanC {
		s += ",nanC"
	}
	if c.fill != "" {
		s += "," + c.fill
	}
	return s
}

// bf16Cases covers every transpose pair on odd and even K, K = 1, M and N
// off the kernels' blocks (12 x 32, 32 x 32, the test kernels' 5 x 32), K
// over several steps of the small-blocking test kernel and of AMX
// (K 2100 against its kc of 1024), beta 0 over NaN,
// beta 1 and others, and NaN, Inf and denormal operands.
func bf16Cases() []bf16Case {
	var cs []bf16Case
	shapes := [][3]int{
		{1, 1, 1}, {2, 3, 1}, {13, 33, 3}, {12, 32, 32}, {32, 32, 64},
		{33, 65, 31}, {7, 17, 130}, {37, 40, 300}, {9, 40, 800}, {3, 33, 2100},
	}
	for _, tA := range []bool{false, true} {
		for _, tB := range []bool{false, true} {
			for i, s := range shapes {
				cs = append(cs,
					bf16Case{tA: tA, tB: tB, m: s[0], n: s[1], k: s[2], alpha: 1, beta: 0, pad: i % 3, nanC: true},
					bf16Case{tA: tA, tB: tB, m: s[0], n: s[1], k: s[2], alpha: -0.75, beta: 0.5, pad: 1 + i%2},
				)
			}
			cs = append(cs,
				bf16Case{tA: tA, tB: tB, m: 20, n: 40, k: 9, alpha: 1, beta: 1, pad: 3},
				bf16Case{tA: tA, tB: tB, m: 14, n: 35, k: 17, alpha: 1, beta: 0, fill: "naninf"},
				bf16Case{tA: tA, tB: tB, m: 14, n: 35, k: 40, alpha: 1, beta: 1, fill: "tiny"},
				bf16Case{tA: tA, tB: tB, m: 33, n: 33, k: 96, alpha: 1, beta: 0, fill: "wide"},
				bf16Case{tA: tA, tB: tB, m: 33, n: 33, k: 96, alpha: 1, beta: 0, fill: "cancel"},
			)
		}
	}
	return cs
}

// bf16Operands draws a case's stored A and B (bfloat16) and C, with
// exact-length windows so that a read past the last element panics.
func bf16Operands(c bf16Case, rng *rand.Rand) (a, b []uint16, cc []float32, lda, ldb, ldc int) {
	rowsA, colsA := c.m, c.k
	if c.tA {
		rowsA, colsA = c.k, c.m
	}
	rowsB, colsB := c.k, c.n
	if c.tB {
		rowsB, colsB = c.n, c.k
	}
	lda, ldb, ldc = colsA+c.pad, colsB+c.pad, c.n+c.pad
	draw := func(n int) []uint16 {
		x := make([]uint16, n)
		for i := range x {
			v := float32(rng.NormFloat64())
			switch c.fill {
			case "wide":
				v *= float32(math.Exp2(float64(rng.IntN(25) - 12)))
			case "cancel":
				v = []float32{4096, -4096, 1, -1, 0.5}[rng.IntN(5)]
			case "tiny":
				// Magnitudes around 2^-63: products around 2^-126, some
				// below float32's normal range, and a quarter denormal.
				v *= 0x1p-63
				if i%4 == 0 {
					v = float32(rng.NormFloat64()) * 0x1p-130
				}
			}
			x[i] = device.BFloat16FromFloat32(v)
		}
		return x
	}
	a, b = draw((rowsA-1)*lda+colsA), draw((rowsB-1)*ldb+colsB)
	if c.fill == "naninf" {
		a[0] = device.BFloat16FromFloat32(float32(math.NaN()))
		a[len(a)-1] = device.BFloat16FromFloat32(float32(math.Inf(1)))
		b[len(b)/2] = device.BFloat16FromFloat32(float32(math.Inf(-1)))
	}
	cc = make([]float32, c.m*ldc)
	for i := range cc {
		cc[i] = float32(rng.NormFloat64())
		if c.nanC {
			cc[i] = float32(math.NaN())
		}
	}
	return a, b, cc, lda, ldb, ldc
}

// refGemmBF16 is C = alpha op(A) op(B) + beta C in float64 of the
// bfloat16 operands read as the kernels read them (denormals as zero), and
// the sum of its terms' magnitudes, which bounds a float32 sum's error.
func refGemmBF16(c bf16Case, a, b []uint16, lda, ldb int, cc []float32, ldc int) (want, mag []float64) {
	want, mag = make([]float64, c.m*c.n), make([]float64, c.m*c.n)
	for i := range c.m {
		for jj := range c.n {
			var s, m float64
			for l := range c.k {
				ai, bi := i*lda+l, l*ldb+jj
				if c.tA {
					ai = l*lda + i
				}
				if c.tB {
					bi = jj*ldb + l
				}
				x := float64(dazBF16(a[ai])) * float64(dazBF16(b[bi]))
				s += x
				m += math.Abs(x)
			}
			s *= float64(c.alpha)
			m *= math.Abs(float64(c.alpha))
			if c.beta != 0 {
				s += float64(c.beta) * float64(cc[i*ldc+jj])
				m += math.Abs(float64(c.beta) * float64(cc[i*ldc+jj]))
			}
			want[i*c.n+jj], mag[i*c.n+jj] = s, m
		}
	}
	return want, mag
}

// runBF16Case runs one case on kernel kb and checks C against the float64
// reference within a float32 sum's error bound (NaN and Inf where the
// reference has them; tiny results, which the kernels flush, within 2^-126
// per term), and that C outside the product is untouched. When ref is set
// it must also equal, bit for bit (NaN as NaN), ref's result through the
// same driver.
func runBF16Case(t *testing.T, kb, ref *bf16Kernel, threads int, c bf16Case, rng *rand.Rand) {
	t.Helper()
	a, b, cc, lda, ldb, ldc := bf16Operands(c, rng)
	want, mag := refGemmBF16(c, a, b, lda, ldb, cc, ldc)
	orig := append([]float32(nil), cc...)
	n := (c.m-1)*ldc + c.n
	bf16Gemm(kb, threads, c.tA, c.tB, c.m, c.n, c.k, c.alpha, a, lda, b, ldb, c.beta, cc[:n], ldc)
	var exact []float32
	if ref != nil {
		exact = append([]float32(nil), orig...)
		bf16Gemm(ref, threads, c.tA, c.tB, c.m, c.n, c.k, c.alpha, a, lda, b, ldb, c.beta, exact[:n], ldc)
	}
	for i := 0; i < c.m; i++ {
		for jj := 0; jj < ldc; jj++ {
			got := cc[i*ldc+jj]
			if jj >= c.n {
				if math.Float32bits(got) != math.Float32bits(orig[i*ldc+jj]) {
					t.Fatalf("%s: C[%d,%d] outside the product changed to %v", kb.name, i, jj, got)
				}
				continue
			}
			if exact != nil {
				e := exact[i*ldc+jj]
				if math.Float32bits(got) != math.Float32bits(e) && !(got != got && e != e) {
					t.Fatalf("%s: C[%d,%d] = %v (%#08x), %s gives %v (%#08x)", kb.name, i, jj, got, math.Float32bits(got), ref.name, e, math.Float32bits(e))
				}
			}
			w := want[i*c.n+jj]
			tol := float64(c.k+2)*0x1p-24*mag[i*c.n+jj] + float64(c.k+2)*0x1p-126
			switch {
			case math.IsNaN(w):
				if got == got {
					t.Fatalf("%s: C[%d,%d] = %v, want NaN", kb.name, i, jj, got)
				}
			case math.IsInf(w, 0):
				if float64(got) != w {
					t.Fatalf("%s: C[%d,%d] = %v, want %v", kb.name, i, jj, got, w)
				}
			case math.Abs(float64(got)-w) > tol || got != got:
				t.Fatalf("%s: C[%d,%d] = %v, want %v (tolerance %.3g)", kb.name, i, jj, got, w, tol)
			}
		}
	}
}

// testBF16Kernels are the portable reference kernels in the geometries of
// the assembly ones, with small K steps so that the cases cross them: they
// check the driver and packing on every machine.
func testBF16Kernels() []*bf16Kernel {
	small := func() (int, int) { return 64, 128 }
	return []*bf16Kernel{
		refBF16Kernel(&bf16Kernel{name: "pairs5x32", mr: 5, nr: 32, kAlign: 2, blocking: small, pack: goPacker}),
		refBF16Kernel(&bf16Kernel{name: "tiles32x32", mr: 32, nr: 32, kAlign: 32, tiles: true, blocking: small, pack: goPacker}),
	}
}

// TestBF16Kernels runs every case on the portable reference kernels and on
// each assembly bfloat16 kernel this CPU has (checked bit for bit against
// the reference kernel of its geometry), on one and on three workers.
func TestBF16Kernels(t *testing.T) {
	type run struct{ kb, ref *bf16Kernel }
	var runs []run
	for _, kb := range testBF16Kernels() {
		runs = append(runs, run{kb, nil})
	}
	for _, kb := range bf16Kernels {
		runs = append(runs, run{kb, refBF16Kernel(kb)})
	}
	if len(bf16Kernels) == 0 {
		t.Logf("this CPU has no bfloat16 assembly kernel: only the portable reference kernels are checked")
	}
	for _, r := range runs {
		for _, threads := range []int{1, 3} {
			t.Run(fmt.Sprintf("%s/threads%d", r.kb.name, threads), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(7, uint64(threads)))
				for _, c := range bf16Cases() {
					t.Run(c.String(), func(t *testing.T) { runBF16Case(t, r.kb, r.ref, threads, c, rng) })
				}
			})
		}
	}
}

// bf16Packers are the packers to check: the portable one and those of the
// assembly kernels this CPU has.
func bf16Packers() []*bf16Packer {
	ps := []*bf16Packer{goPacker}
	for _, kb := range bf16Kernels {
		if !slices.Contains(ps, kb.pack) {
			ps = append(ps, kb.pack)
		}
	}
	return ps
}

// TestBF16Packing checks every packer against the formats' definitions:
// pairs of K in the low and high halves, zero past K and past the columns
// or rows given, on odd K, K in several 16-pair blocks and a remainder,
// and partial and several panels.
func TestBF16Packing(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	const nr = 32
	for _, pk := range bf16Packers() {
		for _, k := range []int{1, 2, 7, 32, 33, 64, 100} {
			for _, kAlign := range []int{2, 32} {
				kp := roundUp(k, kAlign)
				for _, cols := range []int{1, 31, 32, 33, 70} {
					for _, tB := range []bool{false, true} {
						rows, ld := k, cols+3
						if tB {
							rows, ld = cols, k+3
						}
						src := make([]uint16, rows*ld)
						for i := range src {
							src[i] = uint16(rng.Uint32())
						}
						panels := (cols + nr - 1) / nr
						dst := make([]uint32, panels*kp/2*nr)
						for i := range dst {
							dst[i] = 0xdeadbeef
						}
						pk.b(dst, src, ld, tB, k, kp, cols, nr)
						at := func(l, j int) uint32 { // op(B)[l, j], 0 outside
							switch {
							case l >= k || j >= cols:
								return 0
							case tB:
								return uint32(src[j*ld+l])
							}
							return uint32(src[l*ld+j])
						}
						for q := range panels {
							for p := range kp / 2 {
								for jj := range nr {
									j := q*nr + jj
									want := at(2*p, j) | at(2*p+1, j)<<16
									if got := dst[q*kp/2*nr+p*nr+jj]; got != want {
										t.Fatalf("%s b tB=%v k%d kp%d cols%d: panel %d [%d,%d] = %#x, want %#x", pk.name, tB, k, kp, cols, q, p, jj, got, want)
									}
								}
							}
						}
					}
				}
				for _, mr := range []int{12, 32} {
					for _, rows := range []int{1, 5, 12, 16, 31, 32} {
						if rows > mr {
							continue
						}
						for _, tA := range []bool{false, true} {
							r, ld := rows, k+5
							if tA {
								r, ld = k, rows+5
							}
							src := make([]uint16, r*ld)
							for i := range src {
								src[i] = uint16(rng.Uint32())
							}
							pitch := kp + aPad16
							dst := make([]uint16, roundUp(mr, 16)*pitch)
							for i := range dst {
								dst[i] = 0xffff
							}
							pk.a(dst, pitch, src, ld, tA, k, kp, rows, mr, make([]uint32, kp*16))
							for rr := range mr {
								for l := range kp {
									want := uint16(0)
									switch {
									case rr >= rows || l >= k:
									case tA:
										want = src[l*ld+rr]
									default:
										want = src[rr*ld+l]
									}
									if got := dst[rr*pitch+l]; got != want {
										t.Fatalf("%s a tA=%v k%d kp%d rows%d mr%d: [%d,%d] = %#x, want %#x", pk.name, tA, k, kp, rows, mr, rr, l, got, want)
									}
								}
							}
						}
					}
				}
			}
		}
	}
}

// TestNativeBF16Concurrent runs bfloat16 products (on each kernel this CPU
// has, or the portable ones) and float32 products from many goroutines at
// once, each on two workers, and checks every result: the two kinds share
// the job pool, the workers' buffers and the helpers.
func TestNativeBF16Concurrent(t *testing.T) {
	kernels := bf16Kernels
	if len(kernels) == 0 {
		kernels = testBF16Kernels()
	}
	var wg sync.WaitGroup
	for g := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 99))
			bcs, fcs := bf16Cases(), nativeCases()
			for i := range 6 {
				kb := kernels[(g+i)%len(kernels)]
				runBF16Case(t, kb, nil, 2, bcs[(g*7+i*5)%len(bcs)], rng)
				runNativeCase(t, nativeBest, 2, fcs[(g*5+i*3)%len(fcs)], rng)
			}
		}()
	}
	wg.Wait()
}
