package nn

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/safetensors"
	"github.com/hilbert-ml/hilbert/tensor"
)

// Save writes the named parameters of module m (see Parameters) to path
// as a safetensors file, atomically, with the given metadata: float32
// parameters as F32 tensors, float64 ones as F64. The file loads in
// PyTorch as the matching state dict.
func Save(path string, m any, metadata map[string]string) error {
	return SaveTensors(path, Parameters(m), metadata)
}

// SaveTensors writes float32 (F32) and float64 (F64) tensors under their
// Name fields (which must be unique and non-empty) to path, one at a
// time, atomically.
func SaveTensors(path string, ts []*tensor.Tensor, metadata map[string]string) error {
	infos := make([]safetensors.Info, len(ts))
	for i, t := range ts {
		dt, ok := fileDType[t.DType()]
		if !ok {
			return fmt.Errorf("nn: saving %s: tensor %q is %v (want float32 or float64)", path, t.Name, t.DType())
		}
		infos[i] = safetensors.Info{Name: t.Name, DType: dt, Shape: t.Shape()}
	}
	w, err := safetensors.Create(path, infos, metadata)
	if err != nil {
		return fmt.Errorf("nn: %w", err)
	}
	for _, t := range ts {
		var data []byte
		if t.DType() == device.Float64 {
			data = safetensors.EncodeFloat64(t.Float64s())
		} else {
			data = safetensors.EncodeFloat32(t.Float32s())
		}
		if err := w.WriteTensor(t.Name, data); err != nil {
			w.Abort()
			return fmt.Errorf("nn: %w", err)
		}
	}
	if err := w.Commit(); err != nil {
		return fmt.Errorf("nn: %w", err)
	}
	return nil
}

// Load reads the parameters of module m from the safetensors file at
// path. The file is untrusted: besides the format checks of package
// safetensors, every parameter must be present with exactly the
// parameter's shape, as F32 for a float32 parameter and as F64 or F32 (an
// exact widening: a float32 checkpoint replayed in float64) for a float64
// one, and the file must hold no other tensor; errors name the tensor.
// All of this is checked before any parameter is modified. It returns the
// file's metadata.
func Load(path string, m any) (map[string]string, error) {
	return LoadTensors(path, Parameters(m))
}

// LoadTensors reads float32 and float64 tensors by their Name fields from
// path, with the checks described at Load.
func LoadTensors(path string, ts []*tensor.Tensor) (map[string]string, error) {
	f, err := safetensors.Open(path)
	if err != nil {
		return nil, fmt.Errorf("nn: %w", err)
	}
	defer f.Close()
	want := make(map[string]bool, len(ts))
	for _, t := range ts {
		want[t.Name] = true
		in, ok := f.Info(t.Name)
		if !ok {
			return nil, fmt.Errorf("nn: loading %s: tensor %q is missing", path, t.Name)
		}
		switch dt := t.DType(); {
		case dt == device.Float64 && (in.DType == safetensors.F64 || in.DType == safetensors.F32):
		case dt == device.Float32 && in.DType == safetensors.F32:
		case dt == device.Float32 && in.DType == safetensors.F64:
			return nil, fmt.Errorf("nn: loading %s: tensor %q is F64 and the model's parameter float32 (build the model with DType float64 to load it)", path, t.Name)
		default:
			return nil, fmt.Errorf("nn: loading %s: tensor %q has dtype %s (want F32 for a %v parameter)", path, t.Name, in.DType, dt)
		}
		if !slices.Equal(in.Shape, t.Shape()) {
			return nil, fmt.Errorf("nn: loading %s: tensor %q has shape %v (the model's is %v)", path, t.Name, tensor.Shape(in.Shape), t.Shape())
		}
	}
	var extra []string
	for _, in := range f.Tensors() {
		if !want[in.Name] {
			extra = append(extra, fmt.Sprintf("%q", in.Name))
		}
	}
	if len(extra) > 0 {
		sort.Strings(extra)
		return nil, fmt.Errorf("nn: loading %s: tensors not in the model: %s", path, strings.Join(extra, ", "))
	}
	for _, t := range ts {
		if t.DType() == device.Float64 {
			host := make([]float64, t.Len())
			if err := f.ReadAsFloat64(t.Name, t.Shape(), host); err != nil {
				return nil, fmt.Errorf("nn: %w", err)
			}
			if err := t.SetFloat64(host); err != nil {
				return nil, fmt.Errorf("nn: loading %s: %w", path, err)
			}
			continue
		}
		host := make([]float32, t.Len())
		if err := f.ReadFloat32(t.Name, t.Shape(), host); err != nil {
			return nil, fmt.Errorf("nn: %w", err)
		}
		if err := t.SetFloat32(host); err != nil {
			return nil, fmt.Errorf("nn: loading %s: %w", path, err)
		}
	}
	return f.Metadata(), nil
}

// fileDType is the safetensors dtype a parameter of each dtype is saved as.
var fileDType = map[device.DType]safetensors.DType{device.Float32: safetensors.F32, device.Float64: safetensors.F64}
