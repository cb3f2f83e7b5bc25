package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/hilbert-ml/hilbert/device"
)

// TestGELUKernelsAgree: the AVX-512 row kernels (where the machine has
// them) and the portable loop on the vector exponential give GELU and its
// gradient within float32 rounding of each other and of the float64
// definition (the tanh form), for every row length around the 16-wide
// step (the masked tail), with and without a bias, x over the tails.
func TestGELUKernelsAgree(t *testing.T) {
	d := New()
	r := rand.New(rand.NewPCG(3, 4))
	for _, cols := range []int{1, 5, 15, 16, 17, 31, 33, 300} {
		const rows = 3
		x, dout, bias := make([]float32, rows*cols), make([]float32, rows*cols), make([]float32, cols)
		for i := range x {
			x[i], dout[i] = float32(r.NormFloat64()*4), float32(r.NormFloat64())
		}
		for i := range bias {
			bias[i] = float32(r.NormFloat64())
		}
		for _, b := range [][]float32{nil, bias} {
			run := func() (out, dx []float32) {
				out, dx = make([]float32, len(x)), make([]float32, len(x))
				var bb device.Buffer
				if b != nil {
					bb = NewFloat32(b)
				}
				d.GELUTanh(NewFloat32(out), NewFloat32(x), bb, rows, cols)
				d.GELUTanhBackward(NewFloat32(dx), NewFloat32(dout), NewFloat32(x), bb, rows, cols)
				return out, dx
			}
			out, dx := run()
			saved := hasAVX512Softmax
			hasAVX512Softmax = false
			outP, dxP := run()
			hasAVX512Softmax = saved
			for i, xv := range x {
				z := float64(xv)
				if b != nil {
					z += float64(b[i%cols])
				}
				th := math.Tanh(math.Sqrt(2/math.Pi) * (z + 0.044715*z*z*z))
				want := z / 2 * (1 + th)
				wantD := float64(dout[i]) * (0.5*(1+th) + z/2*(1-th*th)*math.Sqrt(2/math.Pi)*(1+3*0.044715*z*z))
				for _, c := range []struct {
					name      string
					got, want float64
				}{{"gelu", float64(out[i]), want}, {"gelu portable", float64(outP[i]), want},
					{"gradient", float64(dx[i]), wantD}, {"gradient portable", float64(dxP[i]), wantD}} {
					if math.Abs(c.got-c.want) > 1e-6*(1+math.Abs(c.want)) {
						t.Fatalf("cols %d bias %v: %s at z %v = %v, want %v", cols, b != nil, c.name, z, c.got, c.want)
					}
				}
			}
		}
	}
}
