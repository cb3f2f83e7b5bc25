package train

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/optim"
	"github.com/hilbert-ml/hilbert/safetensors"
	"github.com/hilbert-ml/hilbert/tensor"
)

// hostValues are a tensor's values in host memory, in its dtype: f64 for
// a float64 tensor (a float64 run's parameters and optimizer state), f32
// otherwise. Checkpoints store each in its own dtype (F32 or F64), so a
// float64 run resumes bit for bit as a float32 one does.
type hostValues struct {
	f32 []float32
	f64 []float64
}

// wide reports float64 values.
func (v hostValues) wide() bool { return v.f64 != nil }

// len is the number of values.
func (v hostValues) len() int {
	if v.wide() {
		return len(v.f64)
	}
	return len(v.f32)
}

// set writes the values into t.
func (v hostValues) set(t *tensor.Tensor) error {
	if v.wide() {
		return t.SetFloat64(v.f64)
	}
	return t.SetFloat32(v.f32)
}

// encode returns the values as a safetensors tensor named name.
func (v hostValues) encode(name string) safetensors.Tensor {
	if v.wide() {
		return safetensors.Tensor{Name: name, DType: safetensors.F64, Shape: []int{len(v.f64)}, Data: safetensors.EncodeFloat64(v.f64)}
	}
	return safetensors.Tensor{Name: name, DType: safetensors.F32, Shape: []int{len(v.f32)}, Data: safetensors.EncodeFloat32(v.f32)}
}

// appendBits appends the values' little-endian bits (for a digest).
func (v hostValues) appendBits(buf []byte) []byte {
	for _, x := range v.f32 {
		buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(x))
	}
	for _, x := range v.f64 {
		buf = binary.LittleEndian.AppendUint64(buf, math.Float64bits(x))
	}
	return buf
}

// read fills v (whose dtype and length say what is expected) from the
// tensor name of f, of shape, and refuses a value that is not finite.
func (v hostValues) read(f *safetensors.File, name string, shape []int) error {
	var err error
	if v.wide() {
		err = f.ReadFloat64(name, shape, v.f64)
	} else {
		err = f.ReadFloat32(name, shape, v.f32)
	}
	if err != nil {
		return err
	}
	for i := range v.len() {
		x := 0.0
		if v.wide() {
			x = v.f64[i]
		} else {
			x = float64(v.f32[i])
		}
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return fmt.Errorf("tensor %q holds %v at index %d: the checkpoint is damaged or was written after training diverged; use an earlier checkpoint or start over", name, x, i)
		}
	}
	return nil
}

// newValues returns zero values of t's dtype and length, to read into.
func newValues(t *tensor.Tensor) hostValues {
	if t.DType() == device.Float64 {
		return hostValues{f64: make([]float64, t.Len())}
	}
	return hostValues{f32: make([]float32, t.Len())}
}

// optimState is an optimizer set's state on the host, by stable name,
// each tensor in its dtype (optim.Set.SaveState, or SaveState64 for a set
// of float64 parameters).
func optimState(opt *optim.Set) (map[string]hostValues, map[string]int64) {
	if wideSet(opt) {
		tensors, counters := opt.SaveState64()
		return mapValues(tensors, func(v []float64) hostValues { return hostValues{f64: v} }), counters
	}
	tensors, counters := opt.SaveState()
	return mapValues(tensors, func(v []float32) hostValues { return hostValues{f32: v} }), counters
}

// loadOptimState restores what optimState saved.
func loadOptimState(opt *optim.Set, tensors map[string]hostValues, counters map[string]int64) error {
	if wideSet(opt) {
		return opt.LoadState64(mapValues(tensors, func(v hostValues) []float64 { return v.f64 }), counters)
	}
	return opt.LoadState(mapValues(tensors, func(v hostValues) []float32 { return v.f32 }), counters)
}

// mapValues returns m with every value passed through f.
func mapValues[V, W any](m map[string]V, f func(V) W) map[string]W {
	out := make(map[string]W, len(m))
	for n, v := range m {
		out[n] = f(v)
	}
	return out
}

// wideSet reports a set of float64 parameters.
func wideSet(opt *optim.Set) bool {
	ps := opt.Params()
	return len(ps) > 0 && ps[0].DType() == device.Float64
}
