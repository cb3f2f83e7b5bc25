package train

import (
	"reflect"
	"strconv"
	"testing"

	"github.com/hilbert-ml/hilbert/device/compose"
	"github.com/hilbert-ml/hilbert/device/cpu"
)

// TestDeviceSettings: the resume settings of the CPU, read through
// device.Describe, are the ones train wrote when it asked device/cpu
// itself (device, gemm, threads, in that order), so checkpoints of
// earlier runs still resume.
func TestDeviceSettings(t *testing.T) {
	want := []setting{{"device", "cpu"}, {"gemm", cpu.GemmName()}, {"threads", strconv.Itoa(cpu.Threads())}}
	if got := deviceSettings(cpu.New()); !reflect.DeepEqual(got, want) {
		t.Errorf("deviceSettings(cpu) = %v, want %v", got, want)
	}
	if got := deviceSettings(compose.CoreOnly(cpu.New())); !reflect.DeepEqual(got, want) {
		t.Errorf("deviceSettings(CoreOnly(cpu)) = %v, want %v", got, want)
	}
}
