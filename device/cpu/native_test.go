package cpu

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// nativeCase is one product for the native GEMM tests, with padded pitches
// (lda = stored width + pad) so that reads past a row show up.
type nativeCase struct {
	tA, tB      bool
	m, n, k     int
	alpha, beta float32
	pad         int
	nanC        bool
}

func (c nativeCase) String() string {
	return fmt.Sprintf("tA=%v,tB=%v/%dx%dx%d/alpha%g,beta%g,pad%d,nan%v", c.tA, c.tB, c.m, c.n, c.k, c.alpha, c.beta, c.pad, c.nanC)
}

// nativeCases covers every transpose pair on ragged shapes (edges of every
// kernel's MR and NR, K over several kc steps), alpha and beta, beta 0 over
// a C full of NaN, and the smallest sizes.
func nativeCases() []nativeCase {
	var cs []nativeCase
	shapes := [][3]int{
		{1, 1, 1}, {1, 33, 2}, {13, 1, 5}, {2, 3, 1},
		{12, 32, 16}, {6, 16, 7}, {4, 16, 3},
		{25, 65, 17}, {13, 33, 31}, {7, 17, 130},
		{50, 70, 1100}, // three K steps at kc 512 (AVX-512), two at 1024 (AVX2, Go)
		{37, 1029, 33}, // several column blocks
		{300, 40, 20},  // several row blocks
	}
	for _, tA := range []bool{false, true} {
		for _, tB := range []bool{false, true} {
			for i, s := range shapes {
				cs = append(cs,
					nativeCase{tA: tA, tB: tB, m: s[0], n: s[1], k: s[2], alpha: 1, beta: 0, pad: i % 3, nanC: true},
					nativeCase{tA: tA, tB: tB, m: s[0], n: s[1], k: s[2], alpha: -0.75, beta: 0.5, pad: 1 + i%2},
				)
			}
			cs = append(cs, nativeCase{tA: tA, tB: tB, m: 20, n: 40, k: 9, alpha: 2, beta: 1, pad: 3})
		}
	}
	return cs
}

// runNativeCase runs one case on kernel kn with the given threads and
// checks it against a float64 reference, and that C outside the product
// (the pads) is untouched.
func runNativeCase(t *testing.T, kn *nativeKernel, threads int, c nativeCase, rng *rand.Rand) {
	t.Helper()
	fill := func(n int) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		return x
	}
	rowsA, colsA := c.m, c.k
	if c.tA {
		rowsA, colsA = c.k, c.m
	}
	rowsB, colsB := c.k, c.n
	if c.tB {
		rowsB, colsB = c.n, c.k
	}
	lda, ldb, ldc := colsA+c.pad, colsB+c.pad, c.n+c.pad
	// Exact-length windows: a read past the last element panics.
	a, b := fill((rowsA-1)*lda+colsA), fill((rowsB-1)*ldb+colsB)
	cc := fill(c.m * ldc)
	if c.nanC {
		for i := range cc {
			cc[i] = float32(math.NaN())
		}
	}
	want := refGemm(c.tA, c.tB, c.m, c.n, c.k, c.alpha, a, lda, b, ldb, c.beta, cc, ldc)
	mag := refGemmMag(c.tA, c.tB, c.m, c.n, c.k, c.alpha, a, lda, b, ldb, c.beta, cc, ldc)
	orig := append([]float32(nil), cc...)
	sgemmNative(kn, threads, c.tA, c.tB, c.m, c.n, c.k, c.alpha, a, lda, b, ldb, c.beta, cc[:(c.m-1)*ldc+c.n], ldc)
	for i := 0; i < c.m; i++ {
		for jj := 0; jj < ldc; jj++ {
			got := cc[i*ldc+jj]
			if jj >= c.n {
				if math.Float32bits(got) != math.Float32bits(orig[i*ldc+jj]) {
					t.Fatalf("%s: C[%d,%d] outside the product changed to %v", kn.name, i, jj, got)
				}
				continue
			}
			w := want[i*c.n+jj]
			tol := float64(c.k+2) * 2 / (1 << 24) * mag[i*c.n+jj]
			if math.Abs(float64(got)-w) > tol+1e-30 || got != got {
				t.Fatalf("%s: C[%d,%d] = %v, want %v (tolerance %.3g)", kn.name, i, jj, got, w, tol)
			}
		}
	}
}

// refGemmMag is the sum of the magnitudes of the terms of each element of
// refGemm, which bounds its rounding error.
func refGemmMag(tA, tB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) []float64 {
	absA, absB, absC := make([]float32, len(a)), make([]float32, len(b)), make([]float32, len(c))
	for i, v := range a {
		absA[i] = float32(math.Abs(float64(v)))
	}
	for i, v := range b {
		absB[i] = float32(math.Abs(float64(v)))
	}
	if beta != 0 {
		for i, v := range c {
			absC[i] = float32(math.Abs(float64(v)))
		}
	}
	return refGemm(tA, tB, m, n, k, float32(math.Abs(float64(alpha))), absA, lda, absB, ldb, float32(math.Abs(float64(beta))), absC, ldc)
}

// TestNativeKernels runs every case on every kernel this CPU supports
// (AVX-512, AVX2 and the portable Go kernel on an AVX-512 machine), on one
// and on three workers.
func TestNativeKernels(t *testing.T) {
	for _, kn := range nativeKernels {
		for _, threads := range []int{1, 3} {
			t.Run(fmt.Sprintf("%s/threads%d", kn.name, threads), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(5, uint64(threads)))
				for _, c := range nativeCases() {
					t.Run(c.String(), func(t *testing.T) { runNativeCase(t, kn, threads, c, rng) })
				}
			})
		}
	}
}

// TestNativeConcurrent runs products of several shapes from many goroutines
// at once, each on two workers, and checks every result: the calls share
// the worker pools and helpers but must not share buffers.
func TestNativeConcurrent(t *testing.T) {
	for _, kn := range nativeKernels {
		t.Run(kn.name, func(t *testing.T) {
			var wg sync.WaitGroup
			for g := range 16 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rng := rand.New(rand.NewPCG(uint64(g), 77))
					cs := nativeCases()
					for i := range 12 {
						c := cs[(g*7+i*5)%len(cs)]
						runNativeCase(t, kn, 2, c, rng)
					}
				}()
			}
			wg.Wait()
		})
	}
}

// TestNativePacking checks the packing routines of every kernel against
// their definitions, on full and partial panels.
func TestNativePacking(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	for _, kn := range nativeKernels {
		for _, k := range []int{1, 3, 16, 35} {
			for _, part := range []int{1, kn.nr - 1, kn.nr} {
				ld := kn.nr + 5 + k
				src := make([]float32, (max(k, kn.nr)+1)*ld)
				for i := range src {
					src[i] = float32(rng.NormFloat64())
				}
				dst := make([]float32, k*kn.nr)
				kn.packBN(dst, src, ld, k, part)
				for l := range k {
					for j := range kn.nr {
						want := float32(0)
						if j < part {
							want = src[l*ld+j]
						}
						if dst[l*kn.nr+j] != want {
							t.Fatalf("%s packBN k%d cols%d: [%d,%d] = %v, want %v", kn.name, k, part, l, j, dst[l*kn.nr+j], want)
						}
					}
				}
				for _, cols := range []int{1, kn.nr, 2*kn.nr + 3, 5 * kn.nr} {
					ldb := cols + 5
					srcB := make([]float32, k*ldb)
					for i := range srcB {
						srcB[i] = float32(rng.NormFloat64())
					}
					panels := (cols + kn.nr - 1) / kn.nr
					db := make([]float32, panels*kn.nr*k)
					kn.packBNB(db, srcB, ldb, k, cols)
					for q := range panels {
						for l := range k {
							for jj := range kn.nr {
								want := float32(0)
								if q*kn.nr+jj < cols {
									want = srcB[l*ldb+q*kn.nr+jj]
								}
								if got := db[q*kn.nr*k+l*kn.nr+jj]; got != want {
									t.Fatalf("%s packBNB k%d cols%d: panel %d [%d,%d] = %v, want %v", kn.name, k, cols, q, l, jj, got, want)
								}
							}
						}
					}
				}
				kn.packBT(dst, src, ld, k, part)
				for l := range k {
					for j := range kn.nr {
						want := float32(0)
						if j < part {
							want = src[j*ld+l]
						}
						if dst[l*kn.nr+j] != want {
							t.Fatalf("%s packBT k%d cols%d: [%d,%d] = %v, want %v", kn.name, k, part, l, j, dst[l*kn.nr+j], want)
						}
					}
				}
				for _, rows := range []int{1, kn.mr, 2*kn.mr + 3, aGroup * kn.mr} {
					lda := rows + 7
					srcA := make([]float32, k*lda)
					for i := range srcA {
						srcA[i] = float32(rng.NormFloat64())
					}
					panels := (rows + kn.mr - 1) / kn.mr
					dg := make([]float32, panels*kn.mr*k)
					kn.packATG(dg, srcA, lda, k, rows)
					for g := range panels {
						for l := range k {
							for r := range kn.mr {
								want := float32(0)
								if g*kn.mr+r < rows {
									want = srcA[l*lda+g*kn.mr+r]
								}
								if got := dg[g*kn.mr*k+l*kn.mr+r]; got != want {
									t.Fatalf("%s packATG k%d rows%d: panel %d [%d,%d] = %v, want %v", kn.name, k, rows, g, l, r, got, want)
								}
							}
						}
					}
				}
				rows := min(part, kn.mr)
				da := make([]float32, k*kn.mr)
				kn.packAT(da, src, ld, k, rows)
				for l := range k {
					for r := range kn.mr {
						want := float32(0)
						if r < rows {
							want = src[l*ld+r]
						}
						if da[l*kn.mr+r] != want {
							t.Fatalf("%s packAT k%d rows%d: [%d,%d] = %v, want %v", kn.name, k, rows, l, r, da[l*kn.mr+r], want)
						}
					}
				}
			}
		}
	}
}

// refGemm is C = alpha op(A) op(B) + beta C in float64 (beta 0: C not
// read), as an m x n matrix.
func refGemm(tA, tB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) []float64 {
	out := make([]float64, m*n)
	for i := range m {
		for j := range n {
			var s float64
			for l := range k {
				ai, bi := i*lda+l, l*ldb+j
				if tA {
					ai = l*lda + i
				}
				if tB {
					bi = j*ldb + l
				}
				s += float64(a[ai]) * float64(b[bi])
			}
			s *= float64(alpha)
			if beta != 0 {
				s += float64(beta) * float64(c[i*ldc+j])
			}
			out[i*n+j] = s
		}
	}
	return out
}

// TestNativeAsmGenerated checks that native_amd64.s is the output of
// internal/nativegen (run go generate in device/cpu after editing the
// generator).
func TestNativeAsmGenerated(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to run the generator")
	}
	out := filepath.Join(t.TempDir(), "native_amd64.s")
	cmd := exec.Command(goTool, "run", "./internal/nativegen", "-o", out)
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go run ./internal/nativegen: %v\n%s", err, msg)
	}
	want, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("native_amd64.s")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Error("native_amd64.s differs from what internal/nativegen writes: run go generate in device/cpu")
	}
}

// TestNativePlan checks the task grid: the tasks cover C in blocks of
// whole register blocks at most ncMax wide, there are enough of them for
// the workers, and few tasks are dealt out evenly (3 tasks on 2 workers
// would leave one idle for a third of the call).
func TestNativePlan(t *testing.T) {
	const mr, nr, ncMax = 12, 32, 512
	cases := []struct {
		m, n, workers, perWorker int
		ms, nb                   int // the grid expected; 0: any
	}{
		{1024, 1536, 2, 1, 1, 4}, // Llama's MLP: 3 blocks of 512 columns would be 2 rounds for 1.5 of work
		{576, 1536, 2, 1, 1, 4},
		{1024, 768, 2, 1, 1, 2}, // GPT-2's projections: one task per worker
		{1024, 3072, 2, 1, 1, 6},
		{1024, 50257, 2, 1, 1, 99}, // the LM head: ncMax-wide blocks
		{50257, 128, 2, 1, 2, 1},
		{1024, 576, 2, 3, 3, 2},
		{256, 256, 2, 2, 2, 2},
		{100, 100, 1, 1, 1, 1},
		{4096, 4096, 3, 1, 0, 0},
		{2048, 1536, 4, 3, 0, 0},
		{777, 1000, 8, 2, 0, 0},
	}
	for _, c := range cases {
		j := &nativeJob{mr: mr, nr: nr, m: c.m, n: c.n}
		j.plan(c.workers, c.perWorker, ncMax)
		name := fmt.Sprintf("%dx%d on %d", c.m, c.n, c.workers)
		if c.ms != 0 && (j.ms != c.ms || j.nb != c.nb) {
			t.Errorf("%s: grid %d x %d, want %d x %d", name, j.ms, j.nb, c.ms, c.nb)
		}
		if j.rowsPer%mr != 0 || j.colsPer%nr != 0 || j.colsPer > ncMax {
			t.Errorf("%s: tasks of %d x %d: not whole %d x %d blocks at most %d wide", name, j.rowsPer, j.colsPer, mr, nr, ncMax)
		}
		if j.ms*j.rowsPer < c.m || (j.ms-1)*j.rowsPer >= c.m || j.nb*j.colsPer < c.n || (j.nb-1)*j.colsPer >= c.n {
			t.Errorf("%s: %d x %d tasks of %d x %d do not tile C", name, j.ms, j.nb, j.rowsPer, j.colsPer)
		}
		tasks := j.ms * j.nb
		if c.workers > 1 && tasks < c.workers*c.perWorker {
			t.Errorf("%s: %d tasks, want at least %d", name, tasks, c.workers*c.perWorker)
		}
		if idle := (tasks+c.workers-1)/c.workers*c.workers - tasks; 8*idle > tasks {
			t.Errorf("%s: %d tasks on %d workers leave %d idle in the last round", name, tasks, c.workers, idle)
		}
	}
}
