package optim

import (
	"fmt"
	"maps"
	"slices"

	"github.com/hilbert-ml/hilbert/tensor"
)

// State returns the state of every optimizer of the set by stable names
// (see StateEntry), in step order. Names are unique across the set
// because parameter names are.
func (s *Set) State() []StateEntry {
	var es []StateEntry
	for _, g := range s.groups {
		es = append(es, g.Optimizer.State()...)
	}
	return es
}

// SaveState copies the set's state to the host: tensors by name and step
// counters by name, ready for a checkpoint (safetensors tensors and
// metadata, for instance). The values are float32: a set that updates
// float64 parameters saves with SaveState64 instead.
func (s *Set) SaveState() (tensors map[string][]float32, counters map[string]int64) {
	return saveState(s, (*tensor.Tensor).Float32s)
}

// SaveState64 is SaveState with the tensors' values widened to float64,
// which is exact for float32 and float64 state alike: the form to
// checkpoint a set that updates float64 parameters (SaveState would round
// their state to float32).
func (s *Set) SaveState64() (tensors map[string][]float64, counters map[string]int64) {
	return saveState(s, (*tensor.Tensor).Float64s)
}

// saveState is SaveState and SaveState64: the tensors read with read.
func saveState[T any](s *Set, read func(*tensor.Tensor) []T) (tensors map[string][]T, counters map[string]int64) {
	tensors, counters = map[string][]T{}, map[string]int64{}
	for _, e := range s.State() {
		if e.Tensor != nil {
			tensors[e.Name] = read(e.Tensor)
		} else {
			counters[e.Name] = *e.Counter
		}
	}
	return tensors, counters
}

// LoadState restores state saved by SaveState, bit-exactly. Every entry
// of the set must be present with the right length; entries the set does
// not have are an error too (a checkpoint of another recipe), named in
// sorted order. Nothing is written unless everything checks.
func (s *Set) LoadState(tensors map[string][]float32, counters map[string]int64) error {
	return loadState(s, "LoadState", tensors, counters, (*tensor.Tensor).SetFloat32)
}

// LoadState64 restores state saved by SaveState64, bit-exactly, with
// LoadState's checks. A float32 entry takes its values rounded to float32
// (exact for the values SaveState64 saved from it).
func (s *Set) LoadState64(tensors map[string][]float64, counters map[string]int64) error {
	return loadState(s, "LoadState64", tensors, counters, (*tensor.Tensor).SetFloat64)
}

// loadState checks tensors and counters against the set's entries and
// then writes them, with set.
func loadState[T float32 | float64](s *Set, op string, tensors map[string][]T, counters map[string]int64, set func(*tensor.Tensor, []T) error) error {
	entries := s.State()
	used := map[string]bool{}
	for _, e := range entries {
		used[e.Name] = true
		if e.Tensor != nil {
			v, ok := tensors[e.Name]
			if !ok {
				return fmt.Errorf("optim: %s: missing tensor %s", op, e.Name)
			}
			if len(v) != e.Tensor.Len() {
				return fmt.Errorf("optim: %s: %s has %d values, want %d (shape %v)", op, e.Name, len(v), e.Tensor.Len(), e.Tensor.Shape())
			}
		} else {
			v, ok := counters[e.Name]
			if !ok {
				return fmt.Errorf("optim: %s: missing counter %s", op, e.Name)
			}
			if v < 0 {
				return fmt.Errorf("optim: %s: counter %s is %d", op, e.Name, v)
			}
		}
	}
	names := slices.Concat(slices.Collect(maps.Keys(tensors)), slices.Collect(maps.Keys(counters)))
	if extra := slices.DeleteFunc(names, func(n string) bool { return used[n] }); len(extra) > 0 {
		return fmt.Errorf("optim: %s: state %s is not part of this optimizer set", op, slices.Min(extra))
	}
	for _, e := range entries {
		if e.Tensor != nil {
			if err := set(e.Tensor, tensors[e.Name]); err != nil { // checked above: cannot fail
				return fmt.Errorf("optim: %s: %s: %w", op, e.Name, err)
			}
		} else {
			*e.Counter = counters[e.Name]
		}
	}
	return nil
}
