//go:build !amd64

package cpu

// swigluFast has no vector kernel on this architecture.
func swigluFast(out, a, b []float32) int { return 0 }

// swigluBackwardFast has no vector kernel on this architecture.
func swigluBackwardFast(da, db, dout, a, b []float32) int { return 0 }
