package optim

import (
	"fmt"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/compose"
)

// The kernels of the update rules, in the dtype of the buffers they are
// given, with float64 scalars. A float32 buffer runs the device's fused
// kernel (device/compose) with the scalars rounded to float32: the paper's
// path, bit for bit what it was. Any other float dtype (float64 on the CPU)
// runs compositions of the Core with the scalars exact in that dtype, so a
// float64 step matches a float64 reference to rounding; the kernels optim
// declares (kernels.go) fall back to the same compositions. The Core's
// compositions allocate their temporaries; a failed allocation is an error.

// is32 reports whether b takes the float32 (fused) path.
func is32(b device.Buffer) bool { return b.DType() == device.Float32 }

// scalarBuf returns a one-element buffer of dt holding v (exact for float64).
func scalarBuf(dev device.Core, dt device.DType, v float64) (device.Buffer, error) {
	s, err := dev.Alloc(dt, 1)
	if err != nil {
		return nil, fmt.Errorf("scalar of %v: %w", dt, err)
	}
	dev.CopyFloat64FromHost(s, []float64{v})
	return s, nil
}

// flatView is the view of a contiguous buffer over its length.
func flatView(b device.Buffer) device.View {
	return device.Contiguous(b, device.DimsOf(b.Len()))
}

// opScalar computes dst = src op c elementwise through the Core.
func opScalar(dev device.Core, op device.BinaryOp, dst, src device.Buffer, c float64) error {
	s, err := scalarBuf(dev, dst.DType(), c)
	if err != nil {
		return err
	}
	dev.BinaryStrided(op, device.DimsOf(dst.Len()), dst, flatView(src), device.View{Buf: s})
	dev.Free(s)
	return nil
}

// scaleBuf computes dst = alpha src.
func scaleBuf(dev device.Core, dst, src device.Buffer, alpha float64) error {
	if is32(dst) {
		compose.Scale(dev, dst, src, float32(alpha))
		return nil
	}
	return opScalar(dev, device.Mul, dst, src, alpha)
}

// decayBuf computes p = decay p, skipping the multiplication when decay
// is 1 in p's dtype.
func decayBuf(dev device.Core, p device.Buffer, decay float64) error {
	if is32(p) {
		if d := float32(decay); d != 1 {
			compose.Scale(dev, p, p, d)
		}
		return nil
	}
	if decay == 1 {
		return nil
	}
	return opScalar(dev, device.Mul, p, p, decay)
}

// axpby computes dst = alpha x + beta dst.
func axpby(dev device.Core, dst, x device.Buffer, alpha, beta float64) error {
	if is32(dst) {
		compose.Axpby(dev, dst, x, float32(alpha), float32(beta))
		return nil
	}
	t, err := dev.Alloc(dst.DType(), dst.Len())
	if err != nil {
		return err
	}
	defer dev.Free(t)
	if err := opScalar(dev, device.Mul, t, x, alpha); err != nil {
		return err
	}
	if beta != 1 {
		if err := opScalar(dev, device.Mul, dst, dst, beta); err != nil {
			return err
		}
	}
	dev.BinaryStrided(device.Add, device.DimsOf(dst.Len()), dst, flatView(dst), flatView(t))
	return nil
}

// rowScaleCore is rowScale through the Core of dev, in the buffers' dtype
// with the scalars exact in it: RowScaler's composition.
func rowScaleCore(dev device.Core, dst, src device.Buffer, rows, cols int, alpha, eps float64) error {
	r, err := dev.Alloc(dst.DType(), rows)
	if err != nil {
		return err
	}
	defer dev.Free(r)
	dev.ReduceAxis(device.SumSquares, r, src, rows, cols, 1)
	dev.Unary(device.Sqrt, r, r)
	if err := opScalar(dev, device.Add, r, r, eps); err != nil {
		return err
	}
	a, err := scalarBuf(dev, dst.DType(), alpha)
	if err != nil {
		return err
	}
	defer dev.Free(a)
	dev.BinaryStrided(device.Div, device.DimsOf(rows), r, device.View{Buf: a}, flatView(r)) // alpha / (norm + eps)
	dims := device.DimsOf(rows, cols)
	rv := device.View{Buf: r}
	rv.Strides[0] = 1
	dev.BinaryStrided(device.Mul, dims, dst, device.Contiguous(src, dims), rv)
	return nil
}

// center subtracts from every row of x (rows x cols) the mean of the
// rows, with sum (cols elements) as scratch.
func center(dev device.Core, x, sum device.Buffer, rows, cols int) error {
	if is32(x) {
		compose.Reduce(dev, device.Sum, 0, sum, x, rows, cols)
		compose.AddRow(dev, x, sum, rows, cols, float32(-1/float64(rows)))
		return nil
	}
	dev.ReduceAxis(device.Sum, sum, x, 1, rows, cols)
	if err := opScalar(dev, device.Div, sum, sum, float64(rows)); err != nil {
		return err
	}
	dims := device.DimsOf(rows, cols)
	sv := device.View{Buf: sum}
	sv.Strides[1] = 1
	dev.BinaryStrided(device.Sub, dims, x, device.Contiguous(x, dims), sv)
	return nil
}

// gemm runs g with C = alpha op(A) op(B) + beta C. A float32 product takes
// the scalars rounded to float32, as the Gemm always has; another dtype
// takes them exactly, running the product with Alpha 1 and Beta 0 into a
// temporary when they are not float32 numbers. C must be contiguous
// (LDC == N) and the product unbatched.
func gemm(dev device.Core, g device.GemmArgs, alpha, beta float64) error {
	if is32(g.C) || (float64(float32(alpha)) == alpha && float64(float32(beta)) == beta) {
		g.Alpha, g.Beta = float32(alpha), float32(beta)
		dev.Gemm(g)
		return nil
	}
	n := g.M * g.N
	t, err := dev.Alloc(g.C.DType(), n)
	if err != nil {
		return err
	}
	defer dev.Free(t)
	c := g.C.Slice(0, n)
	g.Alpha, g.Beta, g.C, g.LDC = 1, 0, t, g.N
	dev.Gemm(g)
	if beta == 0 {
		return scaleBuf(dev, c, t, alpha)
	}
	return axpby(dev, c, t, alpha, beta)
}
