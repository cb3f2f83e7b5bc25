package train

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hilbert-ml/hilbert/data"
	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/models"
	"github.com/hilbert-ml/hilbert/nn"
	"github.com/hilbert-ml/hilbert/safetensors"
	"github.com/hilbert-ml/hilbert/tensor"
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
// This file writes checkpoints; checkpoint_read.go reads them and
// resume.go restores a run from one.

// checkpointVersion 2 adds the settings map and the data fingerprints;
// version 1 checkpoints still resume, compared on the settings they hold.
const checkpointVersion = 2

// checkpointState is state.json.
type checkpointState struct {
	Version  int     `json:"version"`
	Step     int     `json:"step"`
	Tokens   int64   `json:"tokens"`
	ElapsedS float64 `json:"elapsed_s"`
	// CursorJSON is the data position as JSON: a run's loader position
	// (a data.Cursor), or a train.Loop Source's cursor that is JSON;
	// RawCursor a Source's cursor that is not.
	CursorJSON json.RawMessage `json:"cursor,omitempty"`
	RawCursor  []byte          `json:"raw_cursor,omitempty"`
	// Cursor is CursorJSON decoded as a run's loader position (by
	// decodeState).
	Cursor   data.Cursor      `json:"-"`
	Counters map[string]int64 `json:"counters"`
	// MetricsRecords counts the records of metrics.jsonl up to Step, for
	// a resume to tell lost ones (0: not counted, an older checkpoint).
	MetricsRecords int `json:"metrics_records,omitempty"`
	// Settings holds every setting that changes the numbers (see
	// Trainer.settings), formatted; a resumed run must match them all.
	Settings map[string]string `json:"settings,omitempty"`

	// Family and Arch record a model of another family than the paper's
	// (Arch: its configuration as JSON); both are empty for the paper's,
	// whose configuration is Model.
	Family string          `json:"family,omitempty"`
	Arch   json.RawMessage `json:"arch,omitempty"`

	// The fields of version 1, still written by a run for people and old
	// readers (a train.Loop checkpoint has none of them).
	Model     models.Config `json:"model,omitzero"`
	Head      string        `json:"head,omitempty"`
	Projected bool          `json:"projected,omitempty"`
	SeqLen    int           `json:"seq_len,omitempty"`
	Micro     int           `json:"micro_batch,omitempty"`
	BatchSeqs int           `json:"batch_seqs,omitempty"`
	Steps     int           `json:"steps,omitempty"`
	Warmup    int           `json:"warmup,omitempty"`
	Seed      uint64        `json:"seed,omitempty"`
	DataSeed  uint64        `json:"data_seed,omitempty"`
	Shards    []string      `json:"train_shards,omitempty"`
	SavedAt   time.Time     `json:"saved_at"`
}

type latestPointer struct {
	Dir  string `json:"dir"`
	Step int    `json:"step"`
}

func (t *Trainer) checkpointRoot() string { return filepath.Join(t.Dir(), "checkpoints") }

// SaveCheckpoint writes a checkpoint of the current state and makes it the
// latest; older checkpoint folders are removed afterwards.
func (t *Trainer) SaveCheckpoint() error {
	// The loop's source finishes the update's round of a data-parallel
	// run (every rank), so that the loader's cursor is the stream's.
	if _, err := t.loop.data.Cursor(); err != nil {
		return fmt.Errorf("train: checkpoint: data cursor: %w", err)
	}
	// The data must still be what the checkpoint's fingerprints say (a
	// shard written over in place is refused, naming it): on every rank.
	if err := errors.Join(t.loader.Verify(), t.val.Verify()); err != nil {
		return fmt.Errorf("train: checkpoint: %w", err)
	}
	if t.rank != 0 {
		return nil
	}
	settings, err := t.settings()
	if err != nil {
		return fmt.Errorf("train: checkpoint: %w", err)
	}
	tensors, counters := optimState(t.opt)
	state := t.stateForCheckpoint(counters, settings)
	data, _ := json.MarshalIndent(state, "", "  ")
	return writeCheckpoint(t.checkpointRoot(), t.step, t.cfg.KeepCheckpoints, t.model.Parameters(), tensors, data, func() error {
		if err := t.metrics.Sync(); err != nil {
			return fmt.Errorf("train: checkpoint: metrics: %w", err)
		}
		return nil
	})
}

// writeCheckpoint writes root/step-NNNNNNN (model.safetensors, optim.safetensors
// and state.json holding state), calls beforeLatest, then points
// root/latest.json at the new folder and prunes the others (see
// pruneCheckpoints) to keep checkpoints in all.
func writeCheckpoint(root string, step, keep int, params []*tensor.Tensor, optState map[string]hostValues, state []byte, beforeLatest func() error) error {
	name := fmt.Sprintf("step-%07d", step)
	dir := filepath.Join(root, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("train: checkpoint: %w", err)
	}
	meta := map[string]string{"step": fmt.Sprint(step), "format": "hilbert-checkpoint"}
	if err := nn.SaveTensors(filepath.Join(dir, "model.safetensors"), params, meta); err != nil {
		return fmt.Errorf("train: checkpoint: %w", err)
	}
	names := slices.Sorted(maps.Keys(optState))
	st := make([]safetensors.Tensor, 0, len(names))
	for _, n := range names {
		st = append(st, optState[n].encode(n))
	}
	if err := safetensors.Save(filepath.Join(dir, "optim.safetensors"), st, meta); err != nil {
		return fmt.Errorf("train: checkpoint: %w", err)
	}
	statePath := filepath.Join(dir, "state.json")
	if err := writeFileAtomic(statePath, sealState(state)); err != nil {
		return err
	}
	// The tensor files get the mode of the other outputs (safetensors
	// writes them 0600): 0644 less the umask, as state.json was created.
	if info, err := os.Stat(statePath); err == nil {
		for _, f := range []string{"model.safetensors", "optim.safetensors"} {
			os.Chmod(filepath.Join(dir, f), info.Mode().Perm())
		}
	}
	if beforeLatest != nil {
		if err := beforeLatest(); err != nil {
			return err
		}
	}
	ptr, _ := json.Marshal(latestPointer{Dir: name, Step: step})
	if err := writeFileAtomic(filepath.Join(root, "latest.json"), ptr); err != nil {
		return err
	}
	// Only now is the new checkpoint in force: prune the others.
	pruneCheckpoints(root, step, keep)
	return nil
}

// DefaultKeepCheckpoints is how many checkpoints a run keeps by default:
// the newest and the one before it, which a reader that opened it just
// before it was replaced may still be reading.
const DefaultKeepCheckpoints = 2

// KeepAllCheckpoints as Config.KeepCheckpoints keeps every checkpoint.
const KeepAllCheckpoints = -1

// pruneCheckpoints removes the step folders of root but the one of step
// (the checkpoint in force) and the keep-1 newest before it (keep 0:
// DefaultKeepCheckpoints; negative: none is removed). Folders past step
// (of a run that later resumed an earlier checkpoint) and ones a kill
// left half removed or half written are removed too, as are temporary
// files left in root.
func pruneCheckpoints(root string, step, keep int) {
	if keep < 0 {
		return
	}
	keep = cmp.Or(keep, DefaultKeepCheckpoints)
	folders := checkpointFolders(root)
	kept := 0
	for i := len(folders) - 1; i >= 0; i-- {
		f := folders[i]
		if f.step <= step && kept < keep {
			kept++
			continue
		}
		os.RemoveAll(filepath.Join(root, f.name))
	}
	tmps, _ := filepath.Glob(filepath.Join(root, ".tmp-*"))
	for _, p := range tmps {
		os.Remove(p)
	}
}

func (t *Trainer) stateForCheckpoint(counters map[string]int64, settings []setting) checkpointState {
	m := make(map[string]string, len(settings))
	for _, s := range settings {
		m[s.name] = s.value
	}
	var family string
	arch, _ := archJSON(t.cfg)                   // settings marshalled it already
	cursor, _ := json.Marshal(t.loader.Cursor()) // a struct of numbers
	if !t.cfg.IsPaper() {
		family = t.cfg.Family
	}
	return checkpointState{
		Family: family, Arch: arch,
		Version: checkpointVersion, Step: t.step, Tokens: t.tokens, ElapsedS: t.elapsed.Seconds(),
		CursorJSON: cursor, Counters: counters, Settings: m, MetricsRecords: len(t.history),
		Model: t.cfg.Model, Head: strings.ToLower(t.cfg.Head), Projected: t.cfg.Projected,
		SeqLen: t.cfg.SeqLen, Micro: t.cfg.MicroBatch, BatchSeqs: t.cfg.BatchSeqs,
		Steps: t.cfg.ScheduleSteps, Warmup: t.cfg.WarmupSteps(), Seed: t.cfg.Seed, DataSeed: t.cfg.DataSeed,
		Shards: t.cfg.TrainShards, SavedAt: time.Now().UTC(),
	}
}

// setting is one value that changes a run's numbers.
type setting struct{ name, value string }

// settings lists every setting that changes the run's numbers, with the
// values in force (defaults resolved, learning rates as the optimizer
// groups hold them), and the fingerprints of the data: what a resumed run
// must share with its checkpoint to continue it bit for bit. What only
// changes what is logged or when (intervals, steps) is not in it.
func (t *Trainer) settings() ([]setting, error) {
	c, m := t.cfg, t.cfg.Model
	i := strconv.Itoa
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	autocast := "off"
	if dt, _ := c.AutocastDType(); dt != 0 {
		autocast = "bf16"
	}
	var s []setting
	if c.IsPaper() {
		s = []setting{
			{"layers", i(m.Layers)}, {"dim", i(m.Dim)}, {"head_dim", i(m.HeadDim)}, {"mlp_hidden", i(m.MLPHidden)},
			{"vocab", i(m.Vocab)}, {"context", i(m.Context)}, {"rope_base", f(m.RoPEBase)}, {"init_std", f(m.InitStd)},
		}
	} else {
		// Another family: its name and its whole configuration.
		arch, err := archJSON(c)
		if err != nil {
			return nil, err
		}
		s = []setting{{"model", c.Family}, {"arch", string(arch)}, {"untie_head", strconv.FormatBool(c.UntieHead)}}
		s = append(s, setting{"init_hf", t.initHF}) // init_hf.go
	}
	s = append(s, []setting{
		{"head", strings.ToLower(c.Head)}, {"projected", strconv.FormatBool(c.Projected)},
		{"muon_lr", f(t.opt.PeakLR("blocks"))}, {"embed_lr", f(t.opt.PeakLR("embed"))}, {"head_lr", f(t.opt.PeakLR("head"))},
		{"seed", strconv.FormatUint(c.Seed, 10)}, {"data_seed", strconv.FormatUint(c.DataSeed, 10)},
		{"seq_len", i(c.SeqLen)}, {"micro_batch", i(c.MicroBatch)}, {"batch_seqs", i(c.BatchSeqs)},
		{"clip", f(c.ClipNorm)}, {"schedule_steps", i(c.ScheduleSteps)}, {"warmup", i(c.WarmupSteps())},
		{"val_tokens", i(c.ValTokens)}, {"panel_seqs", i(c.PanelSeqs)}, {"panel_positions", i(c.PanelPositions)},
		{"autocast", autocast}, {"block_rows", i(c.BlockRows)},
	}...)
	if dt, _ := c.ModelDType(); dt == device.Float64 {
		s = append(s, setting{"dtype", "float64"}) // float32 runs record none, as before
	}
	s = append(s, deviceSettings(t.dev)...)
	// The data: from the sums the loaders computed as they read every
	// shard in full (see datahash.go).
	if t.dataID[0] == "" {
		t.dataID[0] = sumsFingerprint(t.loader.Sums())
		t.dataID[1] = sumsFingerprint([]data.ShardSum{t.val.Sum()})
	}
	s = append(s, setting{"train_data", t.dataID[0]}, setting{"val_data", t.dataID[1]})
	return s, nil
}

// deviceSettings names what of the device changes the numbers: the kind
// (not the ordinal) and the backend's own settings (device.Describe: on
// the CPU the GEMM library and the thread count, which splits reductions;
// on CUDA the architecture and TF32).
func deviceSettings(dev device.Device) []setting {
	desc := device.Describe(dev)
	s := []setting{{"device", desc.Kind}}
	for _, x := range desc.Settings {
		s = append(s, setting{x.Name, x.Value})
	}
	return s
}
