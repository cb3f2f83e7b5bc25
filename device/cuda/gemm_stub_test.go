package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/hilbert-ml/hilbert/device"
)

// rowMajorGemm is the reference: GemmArgs semantics on host slices.
func rowMajorGemm(g device.GemmArgs, a, b, c []float32) {
	batch := max(g.Batch, 1)
	for p := 0; p < batch; p++ {
		for i := 0; i < g.M; i++ {
			for j := 0; j < g.N; j++ {
				var acc float64
				for l := 0; l < g.K; l++ {
					ai := p*g.StrideA + i*g.LDA + l
					if g.TransA {
						ai = p*g.StrideA + l*g.LDA + i
					}
					bi := p*g.StrideB + l*g.LDB + j
					if g.TransB {
						bi = p*g.StrideB + j*g.LDB + l
					}
					acc += float64(a[ai]) * float64(b[bi])
				}
				ci := p*g.StrideC + i*g.LDC + j
				r := g.Alpha * float32(acc)
				if g.Beta != 0 {
					r += g.Beta * c[ci]
				}
				c[ci] = r
			}
		}
	}
}

// TestStubGemmMapping runs Gemm through the stub cuBLAS, whose
// cublasSgemmStridedBatched computes a real column-major product, and
// compares with the row-major reference for every transpose combination,
// padded leading dimensions, batches and beta.
func TestStubGemmMapping(t *testing.T) {
	d, s := newStubDevice(t)
	rng := rand.New(rand.NewPCG(1, 2))
	for _, dt := range []device.DType{device.Float32, device.BFloat16} {
		for _, ta := range []bool{false, true} {
			for _, tb := range []bool{false, true} {
				for _, beta := range []float32{0, 0.5} {
					name := fmt.Sprintf("%s/ta=%v/tb=%v/beta=%v", dt, ta, tb, beta)
					m, n, k, batch := 3, 5, 4, 2
					g := device.GemmArgs{TransA: ta, TransB: tb, M: m, N: n, K: k, Alpha: 1.5, Beta: beta, Batch: batch}
					rowsA, colsA := m, k
					if ta {
						rowsA, colsA = k, m
					}
					rowsB, colsB := k, n
					if tb {
						rowsB, colsB = n, k
					}
					g.LDA, g.LDB, g.LDC = colsA+1, colsB+2, n+3
					g.StrideA, g.StrideB, g.StrideC = rowsA*g.LDA+1, rowsB*g.LDB, m*g.LDC+2
					ha := randSlice(rng, g.StrideA*batch, dt)
					hb := randSlice(rng, g.StrideB*batch, dt)
					hc := randSlice(rng, g.StrideC*batch, device.Float32)
					if beta == 0 {
						for i := range hc {
							hc[i] = float32(math.NaN()) // must not propagate
						}
					}
					want := append([]float32(nil), hc...)
					rowMajorGemm(g, ha, hb, want)
					g.A, g.B, g.C = upload(t, d, dt, ha), upload(t, d, dt, hb), upload(t, d, device.Float32, hc)
					d.Gemm(g)
					got := make([]float32, len(hc))
					d.CopyToHost(got, g.C)
					for i := range got {
						if math.IsNaN(float64(want[i])) != math.IsNaN(float64(got[i])) ||
							math.Abs(float64(got[i]-want[i])) > 1e-4*(1+math.Abs(float64(want[i]))) {
							t.Fatalf("%s: C[%d] = %v, want %v", name, i, got[i], want[i])
						}
					}
					var ints [24]int64
					var fl [2]float32
					s.gemmArgs(&ints, &fl)
					if fl != [2]float32{1.5, beta} || ints[0] != 0x42 || ints[16] != 0x9abc {
						t.Errorf("%s: alpha/beta %v handle %#x stream %#x", name, fl, ints[0], ints[16])
					}
					if dt == device.BFloat16 && (ints[17] != cudaR16BF || ints[18] != cudaR16BF || ints[19] != cudaR32F ||
						ints[20] != cublasCompute32F || ints[21] != -1) {
						t.Errorf("%s: Ex types %v", name, ints[17:22])
					}
				}
			}
		}
	}
}

// TestStubGemmLongArguments checks that all 18 arguments of
// cublasSgemmStridedBatched arrive intact, int64 strides above 2^32 included.
func TestStubGemmLongArguments(t *testing.T) {
	d, s := newStubDevice(t)
	a, _ := d.Alloc(device.Float32, 64)
	b, _ := d.Alloc(device.Float32, 64)
	c, _ := d.Alloc(device.Float32, 64)
	g := device.GemmArgs{TransA: true, M: 7, N: 11, K: 13, Alpha: -0.25, Beta: 2, A: a.Slice(3, 10), LDA: 17, StrideA: 1 << 41,
		B: b, LDB: 19, StrideB: 5<<32 + 1, C: c.Slice(1, 5), LDC: 23, StrideC: 3<<33 + 7, Batch: 29}
	d.Gemm(g)
	var ints [24]int64
	var fl [2]float32
	s.gemmArgs(&ints, &fl)
	ap, bp, cp := int64(a.(*Buffer).ptr), int64(b.(*Buffer).ptr), int64(c.(*Buffer).ptr)
	want := []int64{0x42, cublasOpN, cublasOpT, 11, 7, 13, bp, 19, 5<<32 + 1, ap + 12, 17, 1 << 41, cp + 4, 23, 3<<33 + 7, 29}
	for i, w := range want {
		if ints[i] != w {
			t.Errorf("argument %d = %d, want %d", i, ints[i], w)
		}
	}
	if fl != [2]float32{-0.25, 2} {
		t.Errorf("alpha, beta = %v", fl)
	}
}

func randSlice(rng *rand.Rand, n int, dt device.DType) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
		if dt == device.BFloat16 {
			x[i] = float32FromBF16(bf16FromFloat32(x[i]))
		}
	}
	return x
}

func upload(t *testing.T, d *Device, dt device.DType, x []float32) device.Buffer {
	t.Helper()
	b, err := d.Alloc(dt, len(x))
	if err != nil {
		t.Fatal(err)
	}
	d.CopyFromHost(b, x)
	return b
}
