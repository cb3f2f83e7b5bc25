package train

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/models"
	"github.com/hilbert-ml/hilbert/safetensors"
)

// editState rewrites a checkpoint's state.json through edit of its
// members, keeping whatever checksum member it has unless edit drops it.
func editState(t *testing.T, path string, edit func(m map[string]any)) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	out, _ := json.MarshalIndent(m, "", "  ") // other whitespace, keys in another order
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

// A state.json carries a CRC-32C: a value changed by hand (optimizer
// counters, the cursor, a deleted settings map) is refused; only its
// whitespace may change; a state file without a checksum (an old
// checkpoint) resumes with a warning saying so.
func TestStateChecksum(t *testing.T) {
	shards, val := writeTinyShards(t, t.TempDir())
	cfg := tinyConfig(t, t.TempDir(), shards, val)
	cfg.Steps = 4
	path := filepath.Join(cfg.RunsDir, cfg.Name, "checkpoints", "step-0000004", "state.json")
	cases := []struct {
		name    string
		edit    func(m map[string]any)
		want    string // in the error; "" resumes
		warning string // in a warning of the resumed run
	}{
		{"as written", func(m map[string]any) {}, "", ""},
		{"reformatted", nil, "", ""},
		{"counter zeroed", func(m map[string]any) {
			c := m["counters"].(map[string]any)
			for k := range c {
				c[k] = 0
			}
		}, "damaged or was edited", ""},
		{"cursor epoch 2^62", func(m map[string]any) { m["cursor"].(map[string]any)["epoch"] = json.Number("4611686018427387904") }, "damaged or was edited", ""},
		{"settings deleted", func(m map[string]any) { delete(m, "settings") }, "damaged or was edited", ""},
		{"settings and checksum deleted", func(m map[string]any) { delete(m, "settings"); delete(m, stateChecksumKey) }, "holds no run settings", ""},
		{"a member added", func(m map[string]any) { m["zz"] = 1 }, "damaged or was edited", ""},
		{"no checksum (an old checkpoint)", func(m map[string]any) { delete(m, stateChecksumKey) }, "", `has no "crc32c" checksum`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			os.RemoveAll(filepath.Join(cfg.RunsDir, cfg.Name))
			if _, err := runToEnd(t, cfg, false, 0); err != nil {
				t.Fatal(err)
			}
			if c.edit != nil {
				editState(t, path, c.edit)
			} else {
				b, _ := os.ReadFile(path)
				var out bytes.Buffer
				json.Indent(&out, b, "\t", "\t\t")
				os.WriteFile(path, out.Bytes(), 0o644)
			}
			tr, err := New(cpu.New(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			err = tr.Resume()
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("resume: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), path)):
				t.Fatalf("resume said %v, want an error naming %s and saying %q", err, path, c.want)
			}
			warnings := strings.Join(tr.Warnings(), "\n")
			if c.want == "" && (c.warning == "") != (warnings == "") || !strings.Contains(warnings, c.warning) {
				t.Errorf("warnings %q, want %q", warnings, c.warning)
			}
		})
	}
}

// stripChecksums rewrites a safetensors file without its ChecksumKey
// metadata (as a file written elsewhere would be).
func stripChecksums(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := binary.LittleEndian.Uint64(b)
	var header map[string]json.RawMessage
	if err := json.Unmarshal(b[8:8+n], &header); err != nil {
		t.Fatal(err)
	}
	var meta map[string]string
	json.Unmarshal(header["__metadata__"], &meta)
	if _, ok := meta[safetensors.ChecksumKey]; !ok {
		t.Fatalf("%s has no %s to strip", path, safetensors.ChecksumKey)
	}
	delete(meta, safetensors.ChecksumKey)
	header["__metadata__"], _ = json.Marshal(meta)
	h, _ := json.Marshal(header)
	for len(h)%8 != 0 {
		h = append(h, ' ')
	}
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(h)))
	out = append(append(out, h...), b[8+n:]...)
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

// A checkpoint's tensor files always record their checksums; one without
// them is refused, not read unchecked.
func TestCheckpointTensorsWithoutChecksums(t *testing.T) {
	shards, val := writeTinyShards(t, t.TempDir())
	cfg := tinyConfig(t, t.TempDir(), shards, val)
	cfg.Steps = 4
	ckpt := filepath.Join(cfg.RunsDir, cfg.Name, "checkpoints", "step-0000004")
	for _, file := range []string{"model.safetensors", "optim.safetensors"} {
		os.RemoveAll(filepath.Join(cfg.RunsDir, cfg.Name))
		if _, err := runToEnd(t, cfg, false, 0); err != nil {
			t.Fatal(err)
		}
		if err := resumeError(t, cfg); err != nil {
			t.Fatalf("as written: %v", err)
		}
		stripChecksums(t, filepath.Join(ckpt, file))
		err := resumeError(t, cfg)
		if err == nil || !strings.Contains(err.Error(), file) || !strings.Contains(err.Error(), safetensors.ChecksumKey) {
			t.Errorf("%s without checksums: resume said %v", file, err)
		}
	}
}

// OpenCheckpoint reads latest.json again when the folder it named is
// removed before it is open (a running run replacing its checkpoint), and
// LoadWeights refuses non-finite weights as Resume does.
func TestOpenCheckpoint(t *testing.T) {
	shards, val := writeTinyShards(t, t.TempDir())
	cfg := tinyConfig(t, t.TempDir(), shards, val)
	cfg.Steps = 4
	if _, err := runToEnd(t, cfg, false, 0); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(cfg.RunsDir, cfg.Name, "checkpoints")
	latest := filepath.Join(root, "latest.json")
	good, _ := os.ReadFile(latest)
	model, err := models.New(cpu.New(), cfg.Model, 7)
	if err != nil {
		t.Fatal(err)
	}

	// A folder already removed: the run's newer checkpoint appears while
	// the reader waits.
	os.WriteFile(latest, []byte(`{"dir": "step-0000002", "step": 2}`), 0o644)
	saved := checkpointRetryWait
	defer func() { checkpointRetryWait = saved }()
	waits := 0
	checkpointRetryWait = func(int) { waits++; os.WriteFile(latest, good, 0o644) }
	ck, err := OpenCheckpoint(root)
	if err != nil {
		t.Fatalf("OpenCheckpoint: %v", err)
	}
	if ck.Step != 4 || waits != 1 {
		t.Errorf("opened update %d after %d waits, want 4 after 1", ck.Step, waits)
	}
	if err := ck.LoadWeights(model.Parameters()); err != nil {
		t.Fatal(err)
	}
	ck.Close()

	// Removed every time: an error naming the folder, after a few tries.
	os.WriteFile(latest, []byte(`{"dir": "step-0000002", "step": 2}`), 0o644)
	checkpointRetryWait = func(int) {}
	if _, err := OpenCheckpoint(root); err == nil || !strings.Contains(err.Error(), "step-0000002") || !strings.Contains(err.Error(), "replaced its checkpoint") {
		t.Errorf("a checkpoint that stays missing: %v", err)
	}

	// Outside the run.
	os.WriteFile(latest, []byte(`{"dir": "../../..", "step": 4}`), 0o644)
	if _, err := OpenCheckpoint(root); err == nil || !strings.Contains(err.Error(), "outside the run's checkpoints folder") {
		t.Errorf("latest.json outside the run: %v", err)
	}
	os.WriteFile(latest, good, 0o644)

	// NaN weights: refused with the tensor's name, nothing changed.
	rewriteTensor(t, filepath.Join(root, "step-0000004", "model.safetensors"), "head.weight", func(v []float32) { v[5] = float32(math.NaN()) })
	before := model.Parameters()[0].Float32s()
	if ck, err = OpenCheckpoint(root); err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	err = ck.LoadWeights(model.Parameters())
	if err == nil || !strings.Contains(err.Error(), `tensor "head.weight" holds NaN`) {
		t.Errorf("NaN weights: %v", err)
	}
	if !reflect.DeepEqual(before, model.Parameters()[0].Float32s()) {
		t.Error("refused weights changed the model")
	}
}

// With latest.json lost but a checkpoint folder intact, the error says how
// to restore it, and suggests nothing that would delete it unannounced.
func TestMissingLatestWithCheckpointFolders(t *testing.T) {
	shards, val := writeTinyShards(t, t.TempDir())
	cfg := tinyConfig(t, t.TempDir(), shards, val)
	cfg.Steps = 4
	if _, err := runToEnd(t, cfg, false, 0); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(cfg.RunsDir, cfg.Name, "checkpoints")
	os.Remove(filepath.Join(root, "latest.json"))
	if !HasCheckpoint(cfg) {
		t.Error("HasCheckpoint: false with a checkpoint folder in place (a fresh start would delete it)")
	}
	err := resumeError(t, cfg)
	if err == nil || !strings.Contains(err.Error(), `write {"dir": "step-0000004", "step": 4}`) || strings.Contains(err.Error(), "without -resume") {
		t.Fatalf("resume without latest.json: %v", err)
	}
	os.WriteFile(filepath.Join(root, "latest.json"), []byte(`{"dir": "step-0000004", "step": 4}`), 0o644)
	if err := resumeError(t, cfg); err != nil {
		t.Errorf("after restoring latest.json as told: %v", err)
	}
}

// A run keeps its newest KeepCheckpoints checkpoints and prunes the other
// step folders once a newer one is in force, also ones a kill left (half
// removed, or past the checkpoint the run resumed) and temporary files.
func TestCheckpointRetention(t *testing.T) {
	shards, val := writeTinyShards(t, t.TempDir())
	for _, c := range []struct {
		keep int
		want []string
	}{
		{0, []string{"step-0000012", "step-0000014"}},
		{1, []string{"step-0000014"}},
		{3, []string{"step-0000008", "step-0000012", "step-0000014"}},
		{KeepAllCheckpoints, []string{"step-0000001", "step-0000004", "step-0000008", "step-0000012", "step-0000014", "step-0000099"}},
	} {
		cfg := tinyConfig(t, t.TempDir(), shards, val) // checkpoints at 4, 8, 12 and 14
		cfg.KeepCheckpoints = c.keep
		root := filepath.Join(cfg.RunsDir, cfg.Name, "checkpoints")
		// Left by a kill: a folder half removed, one of a later run, a
		// temporary latest.json.
		for _, d := range []string{"step-0000001", "step-0000099"} {
			os.MkdirAll(filepath.Join(root, d), 0o755)
		}
		os.WriteFile(filepath.Join(root, ".tmp-abc"), nil, 0o644)
		if _, err := runToEnd(t, cfg, false, 0); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, f := range checkpointFolders(root) {
			got = append(got, f.name)
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("keep %d: folders %v, want %v", c.keep, got, c.want)
		}
		if _, err := os.Stat(filepath.Join(root, ".tmp-abc")); c.keep >= 0 && err == nil {
			t.Errorf("keep %d: the temporary file is still there", c.keep)
		}
		if err := resumeError(t, cfg); err != nil {
			t.Errorf("keep %d: resume: %v", c.keep, err)
		}
	}
}

// A training or validation shard written over in place during a run stops
// it at the next checkpoint with an error naming the shard; the last
// checkpoint stays in force.
func TestShardChangedDuringRun(t *testing.T) {
	for _, which := range []string{"train", "val"} {
		shards, val := writeTinyShards(t, t.TempDir())
		cfg := tinyConfig(t, t.TempDir(), shards, val) // checkpoints at 4, 8, ...
		target := shards[0]
		if which == "val" {
			target = val
		}
		tr, err := New(cpu.New(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		hook := func(tr *Trainer, r Record) error {
			if r.Step == 6 {
				f, err := os.OpenFile(target, os.O_WRONLY, 0)
				if err != nil {
					t.Fatal(err)
				}
				f.WriteAt([]byte{1, 0, 2, 0}, 1024+2*100)
				f.Close()
				later := time.Now().Add(time.Hour)
				os.Chtimes(target, later, later)
			}
			return nil
		}
		err = tr.Run(context.Background(), hook)
		tr.Close()
		if err == nil || !strings.Contains(err.Error(), target) || !strings.Contains(err.Error(), "changed while in use") {
			t.Errorf("%s shard changed at update 6: %v", which, err)
		}
		latest, _ := os.ReadFile(filepath.Join(cfg.RunsDir, cfg.Name, "checkpoints", "latest.json"))
		if !strings.Contains(string(latest), "step-0000004") {
			t.Errorf("%s: latest.json %s, want the checkpoint of update 4", which, latest)
		}
	}
}
