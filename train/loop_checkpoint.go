package train

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"time"
)

// loopState is a Loop checkpoint's state.json.
type loopState struct {
	Format    string           `json:"format"`
	Step      int              `json:"step"`
	Cursor    json.RawMessage  `json:"cursor,omitempty"`     // a cursor that is JSON
	RawCursor []byte           `json:"raw_cursor,omitempty"` // any other cursor
	Counters  map[string]int64 `json:"counters"`
	SavedAt   time.Time        `json:"saved_at"`
}

const loopFormat = "hilbert-loop-1"

// Save writes a checkpoint of the loop under root: the parameters, the
// optimizer state, the update count and the data cursor, in a folder
// root/step-NNNNNNN that root/latest.json then names (each file written
// to a temporary name and renamed, latest.json last, so a crash leaves the
// previous checkpoint in force), keeping DefaultKeepCheckpoints. Over several ranks every rank must call
// it; rank 0 alone writes.
func (l *Loop[B]) Save(root string) error {
	cursor, err := l.data.Cursor()
	if err != nil {
		return fmt.Errorf("train: checkpoint: data cursor: %w", err)
	}
	if l.comm != nil && l.comm.c.Rank() != 0 {
		return nil
	}
	st := loopState{Format: loopFormat, Step: l.step, SavedAt: time.Now().UTC()}
	if json.Valid(cursor) {
		st.Cursor = cursor // kept readable
	} else {
		st.RawCursor = cursor
	}
	tensors, counters := l.opt.SaveState()
	st.Counters = counters
	state, _ := json.MarshalIndent(st, "", "  ")
	return writeCheckpoint(root, l.step, 0, l.model.Parameters(), tensors, state, nil)
}

// Load restores the latest checkpoint Save wrote under root. Nothing
// changes unless the whole checkpoint reads and matches the model (names,
// shapes) and the optimizer recipe; values that are not finite are
// refused with the tensor's name. Where root holds no checkpoint the error
// wraps ErrNoCheckpoint.
func (l *Loop[B]) Load(root string) error {
	dir, step, raw, _, err := readLatest(root)
	if err != nil {
		return err
	}
	statePath := filepath.Join(dir, "state.json")
	var st loopState
	if err := json.Unmarshal(raw, &st); err != nil {
		return fmt.Errorf("train: resume: %s is corrupt: %w", statePath, err)
	}
	if st.Format != loopFormat {
		return fmt.Errorf("train: resume: %s: format %q, want %q (a checkpoint of train.Loop)", statePath, st.Format, loopFormat)
	}
	if st.Step != step {
		return fmt.Errorf("train: resume: latest.json says step %d but %s says %d", step, statePath, st.Step)
	}
	optimPath := filepath.Join(dir, "optim.safetensors")
	tensors, err := readOptimState(optimPath, l.opt.SaveState)
	if err != nil {
		return err
	}
	params := l.model.Parameters()
	values, err := readParameters(filepath.Join(dir, "model.safetensors"), params)
	if err != nil {
		return err
	}
	cursor := []byte(st.Cursor)
	if len(cursor) == 0 {
		cursor = st.RawCursor
	}
	if err := l.data.Seek(cursor); err != nil {
		return fmt.Errorf("train: resume: data cursor: %w", err)
	}
	if err := l.opt.LoadState(tensors, st.Counters); err != nil {
		return fmt.Errorf("train: resume: %s: %w", optimPath, err)
	}
	for i, p := range params {
		p.SetFloat32(values[i])
	}
	l.step = st.Step
	return nil
}
