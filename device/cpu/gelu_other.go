//go:build !amd64

package cpu

// geluRowFast has no vector kernel on this architecture.
func geluRowFast(out, x, bias []float32) bool { return false }

// geluBackwardRowFast has no vector kernel on this architecture.
func geluBackwardRowFast(dx, dout, x, bias []float32) bool { return false }
