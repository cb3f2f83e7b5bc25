package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// gemvCase is one small-M product C = alpha A B^T + beta C with padded
// pitches (NaN in the pads, so that a read past a row shows).
type gemvCase struct {
	m, n, k     int
	alpha, beta float32
	pad         int
	nanC        bool // C starts as NaN (beta 0 must not read it)
	special     bool // NaN and Inf in A and B
}

func (c gemvCase) String() string {
	return fmt.Sprintf("%dx%dx%d/alpha%g,beta%g,pad%d,nan%v,special%v", c.m, c.n, c.k, c.alpha, c.beta, c.pad, c.nanC, c.special)
}

// gemvCases cross every row count with column counts around the groups of
// 16 and K around the tiles (16) and across several kc steps (1100: three
// at the AVX-512 kernel's kc 512 on a 48 KiB L1, and at 32 KiB too).
func gemvCases() []gemvCase {
	var cs []gemvCase
	i := 0
	for m := 1; m <= gemvMaxRows; m++ {
		for _, n := range []int{1, 15, 16, 17, 40} {
			for _, k := range []int{1, 15, 16, 17, 100, 1100} {
				c := gemvCase{m: m, n: n, k: k, alpha: 1, pad: i % 3, nanC: true}
				switch i % 3 {
				case 1:
					c.alpha, c.beta, c.nanC = -0.75, 0.5, false
				case 2:
					c.alpha, c.beta, c.nanC = 2, 1, false
				}
				cs = append(cs, c)
				i++
			}
		}
	}
	return append(cs,
		gemvCase{m: 3, n: 20, k: 40, alpha: 1, special: true},
		gemvCase{m: 8, n: 33, k: 33, alpha: 1, beta: 0.25, special: true},
	)
}

// gemvOperands returns A, B and C of c, with NaN in the pads and, with
// nanC, in C.
func gemvOperands(c gemvCase, rng *rand.Rand) (a, b, cc []float32, lda, ldb, ldc int) {
	lda, ldb, ldc = c.k+c.pad, c.k+c.pad, c.n+c.pad
	fill := func(rows, cols, ld int) []float32 {
		x := make([]float32, (rows-1)*ld+cols) // a read past the last element panics
		for i := range x {
			x[i] = float32(math.NaN())
			if i%ld < cols {
				x[i] = float32(rng.NormFloat64())
			}
		}
		return x
	}
	a, b, cc = fill(c.m, c.k, lda), fill(c.n, c.k, ldb), fill(c.m, c.n, ldc)
	if c.nanC {
		for i := range cc {
			cc[i] = float32(math.NaN())
		}
	}
	if c.special {
		a[0], b[ldb+1], a[lda*(c.m-1)+2] = float32(math.Inf(1)), float32(math.NaN()), float32(math.Inf(-1))
	}
	return a, b, cc, lda, ldb, ldc
}

// TestGemvMatchesPacked: for every native kernel with a small-M kernel,
// the small-M path gives the packed GEMM's bits on every case, with one
// and three workers, and leaves the pads of C alone; one case is also
// checked against a float64 product.
func TestGemvMatchesPacked(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	tested := 0
	for _, kn := range nativeKernels {
		if gemvFor(kn) == nil {
			continue
		}
		tested++
		for _, c := range gemvCases() {
			for _, threads := range []int{1, 3} {
				a, b, cc, lda, ldb, ldc := gemvOperands(c, rng)
				want := append([]float32(nil), cc...)
				gemvOff = true
				sgemmNative(kn, threads, false, true, c.m, c.n, c.k, c.alpha, a, lda, b, ldb, c.beta, want, ldc)
				gemvOff = false
				if !sgemvNative(kn, threads, false, true, c.m, c.n, c.k, c.alpha, a, lda, b, ldb, c.beta, cc, ldc) {
					t.Fatalf("%s %v: the small-M path refused it", kn.name, c)
				}
				for i := range want {
					if math.Float32bits(cc[i]) != math.Float32bits(want[i]) {
						t.Fatalf("%s %v threads %d: C[%d] = %v (%#x), packed %v (%#x)", kn.name, c, threads, i, cc[i], math.Float32bits(cc[i]), want[i], math.Float32bits(want[i]))
					}
				}
			}
		}
		// The packed path's own check, once: the float64 product.
		c := gemvCase{m: 5, n: 37, k: 1100, alpha: 1}
		a, b, cc, lda, ldb, ldc := gemvOperands(c, rng)
		sgemvNative(kn, 2, false, true, c.m, c.n, c.k, 1, a, lda, b, ldb, 0, cc, ldc)
		for i := range c.m {
			for j := range c.n {
				var s, mag float64
				for l := range c.k {
					s += float64(a[i*lda+l]) * float64(b[j*ldb+l])
					mag += math.Abs(float64(a[i*lda+l]) * float64(b[j*ldb+l]))
				}
				if d := math.Abs(float64(cc[i*ldc+j]) - s); d > float64(c.k)*0x1p-24*mag {
					t.Fatalf("%s: C[%d,%d] = %v, float64 product %v", kn.name, i, j, cc[i*ldc+j], s)
				}
			}
		}
	}
	if nativeBest.name == "avx512" && tested == 0 {
		t.Error("an AVX-512 CPU with no small-M kernel tested")
	}
	t.Logf("%d native kernels with a small-M kernel", tested)
}

// TestGemvRowsAlone: a row's result has the same bits whatever the other
// rows (so a batch of prompts generates each prompt's tokens).
func TestGemvRowsAlone(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	const n, k = 1031, 600
	for _, kn := range nativeKernels {
		c := gemvCase{m: gemvMaxRows, n: n, k: k, alpha: 1}
		a, b, all, lda, ldb, ldc := gemvOperands(c, rng)
		sgemmNative(kn, 4, false, true, c.m, n, k, 1, a, lda, b, ldb, 0, all, ldc)
		for r := range c.m {
			one := make([]float32, n)
			sgemmNative(kn, 1, false, true, 1, n, k, 1, a[r*lda:], lda, b, ldb, 0, one, n)
			for j := range n {
				if math.Float32bits(one[j]) != math.Float32bits(all[r*ldc+j]) {
					t.Fatalf("%s: row %d column %d: %v alone, %v among %d rows on 4 workers", kn.name, r, j, one[j], all[r*ldc+j], c.m)
				}
			}
		}
	}
}

// TestGemvDispatch: the small-M path takes A as stored, B transposed and
// up to gemvMaxRows rows, on the AVX-512 kernel, and nothing else.
func TestGemvDispatch(t *testing.T) {
	a, b, c := make([]float32, 16*40), make([]float32, 40*9), make([]float32, 16*9)
	for _, kn := range nativeKernels {
		if got, want := gemvFor(kn) != nil, kn.name == "avx512"; got != want {
			t.Errorf("kernel %s: small-M kernel %v, want %v", kn.name, got, want)
		}
		for _, s := range []struct {
			tA, tB bool
			m      int
			want   bool
		}{{false, true, 1, true}, {false, true, gemvMaxRows, true}, {false, true, gemvMaxRows + 1, false}, {false, false, 1, false}, {true, true, 1, false}} {
			want := s.want && gemvFor(kn) != nil
			if took := sgemvNative(kn, 1, s.tA, s.tB, s.m, 9, 40, 1, a, 40, b, 40, 0, c, 9); took != want {
				t.Errorf("%s tA=%v tB=%v m=%d: small-M path %v, want %v", kn.name, s.tA, s.tB, s.m, took, want)
			}
		}
	}
}

// BenchmarkGemvSmallM compares the small-M path with the packed GEMM on
// GPT-2 124M's decode products (X W^T of the attention and MLP
// projections and of the head) at 1, 4 and 8 rows, and 16 (both names run
// the packed GEMM there), reporting the rate B streams at.
//
//	go test -run '^$' -bench GemvSmallM ./device/cpu/
func BenchmarkGemvSmallM(b *testing.B) {
	initGemm()
	for _, s := range [][2]int{{768, 768}, {3072, 768}, {768, 3072}, {50257, 768}} {
		n, k := s[0], s[1]
		w := make([]float32, n*k)
		for i := range w {
			w[i] = float32(i%7) - 3
		}
		for _, m := range []int{1, 4, 8, 16} {
			x, c := make([]float32, m*k), make([]float32, m*n)
			for _, path := range []string{"gemv", "packed"} {
				b.Run(fmt.Sprintf("%dx%dx%d/%s", m, n, k, path), func(b *testing.B) {
					gemvOff = path == "packed"
					defer func() { gemvOff = false }()
					for b.Loop() {
						sgemmNative(nativeBest, Threads(), false, true, m, n, k, 1, x, k, w, k, 0, c, n)
					}
					b.ReportMetric(float64(n*k*4)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
				})
			}
		}
	}
}

// BenchmarkGemvDecode times one decode step's products at batch 1 with
// cold weights, as generation meets them: every X W^T of GPT-2 124M's 12
// blocks and of a SmolLM-135M-shaped Llama's 30 (the head aside), each
// weight read once a step from memory (some 340 and 425 MB), reporting the
// rate the weights stream at and the time a product takes.
//
//	go test -run '^$' -bench GemvDecode ./device/cpu/
func BenchmarkGemvDecode(b *testing.B) {
	initGemm()
	for _, model := range []struct {
		name   string
		layers int
		shapes [][2]int // N x K of each block's products
	}{
		{"gpt2-124m", 12, [][2]int{{768, 768}, {768, 768}, {768, 768}, {768, 768}, {3072, 768}, {768, 3072}}},
		{"smollm-135m", 30, [][2]int{{576, 576}, {192, 576}, {192, 576}, {576, 576}, {1536, 576}, {1536, 576}, {576, 1536}}},
	} {
		var ws [][]float32
		var ns, ks []int
		bytes := 0
		for range model.layers {
			for _, s := range model.shapes {
				w := make([]float32, s[0]*s[1])
				for i := range w {
					w[i] = float32(i%7) - 3
				}
				ws, ns, ks = append(ws, w), append(ns, s[0]), append(ks, s[1])
				bytes += 4 * len(w)
			}
		}
		x, c := make([]float32, 4096), make([]float32, 4096)
		b.Run(model.name, func(b *testing.B) {
			for b.Loop() {
				for i, w := range ws {
					sgemmNative(nativeBest, Threads(), false, true, 1, ns[i], ks[i], 1, x, ks[i], w, ks[i], 0, c, ns[i])
				}
			}
			b.ReportMetric(float64(bytes)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*len(ws)), "us/product")
		})
	}
}
