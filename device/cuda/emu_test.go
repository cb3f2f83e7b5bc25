package cuda

import (
	"strings"
	"testing"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/internal/cudaemu"
)

// newEmuDevice opens a Device on the CPU emulation of CUDA, or skips when
// it cannot be built (no g++).
func newEmuDevice(t *testing.T) *Device {
	t.Helper()
	cudaemu.Setenv(t)
	d, err := New(0)
	if err != nil {
		t.Fatalf("New on the CUDA emulator: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// TestEmulator runs every parity suite through the real host code and the
// kernels' CUDA C source on the emulator.
func TestEmulator(t *testing.T) {
	g := newEmuDevice(t)
	if !strings.Contains(g.Describe(), "CPU emulator") {
		t.Fatalf("Describe() = %q, want the emulator", g.Describe())
	}
	runSuites(t, g)
}

// TestEmulatorReverseSchedule runs the suites again with every scheduling
// pass of the emulator going from the last thread to the first: a race
// between threads of a block that the forward order hides (a read of
// shared memory another thread writes before the next barrier) changes
// the results under one of the two orders.
func TestEmulatorReverseSchedule(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: TestEmulator covers the forward order")
	}
	t.Setenv("EMU_SCHEDULE", "reverse")
	runSuites(t, newEmuDevice(t))
}

func TestEmulatorEnvNames(t *testing.T) {
	if cudaemu.LibDirEnv != LibDirEnv || cudaemu.CacheDirEnv != CacheDirEnv {
		t.Fatalf("cudaemu uses %s/%s, cuda %s/%s", cudaemu.LibDirEnv, cudaemu.CacheDirEnv, LibDirEnv, CacheDirEnv)
	}
}

// TestEmulatorLaunchErrors checks that refused work reaches the caller
// named: a launch with a block too large for the device is refused by the
// (emulated) driver. (An attention head dim without a kernel is no longer
// refused: it runs the Core composition, checked in suiteAttention.)
func TestEmulatorLaunchErrors(t *testing.T) {
	g := newEmuDevice(t)
	b, _ := g.Alloc(device.Float32, 64)
	g.enter()
	g.launch("h_fill_f32", [3]uint32{1, 1, 1}, [3]uint32{2048, 1, 1}, 0, ptrArg(b), i64arg(64), f32arg(1))
	g.leave()
	err := g.Synchronize()
	if err == nil || !strings.Contains(err.Error(), "h_fill_f32") || !strings.Contains(err.Error(), "block (2048,1,1)") {
		t.Fatalf("oversized block: %v", err)
	}

}
