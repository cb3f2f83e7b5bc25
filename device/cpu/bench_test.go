package cpu_test

import (
	"fmt"
	"testing"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/cpu"
)

// Benchmarks of the CPU backend. GEMMs report GFLOP/s for the framework's
// path (Device.Gemm) and for a direct OpenBLAS call (cpu.SgemmOpenBLAS) on
// the same buffers, side by side; memory-bound kernels report MB/s of the
// bytes they must read and write, compute-bound ones GFLOP/s. All report
// allocations: the kernels should not allocate.
//
//	go test -run '^$' -bench . -benchmem ./device/cpu/
//	HILBERT_GEMM=go go test -run '^$' -bench Gemm ./device/cpu/

// benchGemmShapes are a GPT-2-small projection (tokens x d x d), a square
// reference, and the LM head (tokens x vocab x d, weight stored vocab x d).
var benchGemmShapes = []struct {
	m, n, k int
	transB  bool
}{
	{2048, 768, 768, false},
	{512, 512, 512, false},
	{2048, 50257, 128, true},
}

func BenchmarkGemm(b *testing.B) {
	for _, s := range benchGemmShapes {
		r := newRand(1)
		a, bm := randSlice(r, s.m*s.k, 1), randSlice(r, s.k*s.n, 1)
		c := make([]float32, s.m*s.n)
		ldb := s.n
		if s.transB {
			ldb = s.k
		}
		flops := 2 * float64(s.m) * float64(s.n) * float64(s.k)
		report := func(b *testing.B) {
			b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		}
		name := fmt.Sprintf("%dx%dx%d", s.m, s.n, s.k)
		b.Run(name+"/framework", func(b *testing.B) {
			g := device.GemmArgs{TransB: s.transB, M: s.m, N: s.n, K: s.k, Alpha: 1,
				A: cpu.NewFloat32(a), LDA: s.k, B: cpu.NewFloat32(bm), LDB: ldb, C: cpu.NewFloat32(c), LDC: s.n}
			b.ReportAllocs()
			for b.Loop() {
				dev.Gemm(g)
			}
			report(b)
		})
		b.Run(name+"/openblas", func(b *testing.B) {
			if !cpu.SgemmOpenBLAS(false, false, 1, 1, 1, 1, a, 1, bm, 1, 0, c, 1) {
				b.Skip("OpenBLAS not loaded")
			}
			b.ReportAllocs()
			for b.Loop() {
				cpu.SgemmOpenBLAS(false, s.transB, s.m, s.n, s.k, 1, a, s.k, bm, ldb, 0, c, s.n)
			}
			report(b)
		})
	}
}

// Token-wise kernels run on a GPT-2-small activation: 2048 tokens x 768.
const benchRows, benchCols = 2048, 768

func BenchmarkRMSNorm(b *testing.B) {
	n := benchRows * benchCols
	r := newRand(2)
	x, dy := buf(randSlice(r, n, 1)), buf(randSlice(r, n, 1))
	out, dx, rstd := buf(make([]float32, n)), buf(make([]float32, n)), buf(make([]float32, benchRows))
	b.Run("fwd", func(b *testing.B) {
		b.SetBytes(int64(2 * 4 * n))
		b.ReportAllocs()
		for b.Loop() {
			dev.RMSNorm(out, rstd, x, benchRows, benchCols, 1e-6)
		}
	})
	b.Run("bwd", func(b *testing.B) {
		b.SetBytes(int64(3 * 4 * n))
		b.ReportAllocs()
		for b.Loop() {
			dev.RMSNormBackward(dx, dy, x, rstd, benchRows, benchCols)
		}
	})
}

func BenchmarkLayerNorm(b *testing.B) {
	n := benchRows * benchCols
	r := newRand(3)
	x, dy := buf(randSlice(r, n, 1)), buf(randSlice(r, n, 1))
	w, bias := buf(randSlice(r, benchCols, 1)), buf(randSlice(r, benchCols, 1))
	out, dx := buf(make([]float32, n)), buf(make([]float32, n))
	mean, rstd := buf(make([]float32, benchRows)), buf(make([]float32, benchRows))
	dw, db := buf(make([]float32, benchCols)), buf(make([]float32, benchCols))
	b.Run("fwd", func(b *testing.B) {
		b.SetBytes(int64(2 * 4 * n))
		b.ReportAllocs()
		for b.Loop() {
			dev.LayerNorm(out, mean, rstd, x, w, bias, benchRows, benchCols, 1e-5)
		}
	})
	b.Run("bwd", func(b *testing.B) {
		b.SetBytes(int64(3 * 4 * n))
		b.ReportAllocs()
		for b.Loop() {
			dev.LayerNormBackward(dx, dw, db, dy, x, w, mean, rstd, benchRows, benchCols)
		}
	})
}

func BenchmarkRoPE(b *testing.B) {
	s := device.AttentionShape{Batch: 8, Seq: 256, Heads: 12, HeadDim: 64}
	n := s.Batch * s.Seq * s.Heads * s.HeadDim
	cos, sin := ropeTables(s.Seq, s.HeadDim)
	x, out := buf(randSlice(newRand(3), n, 1)), buf(make([]float32, n))
	C, S := buf(cos), buf(sin)
	for _, inverse := range []bool{false, true} {
		name := "fwd"
		if inverse {
			name = "bwd"
		}
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(2 * 4 * n))
			b.ReportAllocs()
			for b.Loop() {
				dev.RoPE(out, x, C, S, s, inverse)
			}
		})
	}
}

func BenchmarkSwiGLU(b *testing.B) {
	n := benchRows * 4 * benchCols // the MLP hidden layer
	r := newRand(4)
	a, g, dout := buf(randSlice(r, n, 3)), buf(randSlice(r, n, 1)), buf(randSlice(r, n, 1))
	out, da, db := buf(make([]float32, n)), buf(make([]float32, n)), buf(make([]float32, n))
	b.Run("fwd", func(b *testing.B) {
		b.SetBytes(int64(3 * 4 * n))
		b.ReportAllocs()
		for b.Loop() {
			dev.SwiGLU(out, a, g)
		}
	})
	b.Run("bwd", func(b *testing.B) {
		b.SetBytes(int64(5 * 4 * n))
		b.ReportAllocs()
		for b.Loop() {
			dev.SwiGLUBackward(da, db, dout, a, g)
		}
	})
}

func BenchmarkAttention(b *testing.B) {
	s := device.AttentionShape{Batch: 8, Seq: 256, Heads: 2, HeadDim: 64}
	n := s.Batch * s.Seq * s.Heads * s.HeadDim
	r := newRand(5)
	q, k, v, dout := buf(randSlice(r, n, 1)), buf(randSlice(r, n, 1)), buf(randSlice(r, n, 1)), buf(randSlice(r, n, 1))
	out, lse := buf(make([]float32, n)), buf(make([]float32, s.Batch*s.Heads*s.Seq))
	dq, dk, dv := buf(make([]float32, n)), buf(make([]float32, n)), buf(make([]float32, n))
	scale := float32(0.125)
	// Flops of the products as the kernel runs them (full Seq x Seq
	// scores, masked afterwards): 2 products forward, 5 backward (the
	// scores are recomputed), each 2*Seq*Seq*HeadDim per (batch, head).
	pairFlops := 2 * float64(s.Seq) * float64(s.Seq) * float64(s.HeadDim) * float64(s.Batch*s.Heads)
	dev.Attention(out, lse, q, k, v, s, scale)
	b.Run("fwd", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			dev.Attention(out, lse, q, k, v, s, scale)
		}
		b.ReportMetric(2*pairFlops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	})
	b.Run("bwd", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			dev.AttentionBackward(dq, dk, dv, dout, q, k, v, out, lse, s, scale)
		}
		b.ReportMetric(5*pairFlops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	})
}

func BenchmarkCrossEntropy(b *testing.B) {
	const rows, vocab = 2048, 50257
	n := rows * vocab
	r := newRand(6)
	logits := buf(randSlice(r, n, 4))
	targets := make([]int32, rows)
	for i := range targets {
		targets[i] = int32(r.IntN(vocab))
	}
	T := ibuf(b, targets)
	loss, lse, dloss := buf(make([]float32, rows)), buf(make([]float32, rows)), buf(randSlice(r, rows, 1))
	dlogits := buf(make([]float32, n))
	dev.CrossEntropy(loss, lse, logits, T, rows, vocab)
	b.Run("fwd", func(b *testing.B) {
		b.SetBytes(int64(4 * n))
		b.ReportAllocs()
		for b.Loop() {
			dev.CrossEntropy(loss, lse, logits, T, rows, vocab)
		}
	})
	b.Run("bwd", func(b *testing.B) {
		b.SetBytes(int64(2 * 4 * n))
		b.ReportAllocs()
		for b.Loop() {
			dev.CrossEntropyBackward(dlogits, dloss, logits, lse, T, rows, vocab)
		}
	})
	// The fused training path (loss and gradient in one pass, in place);
	// compare with fwd + bwd. The logits become gradients of magnitude < 1,
	// so repeated passes stay finite and cost the same.
	b.Run("fused", func(b *testing.B) {
		dev.Copy(dlogits, logits)
		b.SetBytes(int64(2 * 4 * n))
		b.ReportAllocs()
		for b.Loop() {
			dev.CrossEntropyWithGrad(loss, lse, dlogits, T, rows, vocab, 1.0/rows)
		}
	})
}

// BenchmarkTranspose covers the head's weight-gradient transpose (d x
// vocab to vocab x d), a square matrix, and splitting heads ([B, T, H, D]
// to [B, H, T, D]), in MB/s of bytes read and written.
func BenchmarkTranspose(b *testing.B) {
	for _, c := range []struct {
		name                     string
		batch, rows, cols, inner int
	}{
		{"head-128x50257", 1, 128, 50257, 1},
		{"square-2048", 1, 2048, 2048, 1},
		{"heads-B8T256H2D64", 8, 256, 2, 64},
	} {
		n := c.batch * c.rows * c.cols * c.inner
		src, dst := buf(randSlice(newRand(5), n, 1)), buf(make([]float32, n))
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(8 * n))
			b.ReportAllocs()
			for b.Loop() {
				dev.Transpose(dst, src, c.batch, c.rows, c.cols, c.inner)
			}
		})
	}
}
