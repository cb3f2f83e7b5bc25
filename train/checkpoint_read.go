package train

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/models"
	"github.com/hilbert-ml/hilbert/models/registry"
	"github.com/hilbert-ml/hilbert/optim"
	"github.com/hilbert-ml/hilbert/safetensors"
	"github.com/hilbert-ml/hilbert/tensor"
)

// A checkpoint's state.json is checksummed as its tensors are: its last
// member, "crc32c", is the CRC-32C (Castagnoli), as 8 hex digits, of the
// rest of the object in canonical form (decoded with its numbers as
// written and encoded again, as json.Marshal does: compact, keys sorted).
// So the layout may change but no value may; a file without the member
// (written before it existed) is read with a warning.
const stateChecksumKey = "crc32c"

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// stateSum is the CRC-32C of state's canonical form (without its checksum
// member), and whether state had that member and what it holds.
func stateSum(state []byte) (sum uint32, recorded json.RawMessage, err error) {
	d := json.NewDecoder(bytes.NewReader(state))
	d.UseNumber()
	var members map[string]any
	if err := d.Decode(&members); err != nil {
		return 0, nil, err
	}
	if v, ok := members[stateChecksumKey]; ok {
		recorded, _ = json.Marshal(v)
		delete(members, stateChecksumKey)
	}
	canonical, err := json.Marshal(members)
	if err != nil {
		return 0, nil, err
	}
	return crc32.Checksum(canonical, castagnoli), recorded, nil
}

// sealState appends the checksum member to state, a JSON object.
func sealState(state []byte) []byte {
	sum, _, err := stateSum(state)
	if err != nil {
		panic("train: checkpoint: state is not a JSON object: " + err.Error()) // marshalled by this package
	}
	body := bytes.TrimRight(state, " \t\r\n")
	body = bytes.TrimSuffix(body, []byte("}"))
	body = bytes.TrimRight(body, " \t\r\n")
	sep := ","
	if bytes.HasSuffix(body, []byte("{")) {
		sep = ""
	}
	return fmt.Appendf(body[:len(body):len(body)], "%s\n  %q: \"%08x\"\n}\n", sep, stateChecksumKey, sum)
}

// verifyState checks the checksum of a state.json read from path. A file
// without one is accepted, with a warning saying so.
func verifyState(path string, raw []byte) (warning string, err error) {
	sum, recorded, err := stateSum(raw)
	if err != nil {
		return "", fmt.Errorf("train: resume: %s is corrupt: %w", path, err)
	}
	if recorded == nil {
		return fmt.Sprintf("%s has no %q checksum (a checkpoint written before state files were checksummed): its values are used unchecked", path, stateChecksumKey), nil
	}
	if got := fmt.Sprintf("\"%08x\"", sum); got != string(recorded) {
		return "", fmt.Errorf("train: resume: %s is damaged or was edited: its CRC-32C is %08x, the file records %s; resume an earlier checkpoint or start over", path, sum, recorded)
	}
	return "", nil
}

// openTensors opens a checkpoint's safetensors file, which must record
// the checksums of its tensors (this package's writer always does).
func openTensors(path string) (*safetensors.File, error) {
	f, err := safetensors.Open(path)
	if err != nil {
		return nil, fmt.Errorf("train: %w", err)
	}
	if !f.Checksummed() {
		f.Close()
		return nil, fmt.Errorf("train: %s has no %q metadata, which every checkpoint file records: it was not written by a checkpoint, or was rewritten; resume an earlier checkpoint or start over", path, safetensors.ChecksumKey)
	}
	return f, nil
}

// Checkpoint is the latest checkpoint of a run, open for reading (by
// hilbert sample and eval, say) beside a run that may be writing newer
// ones: its model file is held open, so that the run's removal of an old
// folder cannot take it away while the weights are read.
type Checkpoint struct {
	// Dir is the checkpoint's folder (ROOT/step-NNNNNNN).
	Dir string
	// Step is the update the checkpoint was written after.
	Step int
	// State is its state.json, checksum verified.
	State []byte
	// Warnings say what was accepted with a doubt (a state.json from
	// before the checksums).
	Warnings []string

	model *safetensors.File
}

// checkpointRetries bounds how often OpenCheckpoint re-reads latest.json
// when the checkpoint it named was removed before it could be opened.
const checkpointRetries = 5

// OpenCheckpoint opens the checkpoint that root/latest.json names (root is
// a run's checkpoints folder). A running run replaces its checkpoint while
// it trains: when the folder latest.json named is gone before its files
// are open, latest.json is read again (a few times, a moment apart), so
// the newer checkpoint is opened instead. Where root holds no checkpoint
// the error wraps ErrNoCheckpoint. The caller must Close it.
func OpenCheckpoint(root string) (*Checkpoint, error) {
	var err error
	for attempt := range checkpointRetries {
		var c *Checkpoint
		if c, err = openCheckpoint(root); err == nil {
			return c, nil
		}
		if !errors.Is(err, fs.ErrNotExist) || errors.Is(err, ErrNoCheckpoint) {
			return nil, err
		}
		checkpointRetryWait(attempt)
	}
	return nil, fmt.Errorf("%w (the run replaced its checkpoint %d times while it was being opened)", err, checkpointRetries)
}

// checkpointRetryWait waits before OpenCheckpoint's next attempt (a
// variable for the tests, which replace the run in that moment).
var checkpointRetryWait = func(attempt int) { time.Sleep(time.Duration(attempt+1) * 20 * time.Millisecond) }

func openCheckpoint(root string) (*Checkpoint, error) {
	dir, step, state, warning, err := readLatest(root)
	if err != nil {
		return nil, err
	}
	model, err := openTensors(filepath.Join(dir, "model.safetensors"))
	if err != nil {
		return nil, err
	}
	c := &Checkpoint{Dir: dir, Step: step, State: state, model: model}
	if warning != "" {
		c.Warnings = append(c.Warnings, warning)
	}
	return c, nil
}

// LoadWeights reads the checkpoint's model file into params, with the
// checks of a resume: every parameter present by name with its shape, no
// other tensor, every checksum, and every value finite. Nothing is
// changed unless all pass.
func (c *Checkpoint) LoadWeights(params []*tensor.Tensor) error {
	values, err := readParametersFrom(c.model, params)
	if err != nil {
		return err
	}
	return setParameters(params, values)
}

// Config returns the model part of the run's configuration as the
// checkpoint records it: Family with Model (the paper's) or Arch (any
// other family's, decoded through the registry) and UntieHead. Its
// Sizes give the model's vocabulary and context.
func (c *Checkpoint) Config() (Config, error) {
	path := filepath.Join(c.Dir, "state.json")
	var st struct {
		Family   string            `json:"family"`
		Arch     json.RawMessage   `json:"arch"`
		Model    models.Config     `json:"model"`
		Settings map[string]string `json:"settings"`
	}
	if err := json.Unmarshal(c.State, &st); err != nil {
		return Config{}, fmt.Errorf("train: %s is corrupt: %w", path, err)
	}
	cfg := Config{Family: st.Family}
	if cfg.IsPaper() {
		cfg.Model = st.Model
	} else {
		fam, err := registry.Lookup(st.Family)
		if err != nil {
			return Config{}, fmt.Errorf("train: %s: %w (a program that registers it reads this run)", path, err)
		}
		if cfg.Arch, err = fam.DecodeConfig(st.Arch); err != nil {
			return Config{}, fmt.Errorf("train: %s: %w", path, err)
		}
		cfg.UntieHead = st.Settings["untie_head"] == "true"
	}
	if err := cfg.validateModel(); err != nil {
		return Config{}, fmt.Errorf("train: %s: model: %w", path, err)
	}
	return cfg, nil
}

// BuildModel builds the checkpoint's model on dev (its family and
// configuration from state.json, through the registry) and loads its
// weights with LoadWeights' checks.
func (c *Checkpoint) BuildModel(dev device.Device) (registry.Model, error) {
	cfg, err := c.Config()
	if err != nil {
		return nil, err
	}
	m, err := buildModel(dev, cfg)
	if err != nil {
		return nil, fmt.Errorf("train: checkpoint %s: %w", c.Dir, err)
	}
	if err := c.LoadWeights(m.Parameters()); err != nil {
		return nil, err
	}
	return m.model, nil
}

// Close closes the checkpoint's model file.
func (c *Checkpoint) Close() error { return c.model.Close() }

// checkpointFolders lists the step-NNNNNNN folders of root with their
// steps, by step (oldest first).
func checkpointFolders(root string) []stepFolder {
	entries, _ := os.ReadDir(root)
	var out []stepFolder
	for _, e := range entries {
		digits, ok := strings.CutPrefix(e.Name(), "step-")
		n, err := strconv.Atoi(digits)
		if ok && e.IsDir() && err == nil && n >= 0 {
			out = append(out, stepFolder{e.Name(), n})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].step < out[j].step })
	return out
}

// stepFolder is a checkpoint folder of a run and its step.
type stepFolder struct {
	name string
	step int
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

// readOptimState reads every state tensor the optimizer set expects, with
// the lengths and dtypes it expects (from its current state, whose host
// copies it reads into), and refuses non-finite values.
func readOptimState(path string, opt *optim.Set) (map[string]hostValues, error) {
	f, err := openTensors(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out, _ := optimState(opt)
	for _, name := range slices.Sorted(maps.Keys(out)) {
		if err := out[name].read(f, name, []int{out[name].len()}); err != nil {
			return nil, fmt.Errorf("train: resume: %s: %w", path, err)
		}
	}
	if n := len(f.Tensors()); n != len(out) {
		return nil, fmt.Errorf("train: resume: %s holds %d state tensors, the optimizer has %d (another recipe?)", path, n, len(out))
	}
	return out, nil
}
