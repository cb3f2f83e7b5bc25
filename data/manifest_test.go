package data

import (
	"context"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// buildSet writes a set of 3 training shards and one validation shard of
// 40 tokens each, and returns the build's summary.
func buildSet(t *testing.T, dir string) Summary {
	t.Helper()
	text := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 14) // 141 tokens with EndOfText
	sum, err := BuildFromText(context.Background(), BuildConfig{Dir: dir, ShardTokens: 40, Split: Split{ValTokens: 40}}, text)
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.TrainShards) != 3 || len(sum.ValShards) != 1 {
		t.Fatalf("built %d training and %d validation shards, expected 3 and 1", len(sum.TrainShards), len(sum.ValShards))
	}
	return sum
}

func loaderOn(paths []string) (*Loader, error) {
	return NewLoader(LoaderConfig{Shards: paths, SeqLen: 4, MicroBatch: 1, Prefetch: -1})
}

func TestManifestWrittenByBuild(t *testing.T) {
	dir := t.TempDir()
	sum := buildSet(t, dir)
	m, err := ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Shards) != 4 {
		t.Fatalf("manifest lists %d shards, expected 4: %+v", len(m.Shards), m.Shards)
	}
	for _, e := range m.Shards {
		// An independent checksum: CRC-32C of the file after its header.
		data, err := os.ReadFile(filepath.Join(dir, e.File))
		if err != nil {
			t.Fatal(err)
		}
		want := checksumString(crc32.Checksum(data[HeaderBytes:], crc32.MakeTable(crc32.Castagnoli)))
		split := "train"
		if strings.Contains(e.File, "_val_") {
			split = "val"
		}
		if e.Checksum != want || e.Tokens != int64(len(data)-HeaderBytes)/2 || e.Split != split {
			t.Errorf("%s: entry %+v, expected checksum %s, %d tokens, split %s", e.File, e, want, (len(data)-HeaderBytes)/2, split)
		}
	}
	l, err := loaderOn(sum.TrainShards)
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	v, err := Validation(sum.ValShards[0], 0, 4, 1)
	if err != nil {
		t.Fatal(err)
	}
	v.Close()
}

func TestManifestRefusals(t *testing.T) {
	tests := []struct {
		name string
		// damage changes the set in dir and returns the training list.
		damage func(t *testing.T, dir string, sum Summary) []string
		want   string
	}{
		{"missing shard", func(t *testing.T, dir string, sum Summary) []string {
			os.Remove(sum.TrainShards[1])
			g, _ := filepath.Glob(filepath.Join(dir, "fineweb_train_*.bin"))
			return g
		}, "lists 3 training shards, the set has 2 of them: missing fineweb_train_000001.bin"},
		{"subset", func(t *testing.T, dir string, sum Summary) []string {
			return sum.TrainShards[:2]
		}, "missing fineweb_train_000002.bin"},
		{"changed token", func(t *testing.T, dir string, sum Summary) []string {
			f, _ := os.OpenFile(sum.TrainShards[2], os.O_RDWR, 0)
			f.WriteAt([]byte{7, 0}, HeaderBytes+6)
			f.Close()
			return sum.TrainShards
		}, "fineweb_train_000002.bin does not match DIR/" + ManifestName + ": crc32c: expected"},
		{"unlisted shard", func(t *testing.T, dir string, sum Summary) []string {
			w, _ := CreateShard(filepath.Join(dir, "fineweb_train_000003.bin"), false)
			w.Write(make([]int32, 40))
			w.Close()
			return append(sum.TrainShards, filepath.Join(dir, "fineweb_train_000003.bin"))
		}, "fineweb_train_000003.bin is not listed in"},
		{"validation shard", func(t *testing.T, dir string, sum Summary) []string {
			return append(sum.TrainShards, sum.ValShards[0])
		}, `is listed as "val"`},
		{"no manifest", func(t *testing.T, dir string, sum Summary) []string {
			os.Remove(filepath.Join(dir, ManifestName))
			return sum.TrainShards
		}, "hilbert prepare -manifest " + "DIR"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			sum := buildSet(t, dir)
			paths := tc.damage(t, dir, sum)
			want := strings.ReplaceAll(tc.want, "DIR", dir)
			l, err := loaderOn(paths)
			if err == nil {
				l.Close()
				t.Fatal("NewLoader accepted the set")
			}
			if !strings.Contains(err.Error(), want) {
				t.Errorf("NewLoader: %v\nexpected it to contain %q", err, want)
			}
			if err := VerifyManifest(paths); err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("VerifyManifest: %v\nexpected it to contain %q", err, want)
			}
		})
	}
}

// A build that stops before Close (killed, or failed) leaves its shards
// without a manifest, and a loader refuses them.
func TestManifestAbsentAfterUnfinishedBuild(t *testing.T) {
	dir := t.TempDir()
	b, err := NewBuilder(BuildConfig{Dir: dir, ShardTokens: 40})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.AddText(strings.Repeat("The quick brown fox jumps over the lazy dog. ", 14)); err != nil {
		t.Fatal(err)
	}
	b.Abort()
	shards, _ := filepath.Glob(filepath.Join(dir, "fineweb_train_*.bin"))
	if len(shards) != 3 {
		t.Fatalf("%d finished shards, expected 3", len(shards))
	}
	if _, err := os.Stat(filepath.Join(dir, ManifestName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("manifest after an unfinished build: %v", err)
	}
	if l, err := loaderOn(shards); err == nil || !strings.Contains(err.Error(), "no "+ManifestName) {
		if l != nil {
			l.Close()
		}
		t.Errorf("NewLoader on an unfinished build: %v", err)
	}
	// Overwriting: the old shards leave the manifest before they go.
	sum := buildSet(t, t.TempDir())
	dir2 := filepath.Dir(sum.TrainShards[0])
	if _, err := BuildFromText(context.Background(), BuildConfig{Dir: dir2, Overwrite: true}, "short"); err != nil {
		t.Fatal(err)
	}
	if m, err := ReadManifest(dir2); err != nil || len(m.Shards) != 1 || m.Shards[0].File != "fineweb_train_000000.bin" {
		t.Errorf("manifest after overwriting: %+v, %v", m, err)
	}
}

// Shards from elsewhere (llm.c's) get a manifest from WriteManifest.
func TestWriteManifest(t *testing.T) {
	dir := t.TempDir()
	var train []string
	for i, name := range []string{"fineweb_val_000000.bin", "fineweb_train_000001.bin", "fineweb_train_000002.bin"} {
		w, err := CreateShard(filepath.Join(dir, name), false)
		if err != nil {
			t.Fatal(err)
		}
		toks := make([]int32, 30+i)
		for j := range toks {
			toks[j] = int32(j * (i + 1))
		}
		w.Write(toks)
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if i > 0 {
			train = append(train, filepath.Join(dir, name))
		}
	}
	if l, err := loaderOn(train); err == nil {
		l.Close()
		t.Fatal("loader accepted shards without a manifest")
	}
	m, err := WriteManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Shards) != 3 || m.Shards[2].Split != "val" || m.Shards[0].Split != "train" || m.Shards[1].Tokens != 32 {
		t.Errorf("manifest %+v", m.Shards)
	}
	l, err := loaderOn(train)
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	if _, err := WriteManifest(t.TempDir()); err == nil {
		t.Error("WriteManifest on an empty folder succeeded")
	}
}

func TestBuildRefusesNoTraining(t *testing.T) {
	// "Hello world" is EndOfText, "Hello", " world": 3 tokens.
	tests := []struct {
		split Split
		want  string // "" = accepted
	}{
		{Split{ValTokens: 2}, ""},
		{Split{ValTokens: 3}, "validation takes the first 3 tokens, at or above the input's 3"},
		{Split{ValTokens: 100}, "validation takes the first 100 tokens, at or above the input's 3"},
		{Split{ValEvery: 1}, "sends all 3 tokens to validation"},
	}
	for _, tc := range tests {
		dir := t.TempDir()
		_, err := BuildFromText(context.Background(), BuildConfig{Dir: dir, Split: tc.split}, "Hello world")
		_, merr := os.Stat(filepath.Join(dir, ManifestName))
		if tc.want == "" {
			if err != nil || merr != nil {
				t.Errorf("split %+v: %v, manifest: %v", tc.split, err, merr)
			}
			continue
		}
		if !errors.Is(err, ErrNoTraining) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("split %+v: %v, expected ErrNoTraining with %q", tc.split, err, tc.want)
		}
		if !errors.Is(merr, os.ErrNotExist) {
			t.Errorf("split %+v: a manifest was written for a set without training shards", tc.split)
		}
	}
}
