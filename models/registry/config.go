package registry

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"github.com/hilbert-ml/hilbert/device"
)

// Size names the size fields a run layer sets on any family's config by
// name (hilbert train's -layers, -dim, -heads, -context, -vocab): a
// family's config type has such a field when it is an int field of that
// name.
type Size string

// The size fields.
const (
	Layers  Size = "Layers"
	Dim     Size = "Dim"
	Heads   Size = "Heads"
	Context Size = "Context"
	Vocab   Size = "Vocab"
)

// Sizes are the size fields of a config, 0 where its type has none.
type Sizes struct {
	Layers, Dim, Heads, Context, Vocab int
}

// SizesOf reads the size fields of cfg (a struct or a pointer to one).
func SizesOf(cfg any) Sizes {
	get := func(s Size) int {
		f, ok := sizeField(reflect.ValueOf(cfg), s)
		if !ok {
			return 0
		}
		return int(f.Int())
	}
	return Sizes{Layers: get(Layers), Dim: get(Dim), Heads: get(Heads), Context: get(Context), Vocab: get(Vocab)}
}

// WithSize returns a copy of cfg (a struct value) with its size field s
// set to v; a config type without the field is an error naming the field
// and the type, so that a flag the family does not have is refused.
func WithSize(cfg any, s Size, v int) (any, error) {
	rv := reflect.ValueOf(cfg)
	if rv.Kind() != reflect.Struct {
		return nil, fmt.Errorf("registry: config %T is not a struct", cfg)
	}
	cp := reflect.New(rv.Type()).Elem()
	cp.Set(rv)
	f, ok := sizeField(cp, s)
	if !ok {
		return nil, fmt.Errorf("registry: %T has no %s field", cfg, s)
	}
	f.SetInt(int64(v))
	return cp.Interface(), nil
}

// WithDType returns a copy of cfg (a struct value) with its DType field
// (a device.DType) set to dt; a config type without one is an error naming
// the type.
func WithDType(cfg any, dt device.DType) (any, error) {
	rv := reflect.ValueOf(cfg)
	if rv.Kind() != reflect.Struct {
		return nil, fmt.Errorf("registry: config %T is not a struct", cfg)
	}
	cp := reflect.New(rv.Type()).Elem()
	cp.Set(rv)
	f := cp.FieldByName("DType")
	if !f.IsValid() || f.Type() != reflect.TypeFor[device.DType]() {
		return nil, fmt.Errorf("registry: %T has no DType field (a device.DType) to build the model in %v", cfg, dt)
	}
	f.Set(reflect.ValueOf(dt))
	return cp.Interface(), nil
}

// sizeField returns v's int field named s.
func sizeField(v reflect.Value, s Size) (reflect.Value, bool) {
	v = reflect.Indirect(v) // a nil pointer gives the zero Value, not a struct
	if v.Kind() != reflect.Struct {
		return reflect.Value{}, false
	}
	f := v.FieldByName(string(s))
	if !f.IsValid() || f.Kind() != reflect.Int {
		return reflect.Value{}, false
	}
	return f, true
}

// ConfigType returns the family's config type: that of its presets.
func (f *Family) ConfigType() (reflect.Type, error) {
	var t reflect.Type
	for _, name := range f.PresetNames() {
		pt := reflect.TypeOf(f.Presets[name])
		if t != nil && pt != t {
			return nil, fmt.Errorf("registry: model %q: presets of two config types, %v and %v", f.Name, t, pt)
		}
		t = pt
	}
	if t == nil {
		return nil, fmt.Errorf("registry: model %q has no presets to take its config type from", f.Name)
	}
	return t, nil
}

// DecodeConfig decodes a config of the family from JSON (as a run's
// state.json records it); a field the config type does not have is an
// error naming it.
func (f *Family) DecodeConfig(data []byte) (any, error) {
	t, err := f.ConfigType()
	if err != nil {
		return nil, err
	}
	v := reflect.New(t)
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v.Interface()); err != nil {
		return nil, fmt.Errorf("registry: model %q: config %s: %w", f.Name, strings.TrimSpace(string(data)), err)
	}
	return v.Elem().Interface(), nil
}

// CheckConfig reports a config the family cannot take: one of another
// type, or one whose Validate method (where the type has one) fails.
func (f *Family) CheckConfig(cfg any) error {
	t, err := f.ConfigType()
	if err != nil {
		return err
	}
	if reflect.TypeOf(cfg) != t {
		return fmt.Errorf("registry: model %q takes a %v config, got %T", f.Name, t, cfg)
	}
	if v, ok := cfg.(interface{ Validate() error }); ok {
		return v.Validate()
	}
	return nil
}
