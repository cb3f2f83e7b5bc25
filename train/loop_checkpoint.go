package train

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"time"
)

// A Loop checkpoint is a run's checkpoint (see checkpoint.go) without
// what only a run has: the same folders, files and state.json, with the
// step, the data cursor, the optimizer's counters and the time, and no
// settings. So a Loop reads a run's checkpoint too (its parameters,
// optimizer state and data position), and a run refuses a Loop's, which
// records no settings to check. Checkpoints of the first Loop format
// ("format": "hilbert-loop-1") still load.

// legacyLoopState is the state.json of the first Loop format.
type legacyLoopState struct {
	Format    string           `json:"format"`
	Step      int              `json:"step"`
	Cursor    json.RawMessage  `json:"cursor,omitempty"`     // a cursor that is JSON
	RawCursor []byte           `json:"raw_cursor,omitempty"` // any other cursor
	Counters  map[string]int64 `json:"counters"`
}

const legacyLoopFormat = "hilbert-loop-1"

// Save writes a checkpoint of the loop under root: the parameters, the
// optimizer state, the update count and the data cursor, in a folder
// root/step-NNNNNNN that root/latest.json then names (each file written
// to a temporary name and renamed, latest.json last, so a crash leaves the
// previous checkpoint in force), keeping DefaultKeepCheckpoints. Over
// several ranks every rank must call it; rank 0 alone writes.
func (l *Loop[B]) Save(root string) error {
	cursor, err := l.data.Cursor()
	if err != nil {
		return fmt.Errorf("train: checkpoint: data cursor: %w", err)
	}
	if l.comm != nil && l.comm.c.Rank() != 0 {
		return nil
	}
	st := checkpointState{Version: checkpointVersion, Step: l.step, SavedAt: time.Now().UTC()}
	if json.Valid(cursor) {
		st.CursorJSON = cursor // kept readable
	} else {
		st.RawCursor = cursor
	}
	tensors, counters := optimState(l.opt)
	st.Counters = counters
	state, _ := json.MarshalIndent(st, "", "  ")
	return writeCheckpoint(root, l.step, 0, l.model.Parameters(), tensors, state, nil)
}

// Load restores the latest checkpoint under root that Save (or a run)
// wrote. Nothing changes unless the whole checkpoint reads and matches the
// model (names, shapes) and the optimizer recipe; values that are not
// finite are refused with the tensor's name. Where root holds no
// checkpoint the error wraps ErrNoCheckpoint.
func (l *Loop[B]) Load(root string) error {
	dir, step, raw, _, err := readLatest(root)
	if err != nil {
		return err
	}
	statePath := filepath.Join(dir, "state.json")
	st, err := decodeLoopState(statePath, raw)
	if err != nil {
		return err
	}
	if st.Step != step {
		return fmt.Errorf("train: resume: latest.json says step %d but %s says %d", step, statePath, st.Step)
	}
	optimPath := filepath.Join(dir, "optim.safetensors")
	tensors, err := readOptimState(optimPath, l.opt)
	if err != nil {
		return err
	}
	params := l.model.Parameters()
	values, err := readParameters(filepath.Join(dir, "model.safetensors"), params)
	if err != nil {
		return err
	}
	cursor := []byte(st.CursorJSON)
	if len(cursor) == 0 {
		cursor = st.RawCursor
	}
	if err := l.data.Seek(cursor); err != nil {
		return fmt.Errorf("train: resume: data cursor: %w", err)
	}
	if err := loadOptimState(l.opt, tensors, st.Counters); err != nil {
		return fmt.Errorf("train: resume: %s: %w", optimPath, err)
	}
	if err := setParameters(params, values); err != nil {
		return err
	}
	l.step = st.Step
	return nil
}

// decodeLoopState decodes a checkpoint's state.json for a Loop: the shared
// format (a Loop's or a run's), or the first Loop format.
func decodeLoopState(path string, raw []byte) (checkpointState, error) {
	var peek struct {
		Format string `json:"format"`
	}
	if err := json.Unmarshal(raw, &peek); err != nil {
		return checkpointState{}, fmt.Errorf("train: resume: %s is corrupt: %w", path, err)
	}
	switch peek.Format {
	case legacyLoopFormat:
		var old legacyLoopState
		if err := json.Unmarshal(raw, &old); err != nil {
			return checkpointState{}, fmt.Errorf("train: resume: %s is corrupt: %w", path, err)
		}
		return checkpointState{Step: old.Step, CursorJSON: old.Cursor, RawCursor: old.RawCursor, Counters: old.Counters}, nil
	case "":
	default:
		return checkpointState{}, fmt.Errorf("train: resume: %s: format %q, want a checkpoint of train.Loop or of a run", path, peek.Format)
	}
	var st checkpointState
	if err := json.Unmarshal(raw, &st); err != nil {
		return st, fmt.Errorf("train: resume: %s is corrupt: %w", path, err)
	}
	if st.Version < 1 || st.Version > checkpointVersion {
		return st, fmt.Errorf("train: resume: %s: version %d, this build reads 1 to %d", path, st.Version, checkpointVersion)
	}
	for name, v := range st.Counters {
		if v < 0 {
			return st, fmt.Errorf("train: resume: %s is corrupt: counter %s = %d: want >= 0", path, name, v)
		}
	}
	return st, nil
}
