package geometry

import (
	"math/rand/v2"
	"testing"

	"github.com/hilbert-ml/hilbert/device/cpu"
)

// The benchmark's shape: the GPT-2 vocabulary and the 190M model's width.
const benchV, benchD = 50257, 512

func benchStep(v, d int) []float32 {
	rng := rand.New(rand.NewPCG(1, 2))
	s := make([]float32, v*d)
	for i := range s {
		s[i] = float32(rng.NormFloat64() * 1e-3)
	}
	return s
}

// gramMACs is the multiply-add count of RowDiameter's Gram work at tile t:
// every tile pair (a, b), b >= a, is an ra x rb x d product.
func gramMACs(v, d, t int) int64 {
	var n int64
	for a0 := 0; a0 < v; a0 += t {
		for b0 := a0; b0 < v; b0 += t {
			n += int64(min(t, v-a0)) * int64(min(t, v-b0)) * int64(d)
		}
	}
	return n
}

// BenchmarkRowDiameter times the exact D(S) at V = 50257, d = 512.
func BenchmarkRowDiameter(b *testing.B) {
	s := benchStep(benchV, benchD)
	for b.Loop() {
		if _, err := RowDiameter(cpu.New(), s, benchV, benchD); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(gramMACs(benchV, benchD, DiameterTile))*2/1e9, "GFLOP/op")
}

// BenchmarkRowDiameterDevice times RowDiameterDevice at the same shape on
// the CPU backend (the step in a CPU buffer), beside BenchmarkRowDiameter:
// the same Gram work through the device interface.
func BenchmarkRowDiameterDevice(b *testing.B) {
	s := cpu.NewFloat32(benchStep(benchV, benchD))
	for b.Loop() {
		if _, err := RowDiameterDevice(s, benchV, benchD); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(gramMACs(benchV, benchD, DiameterTile))*2/1e9, "GFLOP/op")
}

// BenchmarkRowDiameterGEMMEquivalent times plain GEMMs with the FLOP count
// of RowDiameter's Gram work (gramMACs multiply-adds, about V^2 d / 2, i.e.
// V^2 d FLOPs, half of the full V x V Gram's 2 V^2 d): Sgemm of V x N x d
// with N = gramMACs / (V d), run as row panels of DiameterTile rows into
// one reused output (a V x N output would need 5 GB).
func BenchmarkRowDiameterGEMMEquivalent(b *testing.B) {
	s := benchStep(benchV, benchD)
	macs := gramMACs(benchV, benchD, DiameterTile)
	n := int((macs + int64(benchV*benchD) - 1) / int64(benchV*benchD))
	bm := benchStep(n, benchD)
	t := DiameterTile
	c := make([]float32, t*n)
	for b.Loop() {
		for a0 := 0; a0 < benchV; a0 += t {
			ra := min(t, benchV-a0)
			cpu.Sgemm(false, true, ra, n, benchD, 1, s[a0*benchD:(a0+ra)*benchD], benchD, bm, benchD, 0, c, n)
		}
	}
	b.ReportMetric(float64(int64(benchV)*int64(n)*benchD)*2/1e9, "GFLOP/op")
}

// BenchmarkHilbertRMSDevice times the Hilbert RMS of a step of the
// benchmark's shape over a panel of 256 hidden states on the CPU backend:
// 2 x 256 x V x d FLOPs of products, plus the centring's passes over s.
func BenchmarkHilbertRMSDevice(b *testing.B) {
	const n = 256
	s := cpu.NewFloat32(benchStep(benchV, benchD))
	h := cpu.NewFloat32(benchStep(n, benchD))
	for b.Loop() {
		if _, err := HilbertRMSDevice(s, benchV, benchD, h, n); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(2*n*float64(benchV)*benchD/1e9, "GFLOP/op")
}
