//go:build !amd64

package cpu

import "github.com/hilbert-ml/hilbert/device"

// axpbyFast has no vector kernel on this architecture.
func axpbyFast(dst, x []float32, alpha, beta float32) int { return 0 }

// adamWFast has no vector kernel on this architecture.
func adamWFast(p, g, m, v, s []float32, c *adamScalars32) int { return 0 }

// binaryFast has no vector kernel on this architecture.
func binaryFast(op device.BinaryOp, z, x, y []float32) int { return 0 }

// colSumsFast has no vector kernel on this architecture.
func colSumsFast(op device.ReduceOp, acc []float64, x []float32, rows, pitch int) int { return 0 }

// rowSumSquaresFast has no vector kernel on this architecture.
func rowSumSquaresFast(ss []float64, x []float32, cols int) int { return 0 }

// softmaxGradFast has no vector kernel on this architecture.
func softmaxGradFast(ds, p []float32, d float32) int { return 0 }

// lnColGradsFast has no vector kernel on this architecture.
func lnColGradsFast(accW, accB []float64, x, dy, mean, rstd []float32, rows, pitch int) int {
	return 0
}
