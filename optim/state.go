package optim

import (
	"fmt"
	"sort"
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
// metadata, for instance).
func (s *Set) SaveState() (tensors map[string][]float32, counters map[string]int64) {
	tensors, counters = map[string][]float32{}, map[string]int64{}
	for _, e := range s.State() {
		if e.Tensor != nil {
			tensors[e.Name] = e.Tensor.Float32s()
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
	entries := s.State()
	used := map[string]bool{}
	for _, e := range entries {
		used[e.Name] = true
		if e.Tensor != nil {
			v, ok := tensors[e.Name]
			if !ok {
				return fmt.Errorf("optim: LoadState: missing tensor %s", e.Name)
			}
			if len(v) != e.Tensor.Len() {
				return fmt.Errorf("optim: LoadState: %s has %d values, want %d (shape %v)", e.Name, len(v), e.Tensor.Len(), e.Tensor.Shape())
			}
		} else {
			v, ok := counters[e.Name]
			if !ok {
				return fmt.Errorf("optim: LoadState: missing counter %s", e.Name)
			}
			if v < 0 {
				return fmt.Errorf("optim: LoadState: counter %s is %d", e.Name, v)
			}
		}
	}
	var extra []string
	for n := range tensors {
		if !used[n] {
			extra = append(extra, n)
		}
	}
	for n := range counters {
		if !used[n] {
			extra = append(extra, n)
		}
	}
	if len(extra) > 0 {
		sort.Strings(extra)
		return fmt.Errorf("optim: LoadState: state %s is not part of this optimizer set", extra[0])
	}
	for _, e := range entries {
		if e.Tensor != nil {
			e.Tensor.SetFloat32(tensors[e.Name])
		} else {
			*e.Counter = counters[e.Name]
		}
	}
	return nil
}
