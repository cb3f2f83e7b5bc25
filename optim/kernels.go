package optim

import (
	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/compose"
)

// The kernels optim declares: optional capabilities of a backend, found
// as device/compose finds the device's own (an interface a backend
// satisfies by its method alone; the CPU and CUDA backends have both),
// run through compose.Run so that a wrapper such as device/profile sees
// them. Each one's composition from the Core is its definition and its
// fallback, and optim's tests check every backend's kernel against it.

// AdamWStepper is the AdamW update of a float32 parameter in one pass.
// Composition: adamWCore, torch.optim.AdamW's update through the Core.
type AdamWStepper interface {
	// AdamWStep applies one decoupled-weight-decay Adam update in place:
	// m = beta1 m + oneMinusBeta1 g; v = beta2 v + oneMinusBeta2 g^2;
	// s = -lr (m/bc1) / (sqrt(v/bc2) + eps); p = p decay + s, where
	// bc1 and bc2 are the bias corrections 1 - beta^t and decay is
	// 1 - lr wd. When step is not nil it receives s. The caller rounds
	// each scalar to float32 once (1 - beta from the float64 beta: 1 -
	// float32(0.999) is 1.3e-5 off, relative).
	AdamWStep(p, g, m, v, step device.Buffer, lr, beta1, beta2, oneMinusBeta1, oneMinusBeta2, eps, decay, bc1, bc2 float32)
}

// RowScaler normalises the rows of a float32 matrix in one pass (RowNorm).
// Composition: rowScaleCore.
type RowScaler interface {
	// RowScale computes dst[i,:] = src[i,:] * alpha / (sqrt(sumsq(src[i,:])) + eps)
	// for each row of a rows x cols matrix. dst may alias src.
	RowScale(dst, src device.Buffer, rows, cols int, alpha, eps float32)
}

// adamWStep is one AdamW update of p (any float dtype) with the scalars
// of adamScalars: the backend's AdamWStep for float32 where it has one,
// and otherwise adamWCore.
func adamWStep(dev device.Core, p, g, m, v, step device.Buffer, s adamScalars) error {
	if !is32(p) {
		return adamWCore(dev, p, g, m, v, step, s)
	}
	var err error
	lr := float32(s.lr)
	compose.Run(dev, "AdamWStep", func(k AdamWStepper) {
		k.AdamWStep(p, g, m, v, step, lr, float32(s.beta1), float32(s.beta2), float32(1-s.beta1), float32(1-s.beta2),
			float32(s.eps), float32(1-float64(lr)*s.wd), float32(s.bc1), float32(s.bc2))
	}, func(d device.Core) { err = adamWCore(d, p, g, m, v, step, s) })
	return err
}

// rowScale computes dst_i = alpha src_i / (||src_i|| + eps) for every row i
// of a rows x cols matrix: the backend's RowScale for float32 where it has
// one (the scalars rounded to float32), and otherwise rowScaleCore.
func rowScale(dev device.Core, dst, src device.Buffer, rows, cols int, alpha, eps float64) error {
	if !is32(dst) {
		return rowScaleCore(dev, dst, src, rows, cols, alpha, eps)
	}
	var err error
	compose.Run(dev, "RowScale", func(k RowScaler) { k.RowScale(dst, src, rows, cols, float32(alpha), float32(eps)) },
		func(d device.Core) { err = rowScaleCore(d, dst, src, rows, cols, alpha, eps) })
	return err
}
