package train

import (
	"cmp"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/hilbert-ml/hilbert/optim"
)

// Resuming a run from its latest checkpoint (checkpoint.go has the
// format, checkpoint_read.go the readers): the settings that change the
// numbers must match, and the restored state is named by a digest.

// HasCheckpoint reports whether the run's folder holds a checkpoint: a
// latest.json, or a checkpoint folder without one (which Resume explains),
// so that a fresh start does not delete it unasked.
func HasCheckpoint(cfg Config) bool {
	cfg.Name = cmp.Or(cfg.Name, "run")
	cfg.RunsDir = cmp.Or(cfg.RunsDir, "runs")
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
	cfg.Name = cmp.Or(cfg.Name, "run")
	cfg.RunsDir = cmp.Or(cfg.RunsDir, "runs")
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
