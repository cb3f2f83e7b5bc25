package train

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/hilbert-ml/hilbert/data/fineweb"
	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/models"
	"github.com/hilbert-ml/hilbert/nn"
	"github.com/hilbert-ml/hilbert/optim"
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
	// (a fineweb.Cursor), or a train.Loop Source's cursor that is JSON;
	// RawCursor a Source's cursor that is not.
	CursorJSON json.RawMessage `json:"cursor,omitempty"`
	RawCursor  []byte          `json:"raw_cursor,omitempty"`
	// Cursor is CursorJSON decoded as a run's loader position (by
	// decodeState).
	Cursor   fineweb.Cursor   `json:"-"`
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
	names := sortedNames(optState)
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
	if keep == 0 {
		keep = DefaultKeepCheckpoints
	}
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

// readLatest reads root/latest.json and returns the checkpoint folder it
// names, its step, and its state.json, checksum verified (warning says
// when it has none). A missing latest.json is ErrNoCheckpoint where root
// holds no checkpoint folder, and an error saying how to restore it where
// it does.
func readLatest(root string) (dir string, step int, state []byte, warning string, err error) {
	ptrPath := filepath.Join(root, "latest.json")
	raw, err := os.ReadFile(ptrPath)
	if errors.Is(err, fs.ErrNotExist) {
		if folders := checkpointFolders(root); len(folders) > 0 {
			last := folders[len(folders)-1]
			return "", 0, nil, "", fmt.Errorf("train: resume: %s is missing, but %s holds %d checkpoint folder(s), the newest %s: to resume it, write {\"dir\": %q, \"step\": %d} to %s (after checking that %s holds model.safetensors, optim.safetensors and state.json); to start over instead, pass -overwrite, which deletes them",
				ptrPath, root, len(folders), last.name, last.name, last.step, ptrPath, last.name)
		}
		return "", 0, nil, "", fmt.Errorf("%w in %s", ErrNoCheckpoint, root)
	}
	if err != nil {
		return "", 0, nil, "", fmt.Errorf("train: resume: %w", err)
	}
	ptr, err := decodeLatest(ptrPath, raw)
	if err != nil {
		return "", 0, nil, "", err
	}
	dir = filepath.Join(root, ptr.Dir)
	statePath := filepath.Join(dir, "state.json")
	if state, err = os.ReadFile(statePath); err != nil {
		return "", 0, nil, "", fmt.Errorf("train: resume: %w", err)
	}
	if warning, err = verifyState(statePath, state); err != nil {
		return "", 0, nil, "", err
	}
	return dir, ptr.Step, state, warning, nil
}

// decodeLatest decodes latest.json (read from path): it must name a
// checkpoint folder of root by its plain name, at a step >= 0.
func decodeLatest(path string, raw []byte) (latestPointer, error) {
	var ptr latestPointer
	err := json.Unmarshal(raw, &ptr)
	switch {
	case err != nil:
	case ptr.Dir == "" || ptr.Dir == "." || ptr.Dir == ".." || strings.ContainsAny(ptr.Dir, `/\`):
		err = fmt.Errorf("dir %q points outside the run's checkpoints folder: want the plain name of a folder in it (step-NNNNNNN)", ptr.Dir)
	case ptr.Step < 0:
		err = fmt.Errorf("step %d: want >= 0", ptr.Step)
	}
	if err != nil {
		return latestPointer{}, fmt.Errorf("train: resume: %s is corrupt (%v)", path, err)
	}
	return ptr, nil
}

// decodeState decodes a checkpoint's state.json (read from path) for
// latest.json's step and checks what a resume relies on: a version this
// build reads, the step, counts that cannot be negative, and the data
// cursor's fields.
func decodeState(path string, raw []byte, step int) (checkpointState, error) {
	var st checkpointState
	if err := json.Unmarshal(raw, &st); err != nil {
		return st, fmt.Errorf("train: resume: %s is corrupt: %w", path, err)
	}
	if st.Version < 1 || st.Version > checkpointVersion {
		return st, fmt.Errorf("train: resume: %s: version %d, this build reads 1 to %d", path, st.Version, checkpointVersion)
	}
	if st.Step != step {
		return st, fmt.Errorf("train: resume: latest.json says step %d but %s says %d", step, path, st.Step)
	}
	if st.Version >= 2 && st.Settings == nil {
		return st, fmt.Errorf("train: resume: %s holds no run settings: a checkpoint of train.Loop (Loop.Save) or a damaged one; a run resumes only its own checkpoints (Loop.Load reads this one)", path)
	}
	if len(st.CursorJSON) == 0 {
		return st, fmt.Errorf("train: resume: %s is corrupt: no data cursor", path)
	}
	if err := json.Unmarshal(st.CursorJSON, &st.Cursor); err != nil {
		return st, fmt.Errorf("train: resume: %s is corrupt: cursor: %w", path, err)
	}
	bad := ""
	switch c := st.Cursor; {
	case st.Tokens < 0:
		bad = fmt.Sprintf("tokens %d", st.Tokens)
	case !(st.ElapsedS >= 0):
		bad = fmt.Sprintf("elapsed_s %v", st.ElapsedS)
	case c.Epoch < 0 || c.Shard < 0 || c.Batch < 0 || c.Micro < 0:
		bad = fmt.Sprintf("cursor %+v", c)
	}
	for name, v := range st.Counters {
		if bad == "" && v < 0 {
			bad = fmt.Sprintf("counter %s = %d", name, v)
		}
	}
	if bad != "" {
		return st, fmt.Errorf("train: resume: %s is corrupt: %s: want >= 0", path, bad)
	}
	return st, nil
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
		t.dataID[1] = sumsFingerprint([]fineweb.ShardSum{t.val.Sum()})
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

// HasCheckpoint reports whether the run's folder holds a checkpoint: a
// latest.json, or a checkpoint folder without one (which Resume explains),
// so that a fresh start does not delete it unasked.
func HasCheckpoint(cfg Config) bool {
	if cfg.Name == "" {
		cfg.Name = "run"
	}
	if cfg.RunsDir == "" {
		cfg.RunsDir = "runs"
	}
	root := filepath.Join(cfg.RunsDir, cfg.Name, "checkpoints")
	_, err := os.Stat(filepath.Join(root, "latest.json"))
	return err == nil || len(checkpointFolders(root)) > 0
}

// Resume restores the latest checkpoint of the run: model, optimizer
// state, step, data cursor and the metrics logged up to it. A missing,
// corrupt or mismatched checkpoint is an error that names the file or the
// settings; nothing is changed unless every check passes.
//
// Every setting that changes the numbers (see the settings list in
// state.json: model shape, seeds, learning rates, clip, batch, schedule,
// validation length, autocast, device, and the fingerprints of the
// training and validation data) must equal the checkpoint's; the error
// lists each that differs with both values. Steps may change: the run then
// stops at the new count. The learning-rate schedule is part of the run:
// when ScheduleSteps and Warmup were left at their defaults, they are the
// checkpoint's (so a run extended past its horizon continues at the final
// 0.1 of the peak rate, exactly as a run started with ScheduleSteps set to
// the original Steps would).
//
// Parameters and optimizer moments that are not finite are refused with
// the tensor's name.
func (t *Trainer) Resume() error {
	dir, step, raw, warning, err := readLatest(t.checkpointRoot())
	if err != nil {
		return err
	}
	statePath := filepath.Join(dir, "state.json")
	st, err := decodeState(statePath, raw, step)
	if err != nil {
		return err
	}
	cfg, sched, err := t.checkCompatible(st, statePath)
	if err != nil {
		return err
	}
	// Optimizer state and parameters first into host memory, so nothing
	// is written to the model unless both files check.
	optimPath := filepath.Join(dir, "optim.safetensors")
	tensors, err := readOptimState(optimPath, t.opt)
	if err != nil {
		return err
	}
	params := t.model.Parameters()
	values, err := readParameters(filepath.Join(dir, "model.safetensors"), params)
	if err != nil {
		return err
	}
	metricsPath := filepath.Join(t.Dir(), "metrics.jsonl")
	hist, torn, err := readMetrics(metricsPath, st.Step)
	if err != nil {
		return err
	}
	missing := missingRecords(metricsPath, hist, st.Step, st.MetricsRecords, cfg.LogEvery)
	if err := loadOptimState(t.opt, tensors, st.Counters); err != nil {
		return fmt.Errorf("train: resume: %s: %w", optimPath, err)
	}
	if err := t.loader.Restore(st.Cursor); err != nil {
		return fmt.Errorf("train: resume: data cursor: %w", err)
	}
	if err := setParameters(params, values); err != nil {
		return err
	}
	t.cfg, t.sched = cfg, sched
	t.step, t.tokens = st.Step, st.Tokens
	t.loop.step = st.Step
	t.elapsed = time.Duration(st.ElapsedS * float64(time.Second))
	t.history = hist
	t.resumed = true
	t.resumeAt = resumeDigest(st.Step, raw, values)
	for _, w := range []string{warning, torn, missing} {
		if w != "" {
			t.warnings = append(t.warnings, w)
		}
	}
	return nil
}

// checkCompatible compares every setting a resumed run must share with the
// checkpoint and lists all that differ. It returns the run's config with
// the checkpoint's schedule adopted where the run left it at its default,
// and that schedule.
func (t *Trainer) checkCompatible(st checkpointState, path string) (Config, optim.Cosine, error) {
	c := t.cfg
	// The schedule: the checkpoint's unless the run asked for another.
	ckSched, ckWarmup := st.Steps, st.Warmup // version 1: the horizon was Steps
	if v, ok := st.Settings["schedule_steps"]; ok {
		ckSched, _ = strconv.Atoi(v)
	}
	if v, ok := st.Settings["warmup"]; ok {
		ckWarmup, _ = strconv.Atoi(v)
	}
	if t.raw.ScheduleSteps == 0 && ckSched > 0 {
		c.ScheduleSteps = ckSched
	}
	if t.raw.Warmup == 0 {
		c.Warmup = ckWarmup
		if ckWarmup == 0 {
			c.Warmup = NoWarmup
		}
	}
	saved := t.cfg
	t.cfg = c
	have, err := t.settings()
	t.cfg = saved
	if err != nil {
		return c, optim.Cosine{}, fmt.Errorf("train: resume: %w", err)
	}
	want := st.Settings
	if st.Version == 1 {
		want = v1Settings(st)
	}
	var diffs []string
	for _, s := range have {
		ck, ok := want[s.name]
		if ok && strings.HasPrefix(ck, legacyPrefix) && (s.name == "train_data" || s.name == "val_data") {
			// A checkpoint from before the CRC-32C fingerprints.
			paths := c.TrainShards
			if s.name == "val_data" {
				paths = []string{c.ValShard}
			}
			if s.value, err = legacyFingerprint(paths); err != nil {
				return c, optim.Cosine{}, fmt.Errorf("train: resume: %w", err)
			}
		}
		if ok && ck != s.value {
			diffs = append(diffs, fmt.Sprintf("%s: checkpoint %s, this run %s", s.name, ck, s.value))
		}
	}
	if len(diffs) > 0 {
		return c, optim.Cosine{}, fmt.Errorf("train: resume: %s: this run's settings differ from the checkpoint's in %d (they change the numbers, so the result would not be a continuation; use the checkpoint's values, or start over with -overwrite or another -name):\n  %s",
			path, len(diffs), strings.Join(diffs, "\n  "))
	}
	if st.Step > c.Steps {
		return c, optim.Cosine{}, fmt.Errorf("train: resume: %s: the checkpoint is at update %d, past steps = %d", path, st.Step, c.Steps)
	}
	if err := c.Validate(); err != nil {
		return c, optim.Cosine{}, fmt.Errorf("train: resume: with the checkpoint's schedule: %w", err)
	}
	sched, err := optim.NewCosine(c.ScheduleSteps, c.WarmupSteps())
	if err != nil {
		return c, sched, fmt.Errorf("train: resume: schedule: %w", err)
	}
	return c, sched, nil
}

// v1Settings is what a version-1 checkpoint recorded, in settings' terms.
func v1Settings(st checkpointState) map[string]string {
	m, i := st.Model, strconv.Itoa
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	return map[string]string{
		"layers": i(m.Layers), "dim": i(m.Dim), "head_dim": i(m.HeadDim), "mlp_hidden": i(m.MLPHidden),
		"vocab": i(m.Vocab), "context": i(m.Context), "rope_base": f(m.RoPEBase), "init_std": f(m.InitStd),
		"head": st.Head, "projected": strconv.FormatBool(st.Projected),
		"seq_len": i(st.SeqLen), "micro_batch": i(st.Micro), "batch_seqs": i(st.BatchSeqs),
		"schedule_steps": i(st.Steps), "warmup": i(st.Warmup),
		"seed": strconv.FormatUint(st.Seed, 10), "data_seed": strconv.FormatUint(st.DataSeed, 10),
	}
}

// readParameters reads every parameter from a model file into host memory
// (checking names, shapes, dtypes, checksums and that every value is
// finite) without touching the parameters.
func readParameters(path string, params []*tensor.Tensor) ([]hostValues, error) {
	f, err := openTensors(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readParametersFrom(f, params)
}

// readParametersFrom is readParameters from an open model file.
func readParametersFrom(f *safetensors.File, params []*tensor.Tensor) ([]hostValues, error) {
	path := f.Path()
	out := make([]hostValues, len(params))
	for i, p := range params {
		out[i] = newValues(p)
		if err := out[i].read(f, p.Name, p.Shape()); err != nil {
			return nil, fmt.Errorf("train: %s: %w", path, err)
		}
	}
	if n := len(f.Tensors()); n != len(params) {
		return nil, fmt.Errorf("train: %s holds %d tensors, the model has %d parameters (another model?)", path, n, len(params))
	}
	return out, nil
}

// setParameters writes values read by readParameters into params.
func setParameters(params []*tensor.Tensor, values []hostValues) error {
	for i, p := range params {
		if err := values[i].set(p); err != nil {
			return fmt.Errorf("train: parameter %s: %w", p.Name, err)
		}
	}
	return nil
}

// resumeDigest names a restored checkpoint by its update and a CRC-32C of
// its state.json and the weights read from it, for the ranks to compare.
func resumeDigest(step int, state []byte, values []hostValues) string {
	h := crc32.New(crc32.MakeTable(crc32.Castagnoli))
	h.Write(state)
	var buf []byte
	for _, v := range values {
		buf = v.appendBits(buf[:0])
		h.Write(buf)
	}
	return fmt.Sprintf("the checkpoint of update %d (digest %08x)", step, h.Sum32())
}

// readOptimState reads every state tensor the optimizer set expects, with
// the lengths and dtypes it expects (from its current state), and refuses
// non-finite values.
func readOptimState(path string, opt *optim.Set) (map[string]hostValues, error) {
	f, err := openTensors(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	want, _ := optimState(opt)
	out := make(map[string]hostValues, len(want))
	for _, name := range sortedNames(want) {
		v := want[name]
		if v.wide() {
			v = hostValues{f64: make([]float64, v.len())}
		} else {
			v = hostValues{f32: make([]float32, v.len())}
		}
		if err := v.read(f, name, []int{v.len()}); err != nil {
			return nil, fmt.Errorf("train: resume: %s: %w", path, err)
		}
		out[name] = v
	}
	if n := len(f.Tensors()); n != len(want) {
		return nil, fmt.Errorf("train: resume: %s holds %d state tensors, the optimizer has %d (another recipe?)", path, n, len(want))
	}
	return out, nil
}

// ErrNoCheckpoint is wrapped by the error of resuming where no checkpoint
// was written.
var ErrNoCheckpoint = errors.New("train: resume: no checkpoint")

// DataMatchesCheckpoint reports whether trainShards and valShard hold the
// data that the latest checkpoint of cfg's run trained on: whether their
// fingerprints equal the train_data and val_data that its state.json
// records (the comparison Resume makes). A caller can check data it has
// just made (text tokenized into a temporary folder, say) before it
// replaces the run's own. A checkpoint that records no fingerprints
// (version 1) matches any data. Where the run has no checkpoint, the error
// wraps ErrNoCheckpoint.
func DataMatchesCheckpoint(cfg Config, trainShards []string, valShard string) (bool, error) {
	if cfg.Name == "" {
		cfg.Name = "run"
	}
	if cfg.RunsDir == "" {
		cfg.RunsDir = "runs"
	}
	dir, step, raw, _, err := readLatest(filepath.Join(cfg.RunsDir, cfg.Name, "checkpoints"))
	if err != nil {
		return false, err
	}
	st, err := decodeState(filepath.Join(dir, "state.json"), raw, step)
	if err != nil {
		return false, err
	}
	for _, d := range []struct {
		key   string
		paths []string
	}{{"train_data", trainShards}, {"val_data", []string{valShard}}} {
		want, ok := st.Settings[d.key]
		if !ok {
			continue
		}
		have, err := fingerprintLike(want, d.paths)
		if err != nil {
			return false, err
		}
		if have != want {
			return false, nil
		}
	}
	return true, nil
}
