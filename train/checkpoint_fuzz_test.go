package train

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hilbert-ml/hilbert/device/cpu"
)

// FuzzCheckpointState decodes arbitrary latest.json and state.json
// contents as Resume does, then runs what Resume runs on a state it
// accepts (the settings comparison, the schedule, the data cursor's
// Restore) on a tiny trainer: errors, never a panic, and an accepted state
// has no negative step, count or cursor field. The seeds are the files of
// a real checkpoint and a few damaged ones, so `go test` runs them as tests.
func FuzzCheckpointState(f *testing.F) {
	shards, val := writeTinyShards(f, f.TempDir())
	cfg := tinyConfig(f, f.TempDir(), shards, val)
	cfg.Steps, cfg.CheckpointEvery = 2, 2
	tr, err := New(cpu.New(), cfg)
	if err != nil {
		f.Fatal(err)
	}
	err = tr.Run(context.Background(), func(*Trainer, Record) error { return nil })
	tr.Close()
	if err != nil {
		f.Fatal(err)
	}
	root := filepath.Join(cfg.RunsDir, cfg.Name, "checkpoints")
	latest, err := os.ReadFile(filepath.Join(root, "latest.json"))
	if err != nil {
		f.Fatal(err)
	}
	state, err := os.ReadFile(filepath.Join(root, "step-0000002", "state.json"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(latest, state)
	f.Add(latest, state[:len(state)/2])
	f.Add([]byte(`{"dir":"../x","step":2}`), state)
	f.Add([]byte(`{"dir":"step-0000002","step":-1}`), []byte(`{"version":2,"step":-1}`))
	f.Add(latest, []byte(strings.Replace(string(state), `"micro": 0`, `"micro": 7`, 1)))
	f.Add(latest, []byte(strings.Replace(string(state), `"schedule_steps": "2"`, `"schedule_steps": "-3"`, 1)))
	f.Add(latest, []byte(`{"version":1,"step":2,"model":{"Dim":-4}}`))

	// The trainer the accepted states are checked against.
	tr, err = New(cpu.New(), cfg)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { tr.Close() })
	f.Fuzz(func(t *testing.T, latest, state []byte) {
		ptr, err := decodeLatest("fuzz/latest.json", latest)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "train: resume: fuzz/latest.json is corrupt") {
				t.Fatalf("latest.json: %v", err)
			}
			return
		}
		if ptr.Step < 0 || ptr.Dir == "" || filepath.Base(ptr.Dir) != ptr.Dir || ptr.Dir == ".." {
			t.Fatalf("accepted latest.json %+v", ptr)
		}
		st, err := decodeState("fuzz/state.json", state, ptr.Step)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "train: resume: ") || !strings.Contains(err.Error(), "fuzz/state.json") {
				t.Fatalf("state.json: %v", err)
			}
			return
		}
		c := st.Cursor
		if st.Step < 0 || st.Tokens < 0 || !(st.ElapsedS >= 0) || c.Epoch < 0 || c.Shard < 0 || c.Batch < 0 || c.Micro < 0 {
			t.Fatalf("accepted state %+v", st)
		}
		v1Settings(st)
		if _, _, err := tr.checkCompatible(st, "fuzz/state.json"); err != nil && !strings.HasPrefix(err.Error(), "train: resume: ") {
			t.Fatalf("checkCompatible: %v", err)
		}
		if err := tr.loader.Restore(st.Cursor); err != nil && !strings.Contains(err.Error(), "restore") {
			t.Fatalf("Restore: %v", err)
		}
	})
}
