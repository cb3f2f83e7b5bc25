package train

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/hilbert-ml/hilbert/data/fineweb"
	"github.com/hilbert-ml/hilbert/models"
	"github.com/hilbert-ml/hilbert/nn"
	"github.com/hilbert-ml/hilbert/safetensors"
)

// A checkpoint is a folder RunsDir/Name/checkpoints/step-NNNNNNN holding
//
//	model.safetensors   the model's parameters by name
//	optim.safetensors   every optimizer state tensor by its stable name
//	state.json          step, data cursor, step counters and the settings
//	                    a resumed run must share
//
// and checkpoints/latest.json names the newest complete one. Each file is
// written to a temporary name, synced and renamed; latest.json is replaced
// last, so a crash at any point leaves the previous checkpoint in force.

const checkpointVersion = 1

// checkpointState is state.json.
type checkpointState struct {
	Version   int              `json:"version"`
	Step      int              `json:"step"`
	Tokens    int64            `json:"tokens"`
	ElapsedS  float64          `json:"elapsed_s"`
	Cursor    fineweb.Cursor   `json:"cursor"`
	Counters  map[string]int64 `json:"counters"`
	Model     models.Config    `json:"model"`
	Head      string           `json:"head"`
	Projected bool             `json:"projected"`
	SeqLen    int              `json:"seq_len"`
	Micro     int              `json:"micro_batch"`
	BatchSeqs int              `json:"batch_seqs"`
	Steps     int              `json:"steps"`
	Warmup    int              `json:"warmup"`
	Seed      uint64           `json:"seed"`
	DataSeed  uint64           `json:"data_seed"`
	Shards    []string         `json:"train_shards"`
	SavedAt   time.Time        `json:"saved_at"`
}

type latestPointer struct {
	Dir  string `json:"dir"`
	Step int    `json:"step"`
}

func (t *Trainer) checkpointRoot() string { return filepath.Join(t.Dir(), "checkpoints") }

// SaveCheckpoint writes a checkpoint of the current state and makes it the
// latest; older checkpoint folders are removed afterwards.
func (t *Trainer) SaveCheckpoint() error {
	root := t.checkpointRoot()
	name := fmt.Sprintf("step-%07d", t.step)
	dir := filepath.Join(root, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("train: checkpoint: %w", err)
	}
	meta := map[string]string{"step": fmt.Sprint(t.step), "format": "hilbert-checkpoint"}
	if err := nn.SaveTensors(filepath.Join(dir, "model.safetensors"), t.model.Parameters(), meta); err != nil {
		return fmt.Errorf("train: checkpoint: %w", err)
	}
	tensors, counters := t.opt.SaveState()
	names := make([]string, 0, len(tensors))
	for n := range tensors {
		names = append(names, n)
	}
	sort.Strings(names)
	st := make([]safetensors.Tensor, 0, len(names))
	for _, n := range names {
		v := tensors[n]
		st = append(st, safetensors.Tensor{Name: n, DType: safetensors.F32, Shape: []int{len(v)}, Data: safetensors.EncodeFloat32(v)})
	}
	if err := safetensors.Save(filepath.Join(dir, "optim.safetensors"), st, meta); err != nil {
		return fmt.Errorf("train: checkpoint: %w", err)
	}
	state := t.stateForCheckpoint(counters)
	data, _ := json.MarshalIndent(state, "", "  ")
	if err := writeFileAtomic(filepath.Join(dir, "state.json"), data); err != nil {
		return err
	}
	if err := t.metrics.Sync(); err != nil {
		return fmt.Errorf("train: checkpoint: metrics: %w", err)
	}
	ptr, _ := json.Marshal(latestPointer{Dir: name, Step: t.step})
	if err := writeFileAtomic(filepath.Join(root, "latest.json"), ptr); err != nil {
		return err
	}
	// Only now is the new checkpoint in force: drop the older ones.
	entries, _ := os.ReadDir(root)
	for _, e := range entries {
		if e.IsDir() && strings.HasPrefix(e.Name(), "step-") && e.Name() != name {
			os.RemoveAll(filepath.Join(root, e.Name()))
		}
	}
	return nil
}

func (t *Trainer) stateForCheckpoint(counters map[string]int64) checkpointState {
	return checkpointState{
		Version: checkpointVersion, Step: t.step, Tokens: t.tokens, ElapsedS: t.elapsed.Seconds(),
		Cursor: t.loader.Cursor(), Counters: counters,
		Model: t.cfg.Model, Head: strings.ToLower(t.cfg.Head), Projected: t.cfg.Projected,
		SeqLen: t.cfg.SeqLen, Micro: t.cfg.MicroBatch, BatchSeqs: t.cfg.BatchSeqs,
		Steps: t.cfg.Steps, Warmup: t.cfg.Warmup, Seed: t.cfg.Seed, DataSeed: t.cfg.DataSeed,
		Shards: t.cfg.TrainShards, SavedAt: time.Now().UTC(),
	}
}

// HasCheckpoint reports whether the run's folder holds a checkpoint.
func HasCheckpoint(cfg Config) bool {
	cfg, err := cfg.WithDefaults()
	if err != nil {
		return false
	}
	_, err = os.Stat(filepath.Join(cfg.RunsDir, cfg.Name, "checkpoints", "latest.json"))
	return err == nil
}

// Resume restores the latest checkpoint of the run: model, optimizer
// state, step, data cursor and the metrics logged up to it. A missing,
// corrupt or mismatched checkpoint is an error that names the file or the
// setting; nothing is changed unless every check passes.
func (t *Trainer) Resume() error {
	root := t.checkpointRoot()
	ptrPath := filepath.Join(root, "latest.json")
	raw, err := os.ReadFile(ptrPath)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("train: resume: no checkpoint in %s", root)
	}
	if err != nil {
		return fmt.Errorf("train: resume: %w", err)
	}
	var ptr latestPointer
	if err := json.Unmarshal(raw, &ptr); err != nil || ptr.Dir == "" || strings.ContainsAny(ptr.Dir, `/\`) {
		return fmt.Errorf("train: resume: %s is corrupt (%v)", ptrPath, err)
	}
	dir := filepath.Join(root, ptr.Dir)
	statePath := filepath.Join(dir, "state.json")
	raw, err = os.ReadFile(statePath)
	if err != nil {
		return fmt.Errorf("train: resume: %w", err)
	}
	var st checkpointState
	if err := json.Unmarshal(raw, &st); err != nil {
		return fmt.Errorf("train: resume: %s is corrupt: %w", statePath, err)
	}
	if st.Version != checkpointVersion {
		return fmt.Errorf("train: resume: %s: version %d, this build reads %d", statePath, st.Version, checkpointVersion)
	}
	if st.Step != ptr.Step {
		return fmt.Errorf("train: resume: %s says step %d but %s says %d", ptrPath, ptr.Step, statePath, st.Step)
	}
	if err := t.checkCompatible(st, statePath); err != nil {
		return err
	}
	// Optimizer state first into host memory, so nothing is written to
	// the model unless both files check.
	tensors, err := readOptimState(filepath.Join(dir, "optim.safetensors"), t.opt.SaveState)
	if err != nil {
		return err
	}
	if _, err := nn.LoadTensors(filepath.Join(dir, "model.safetensors"), t.model.Parameters()); err != nil {
		return fmt.Errorf("train: resume: %w", err)
	}
	if err := t.opt.LoadState(tensors, st.Counters); err != nil {
		return fmt.Errorf("train: resume: %s: %w", filepath.Join(dir, "optim.safetensors"), err)
	}
	if err := t.loader.Restore(st.Cursor); err != nil {
		return fmt.Errorf("train: resume: data cursor: %w", err)
	}
	t.step, t.tokens = st.Step, st.Tokens
	t.elapsed = time.Duration(st.ElapsedS * float64(time.Second))
	hist, err := readMetrics(filepath.Join(t.Dir(), "metrics.jsonl"), t.step)
	if err != nil {
		return err
	}
	t.history = hist
	return nil
}

// checkCompatible compares the settings a resumed run must share with the
// checkpoint and names the first that differs.
func (t *Trainer) checkCompatible(st checkpointState, path string) error {
	c := t.cfg
	type field struct {
		name      string
		have, got any
	}
	fields := []field{
		{"model", c.Model, st.Model},
		{"head", strings.ToLower(c.Head), st.Head},
		{"projected", c.Projected, st.Projected},
		{"seq_len", c.SeqLen, st.SeqLen},
		{"micro_batch", c.MicroBatch, st.Micro},
		{"batch_seqs", c.BatchSeqs, st.BatchSeqs},
		{"steps", c.Steps, st.Steps},
		{"warmup", c.Warmup, st.Warmup},
		{"seed", c.Seed, st.Seed},
		{"data_seed", c.DataSeed, st.DataSeed},
		{"train_shards", len(c.TrainShards), len(st.Shards)},
	}
	for _, f := range fields {
		if fmt.Sprint(f.have) != fmt.Sprint(f.got) {
			return fmt.Errorf("train: resume: %s: checkpoint has %s = %v, this run %v", path, f.name, f.got, f.have)
		}
	}
	if st.Step > c.Steps {
		return fmt.Errorf("train: resume: %s: checkpoint at step %d is past steps = %d", path, st.Step, c.Steps)
	}
	return nil
}

// readOptimState reads every state tensor the optimizer set expects, with
// the lengths it expects (taken from saveState's current copy).
func readOptimState(path string, saveState func() (map[string][]float32, map[string]int64)) (map[string][]float32, error) {
	f, err := safetensors.Open(path)
	if err != nil {
		return nil, fmt.Errorf("train: resume: %w", err)
	}
	defer f.Close()
	want, _ := saveState()
	out := make(map[string][]float32, len(want))
	for name, cur := range want {
		dst := make([]float32, len(cur))
		if err := f.ReadFloat32(name, []int{len(cur)}, dst); err != nil {
			return nil, fmt.Errorf("train: resume: %s: %w", path, err)
		}
		out[name] = dst
	}
	if n := len(f.Tensors()); n != len(want) {
		return nil, fmt.Errorf("train: resume: %s holds %d state tensors, the optimizer has %d (another recipe?)", path, n, len(want))
	}
	return out, nil
}
