package cpu_test

import (
	"testing"

	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/device/devicetest"
)

// TestConformance runs the backend conformance suite on the CPU, float32
// and float64.
func TestConformance(t *testing.T) { devicetest.Run(t, cpu.New()) }
