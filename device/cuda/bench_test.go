package cuda

import (
	"fmt"
	"testing"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/profile"
)

// Benchmarks of GEMM and the fused kernels; they skip without a GPU. Each
// reports throughput (TFLOP/s or GB/s) as a metric.

func benchAlloc(b *testing.B, d *Device, dt device.DType, n int) device.Buffer {
	b.Helper()
	buf, err := d.Alloc(dt, n)
	if err != nil {
		b.Fatal(err)
	}
	d.Fill(buf, 0.01)
	b.Cleanup(func() { d.Free(buf) })
	return buf
}

// benchLoop times fn with a synchronize at the end of each timed batch.
func benchLoop(b *testing.B, d *Device, fn func()) {
	fn()
	if err := d.Synchronize(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		fn()
	}
	if err := d.Synchronize(); err != nil {
		b.Fatal(err)
	}
}

func BenchmarkGemm(b *testing.B) {
	d := gpu(b)
	for _, dt := range []device.DType{device.Float32, device.BFloat16} {
		// Square, and the 190M model's MLP and head shapes (tokens x d x 4d, tokens x d x V).
		for _, s := range [][3]int{{4096, 4096, 4096}, {16384, 2048, 512}, {8192, 50257, 512}} {
			m, n, k := s[0], s[1], s[2]
			b.Run(fmt.Sprintf("%s/%dx%dx%d", dt, m, n, k), func(b *testing.B) {
				a, bb, c := benchAlloc(b, d, dt, m*k), benchAlloc(b, d, dt, n*k), benchAlloc(b, d, device.Float32, m*n)
				g := device.GemmArgs{M: m, N: n, K: k, Alpha: 1, A: a, LDA: k, B: bb, LDB: n, C: c, LDC: n}
				benchLoop(b, d, func() { d.Gemm(g) })
				b.ReportMetric(2*float64(m)*float64(n)*float64(k)*float64(b.N)/b.Elapsed().Seconds()/1e12, "TFLOP/s")
			})
		}
	}
}

// BenchmarkAttention times the 190M preset's attention (8 sequences of
// 2048, d 512) on tensor cores at head dims 64 and 128, and on the f32 SIMT
// kernels at 64, so one run gives their ratio. TFLOP/s counts
// profile.AttentionFlops, as the profile's attention rows do: the causal
// pairs of the products a minimal kernel does, 2 forward, 5 backward.
func BenchmarkAttention(b *testing.B) {
	d := gpu(b)
	for _, c := range []struct {
		name string
		s    device.AttentionShape
		simt bool
	}{
		{"tensor-core/D64", device.AttentionShape{Batch: 8, Seq: 2048, Heads: 8, HeadDim: 64, BFloat16Operands: true}, false},
		{"tensor-core/D128", device.AttentionShape{Batch: 8, Seq: 2048, Heads: 4, HeadDim: 128, BFloat16Operands: true}, false},
		{"simt/D64", device.AttentionShape{Batch: 8, Seq: 2048, Heads: 8, HeadDim: 64}, true},
	} {
		s := c.s
		d.simtAttention = c.simt
		if !c.simt && !d.attentionTC(s) {
			continue // before sm_80
		}
		n, nl := s.Batch*s.Seq*s.Heads*s.HeadDim, s.Batch*s.Heads*s.Seq
		q, k, v, o, l := benchAlloc(b, d, device.Float32, n), benchAlloc(b, d, device.Float32, n), benchAlloc(b, d, device.Float32, n),
			benchAlloc(b, d, device.Float32, n), benchAlloc(b, d, device.Float32, nl)
		fwd, bwd := profile.AttentionFlops(s, false), profile.AttentionFlops(s, true)
		b.Run(c.name+"/forward", func(b *testing.B) {
			benchLoop(b, d, func() { d.Attention(o, l, q, k, v, s, 0.125) })
			b.ReportMetric(fwd*float64(b.N)/b.Elapsed().Seconds()/1e12, "TFLOP/s")
		})
		b.Run(c.name+"/backward", func(b *testing.B) {
			dq, dk, dv := benchAlloc(b, d, device.Float32, n), benchAlloc(b, d, device.Float32, n), benchAlloc(b, d, device.Float32, n)
			d.Attention(o, l, q, k, v, s, 0.125)
			benchLoop(b, d, func() { d.AttentionBackward(dq, dk, dv, o, q, k, v, o, l, s, 0.125) })
			b.ReportMetric(bwd*float64(b.N)/b.Elapsed().Seconds()/1e12, "TFLOP/s")
		})
	}
	d.simtAttention = false
}

func BenchmarkCrossEntropy(b *testing.B) {
	d := gpu(b)
	const rows, vocab = 8192, 50257
	logits := benchAlloc(b, d, device.Float32, rows*vocab)
	loss, lse, dl := benchAlloc(b, d, device.Float32, rows), benchAlloc(b, d, device.Float32, rows), benchAlloc(b, d, device.Float32, rows)
	tg := benchAlloc(b, d, device.Int32, rows)
	bytes := float64(rows) * vocab * 4
	b.Run("forward", func(b *testing.B) {
		benchLoop(b, d, func() { d.CrossEntropy(loss, lse, logits, tg, rows, vocab) })
		b.ReportMetric(bytes*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
	})
	b.Run("backward", func(b *testing.B) {
		benchLoop(b, d, func() { d.CrossEntropyBackward(logits, dl, logits, lse, tg, rows, vocab) })
		b.ReportMetric(2*bytes*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
	})
	b.Run("withgrad", func(b *testing.B) {
		benchLoop(b, d, func() { d.CrossEntropyWithGrad(loss, lse, logits, tg, rows, vocab, 1.0/rows) })
		b.ReportMetric(2*bytes*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
	})
}

func BenchmarkRMSNorm(b *testing.B) {
	d := gpu(b)
	const rows, cols = 65536, 512
	x, out, r := benchAlloc(b, d, device.Float32, rows*cols), benchAlloc(b, d, device.Float32, rows*cols), benchAlloc(b, d, device.Float32, rows)
	benchLoop(b, d, func() { d.RMSNorm(out, r, x, rows, cols, 1e-6) })
	b.ReportMetric(2*float64(rows*cols*4)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
}

func BenchmarkAdamW(b *testing.B) {
	d := gpu(b)
	const n = 185_680_896 // the 190M model's parameters
	p, g, m, v := benchAlloc(b, d, device.Float32, n), benchAlloc(b, d, device.Float32, n), benchAlloc(b, d, device.Float32, n), benchAlloc(b, d, device.Float32, n)
	benchLoop(b, d, func() {
		d.AdamWStep(p, g, m, v, nil, 1e-3, 0.9, 0.999, float32(1-0.9), float32(1-0.999), 1e-10, float32(1-1e-3*0.1), 0.1, 0.001)
	})
	b.ReportMetric(7*float64(n*4)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
}
