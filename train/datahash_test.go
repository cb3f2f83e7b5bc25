package train

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/hilbert-ml/hilbert/data"
)

// writeRamp writes a shard of n tokens (a ramp mod 50,000) in chunks.
func writeRamp(t *testing.T, path string, n int) {
	t.Helper()
	w, err := data.CreateShard(path, false)
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]int32, 1<<20)
	for done := 0; done < n; {
		k := min(len(chunk), n-done)
		for i := range k {
			chunk[i] = int32((done + i) % 50_000)
		}
		if err := w.Write(chunk[:k]); err != nil {
			t.Fatal(err)
		}
		done += k
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// The data fingerprint covers every token: a one-token change anywhere
// in a shard changes it, in a small shard and in one over 64 MiB at a
// place the legacy fingerprint's samples skip (which misses it); a copy
// elsewhere keeps it.
func TestDataFingerprintCoversEveryToken(t *testing.T) {
	const header = 1024
	for _, c := range []struct {
		name   string
		tokens int
		at     int64 // byte offset of the changed token
		legacy bool  // whether the legacy fingerprint sees the change
	}{
		{"small", 10_000, header + 2*5_000, true},
		// 34M tokens = 68 MB: sampled by the legacy rule; the byte after
		// the first 64 KiB window is in no sample.
		{"over 64 MiB", 34 << 20, header + 100<<10, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			p := filepath.Join(dir, "a_train.bin")
			writeRamp(t, p, c.tokens)
			before, err := fingerprint([]string{p})
			if err != nil {
				t.Fatal(err)
			}
			legacyBefore, _ := legacyFingerprint([]string{p})
			moved := filepath.Join(t.TempDir(), "b.bin")
			if err := os.Rename(p, moved); err != nil {
				t.Fatal(err)
			}
			if got, _ := fingerprint([]string{moved}); got != before {
				t.Errorf("the moved shard's fingerprint is %s, was %s", got, before)
			}
			f, err := os.OpenFile(moved, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			var b [2]byte
			f.ReadAt(b[:], c.at)
			b[0] ^= 1
			f.WriteAt(b[:], c.at)
			f.Close()
			after, err := fingerprint([]string{moved})
			if err != nil {
				t.Fatal(err)
			}
			if after == before {
				t.Errorf("a changed token at byte %d left the fingerprint %s", c.at, after)
			}
			if !strings.HasPrefix(before, "crc32c:") || !strings.HasSuffix(before, " (1 shard, "+strconv.Itoa(c.tokens)+" tokens)") {
				t.Errorf("fingerprint %q", before)
			}
			if legacyAfter, _ := legacyFingerprint([]string{moved}); (legacyAfter != legacyBefore) != c.legacy {
				t.Errorf("legacy fingerprint saw the change: %v, want %v", legacyAfter != legacyBefore, c.legacy)
			}
		})
	}
}

// A checkpoint holding legacy "sha256:" fingerprints (written before the
// CRC-32C ones) resumes on its data and refuses other data; its next
// checkpoint records the new fingerprints.
func TestLegacyFingerprintCheckpointResumes(t *testing.T) {
	shards, val := writeTinyShards(t, t.TempDir())
	cfg := tinyConfig(t, t.TempDir(), shards, val)
	cfg.Steps = 4
	if _, err := runToEnd(t, cfg, false, 0); err != nil {
		t.Fatal(err)
	}
	otherShards, _ := writeOtherShards(t, t.TempDir())
	path := filepath.Join(cfg.RunsDir, cfg.Name, "checkpoints", "step-0000004", "state.json")
	orig, _ := os.ReadFile(path)
	setLegacy := func(trainPaths []string) {
		var st map[string]any
		if err := json.Unmarshal(orig, &st); err != nil {
			t.Fatal(err)
		}
		s := st["settings"].(map[string]any)
		if !strings.HasPrefix(s["train_data"].(string), "crc32c:") {
			t.Fatalf("train_data %v", s["train_data"])
		}
		s["train_data"], _ = legacyFingerprint(trainPaths)
		s["val_data"], _ = legacyFingerprint([]string{val})
		delete(st, stateChecksumKey) // as old as the legacy fingerprints
		b, _ := json.Marshal(st)
		os.WriteFile(path, b, 0o644)
	}
	setLegacy(otherShards)
	if err := resumeError(t, cfg); err == nil || !strings.Contains(err.Error(), "train_data: checkpoint sha256:") ||
		strings.Contains(err.Error(), "val_data") {
		t.Errorf("legacy fingerprint of other data: %v", err)
	}
	if ok, err := DataMatchesCheckpoint(cfg, shards, val); ok || err != nil {
		t.Errorf("DataMatchesCheckpoint on other legacy data: %v, %v", ok, err)
	}
	setLegacy(shards)
	if ok, err := DataMatchesCheckpoint(cfg, shards, val); !ok || err != nil {
		t.Errorf("DataMatchesCheckpoint on the legacy data: %v, %v", ok, err)
	}
	c := cfg
	c.Steps = 5
	if _, err := runToEnd(t, c, true, 0); err != nil {
		t.Fatalf("legacy fingerprints on the same data: %v", err)
	}
	var st checkpointState
	b, _ := os.ReadFile(filepath.Join(cfg.RunsDir, cfg.Name, "checkpoints", "step-0000005", "state.json"))
	if err := json.Unmarshal(b, &st); err != nil || !strings.HasPrefix(st.Settings["train_data"], "crc32c:") {
		t.Errorf("the next checkpoint's train_data: %q (%v)", st.Settings["train_data"], err)
	}
}
