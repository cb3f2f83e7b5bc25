package cli

import (
	"bytes"
	"compress/gzip"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hilbert-ml/hilbert/data"
	"github.com/hilbert-ml/hilbert/train"
)

func TestPrepare(t *testing.T) {
	in := t.TempDir()
	for i, text := range []string{"First document.\n", "Second one, a little longer.\n"} {
		os.WriteFile(filepath.Join(in, "doc"+string(rune('a'+i))+".txt"), []byte(text), 0o644)
	}
	out := t.TempDir()
	args := []string{"-out", out, "-quiet", "-val-every", "2", filepath.Join(in, "*.txt")}
	var stdout, stderr bytes.Buffer
	if err := runPrepare(args, &stdout, &stderr); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	for _, want := range []string{"documents 2", "shards    1 train, 1 validation", "MB/s"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, stdout.String())
		}
	}
	for _, name := range []string{"fineweb_train_000000.bin", "fineweb_val_000000.bin"} {
		s, err := data.OpenShard(filepath.Join(out, name), 50257)
		if err != nil {
			t.Fatal(err)
		}
		toks, err := s.Tokens()
		if err != nil || s.Len() < 2 || toks[0] != 50256 {
			t.Errorf("%s: %d tokens, first %v, %v", name, s.Len(), toks[:min(len(toks), 1)], err)
		}
		s.Close()
	}
	if err := runPrepare(args, &stdout, &stderr); err == nil || !strings.Contains(err.Error(), "overwrit") {
		t.Errorf("second run without -overwrite: %v", err)
	}
	if err := runPrepare(append([]string{"-overwrite"}, args...), &stdout, &stderr); err != nil {
		t.Errorf("with -overwrite: %v", err)
	}
	if err := runPrepare([]string{"-out", out}, &stdout, &stderr); err == nil {
		t.Error("no inputs accepted")
	}
}

// shardTokens concatenates the tokens of shards.
func shardTokens(t *testing.T, paths ...string) []uint16 {
	t.Helper()
	var out []uint16
	for _, p := range paths {
		s, err := data.OpenShard(p, 50257)
		if err != nil {
			t.Fatal(err)
		}
		toks, err := s.Tokens()
		s.Close()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, toks...)
	}
	return out
}

// prepare and train -text read a gzip file the same way (decompressed,
// whatever its name; one document per paragraph); prepare's shards come
// with a manifest the loader accepts.
func TestPrepareAndTrainTextAgree(t *testing.T) {
	dir := t.TempDir()
	text := strings.Repeat("A first paragraph, long enough to matter.\n\nThen a second one.\r\n\r\n", 40)
	var buf bytes.Buffer
	z := gzip.NewWriter(&buf)
	z.Write([]byte(text))
	z.Close()
	for _, name := range []string{"book.txt.gz", "book.txt"} { // gzip either way
		in := filepath.Join(dir, name)
		os.WriteFile(in, buf.Bytes(), 0o644)
		out := filepath.Join(dir, "out-"+name)
		var stdout, stderr bytes.Buffer
		if err := runPrepare([]string{"-out", out, "-quiet", "-val-tokens", "100", in}, &stdout, &stderr); err != nil {
			t.Fatal(err)
		}
		job := trainFile{Config: train.Config{Name: "t-" + name, RunsDir: filepath.Join(dir, "runs")}, Text: []string{in}, TextValTokens: 100}
		dataDir := filepath.Join(dir, "runs", job.Config.Name, "data")
		if _, err := shardsFromText(context.Background(), &job, dataDir); err != nil {
			t.Fatal(err)
		}
		prepTrain, _ := filepath.Glob(filepath.Join(out, "fineweb_train_*.bin"))
		prep := shardTokens(t, append([]string{filepath.Join(out, "fineweb_val_000000.bin")}, prepTrain...)...)
		fromText := shardTokens(t, append([]string{job.Config.ValShard}, job.Config.TrainShards...)...)
		if !slices.Equal(prep, fromText) {
			t.Errorf("%s: prepare wrote %d tokens, train -text %d", name, len(prep), len(fromText))
		}
		// 80 paragraphs -> 80 documents, and far fewer tokens than the
		// compressed bytes would give.
		if n := strings.Count(stdout.String(), "documents 80 "); n != 1 {
			t.Errorf("%s: %s", name, stdout.String())
		}
		l, err := data.NewLoader(data.LoaderConfig{Shards: prepTrain, SeqLen: 8, MicroBatch: 1})
		if err != nil {
			t.Fatalf("%s: loader on prepare's shards: %v", name, err)
		}
		l.Close()
	}
	bin := filepath.Join(dir, "model.bin.txt")
	os.WriteFile(bin, bytes.Repeat([]byte{0, 1, 2, 0xff}, 1000), 0o644)
	var stdout, stderr bytes.Buffer
	if err := runPrepare([]string{"-out", filepath.Join(dir, "bin"), "-quiet", bin}, &stdout, &stderr); err == nil || !strings.Contains(err.Error(), bin) || !strings.Contains(err.Error(), "not UTF-8 text") {
		t.Errorf("prepare on a binary file: %v", err)
	}
	job := trainFile{Config: train.Config{Name: "bin", RunsDir: filepath.Join(dir, "runs")}, Text: []string{bin}, TextValTokens: 100}
	dataDir := filepath.Join(dir, "runs", "bin", "data")
	if _, err := shardsFromText(context.Background(), &job, dataDir); err == nil || !strings.Contains(err.Error(), "not UTF-8 text") {
		t.Errorf("train -text on a binary file: %v", err)
	}
}

func TestPrepareValTokensAtOrAboveTotal(t *testing.T) {
	in := filepath.Join(t.TempDir(), "doc.txt")
	os.WriteFile(in, []byte("Hello world"), 0o644) // EndOfText + 2 tokens
	for _, n := range []string{"3", "1000"} {
		out := t.TempDir()
		var stdout, stderr bytes.Buffer
		err := runPrepare([]string{"-out", out, "-quiet", "-val-tokens", n, in}, &stdout, &stderr)
		if err == nil || !strings.Contains(err.Error(), "-val-tokens "+n+" is at or above the 3 tokens of the input") {
			t.Errorf("-val-tokens %s: %v", n, err)
		}
		if _, err := os.Stat(filepath.Join(out, data.ManifestName)); err == nil {
			t.Errorf("-val-tokens %s: a manifest was written", n)
		}
	}
}

// -manifest DIR makes llm.c-style shards (no manifest) usable for train.
func TestPrepareManifest(t *testing.T) {
	dir := t.TempDir()
	var trainShards []string
	for i, name := range []string{"fineweb_val_000000.bin", "fineweb_train_000001.bin", "fineweb_train_000002.bin"} {
		w, err := data.CreateShard(filepath.Join(dir, name), false)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(make([]int32, 100+i))
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if i > 0 {
			trainShards = append(trainShards, filepath.Join(dir, name))
		}
	}
	cfg := data.LoaderConfig{Shards: trainShards, SeqLen: 8, MicroBatch: 1}
	if l, err := data.NewLoader(cfg); err == nil || !strings.Contains(err.Error(), "hilbert prepare -manifest "+dir) {
		if l != nil {
			l.Close()
		}
		t.Fatalf("loader without a manifest: %v", err)
	}
	var stdout, stderr bytes.Buffer
	if err := runPrepare([]string{"-manifest", dir}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout.String(), "2 train, 1 validation shards, 303 tokens") {
		t.Errorf("summary: %s", stdout.String())
	}
	l, err := data.NewLoader(cfg)
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	if err := runPrepare([]string{"-manifest", dir, "-out", dir}, &stdout, &stderr); err == nil {
		t.Error("-manifest with -out accepted")
	}
}
