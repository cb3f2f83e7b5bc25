package cuda

import (
	"reflect"
	"testing"

	"github.com/hilbert-ml/hilbert/device"
)

// TestDescription: the CUDA device describes itself by kind, architecture
// and TF32 (the resume settings train compared before it stopped
// importing this package), TF32 read from HILBERT_CUDA_TF32 as cuBLAS's
// math mode is.
func TestDescription(t *testing.T) {
	d := newEmuDevice(t)
	for _, c := range []struct{ env, want string }{{"", "false"}, {"1", "true"}} {
		t.Setenv(TF32Env, c.env)
		want := device.Description{Kind: "cuda", Settings: []device.Setting{{Name: "gpu_arch", Value: d.Arch()}, {Name: "tf32", Value: c.want}}}
		if got := device.Describe(d); !reflect.DeepEqual(got, want) {
			t.Errorf("%s=%q: Describe = %+v, want %+v", TF32Env, c.env, got, want)
		}
	}
}
