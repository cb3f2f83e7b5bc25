package oraclestudy

import (
	"bytes"
	"compress/gzip"
	"context"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hilbert-ml/hilbert/data"
	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/tokenizer/smallbpe"
)

// opticks returns the path of Newton's Opticks, which every Go
// installation ships, skipping the test where it is missing.
func opticks(t *testing.T) string {
	t.Helper()
	root, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Skipf("go env GOROOT: %v", err)
	}
	p := filepath.Join(strings.TrimSpace(string(root)), "src", "testdata", "Isaac.Newton-Opticks.txt")
	if _, err := os.Stat(p); err != nil {
		t.Skip(err)
	}
	return p
}

// gzipSlice writes the first n bytes of Opticks gzip-compressed, as the
// shared corpus is, and returns the file.
func gzipSlice(t *testing.T, n int) string {
	t.Helper()
	full, err := os.ReadFile(opticks(t))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	z := gzip.NewWriter(&buf)
	z.Write(full[:n])
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "slice.txt.gz")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// tiny is a study small enough for a test: d 64, one block, context 16.
func tiny(t *testing.T, text string) Config {
	c := DefaultConfig()
	c.Out, c.Text = filepath.Join(t.TempDir(), "study"), []string{text}
	c.Dim, c.Layers, c.Context, c.MicroBatch, c.BatchSeqs = 64, 1, 16, 4, 4
	c.Steps, c.Every, c.ValTokens, c.ValEvery = 4, 2, 300, 2
	c.Solver.Tol, c.Quiet = 1e-3, true
	return c
}

// checkRows checks each measurement against the solver's certificate and
// the paper's guarantee sqrt((k+1)/(2k)) <= ratio <= 1.
func checkRows(t *testing.T, rows []Row, rank int, tol float64) {
	t.Helper()
	for _, r := range rows {
		if !r.Converged || r.Gap > tol || r.TLower > r.TUpper {
			t.Errorf("update %d: gap %g, T in [%g, %g], converged %v", r.Step, r.Gap, r.TLower, r.TUpper, r.Converged)
		}
		if r.Rank != rank || math.Abs(r.Bound-math.Sqrt(float64(rank+1)/float64(2*rank))) > 1e-15 {
			t.Errorf("update %d: rank %d, bound %g; want rank %d", r.Step, r.Rank, r.Bound, rank)
		}
		if r.RatioHi < r.Bound || r.RatioLo > 1+1e-12 || r.RatioLo > r.Ratio || r.Ratio > r.RatioHi {
			t.Errorf("update %d: ratio %g in [%g, %g], bound %g", r.Step, r.Ratio, r.RatioLo, r.RatioHi, r.Bound)
		}
		if math.Abs(r.Ratio-r.RowNormHalf/((r.TLower+r.TUpper)/2)) > 1e-12 {
			t.Errorf("update %d: ratio %g, RowNormHalf / T = %g", r.Step, r.Ratio, r.RowNormHalf/((r.TLower+r.TUpper)/2))
		}
	}
}

// A byte-level study measures at updates 1, every Every and the last,
// writes oracle.jsonl (which ReadRows reads back as Run returned it) and
// byte shards, and refuses a second run without Overwrite.
func TestRunByteLevel(t *testing.T) {
	c := tiny(t, gzipSlice(t, 60_000))
	res, err := Run(context.Background(), cpu.New(), c)
	if err != nil {
		t.Fatal(err)
	}
	var steps []int
	for _, r := range res.Rows {
		steps = append(steps, r.Step)
	}
	if len(steps) != 3 || steps[0] != 1 || steps[1] != 2 || steps[2] != 4 {
		t.Errorf("measured updates %v, want [1 2 4]", steps)
	}
	checkRows(t, res.Rows, 64, 1e-3)
	if res.Train.Steps != 4 || res.Bound != math.Sqrt(65.0/128) || res.MinRatio > res.MaxRatio {
		t.Errorf("result: %d updates, bound %g, ratios [%g, %g]", res.Train.Steps, res.Bound, res.MinRatio, res.MaxRatio)
	}
	read, err := ReadRows(filepath.Join(c.Out, "oracle.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if len(read) != len(res.Rows) || read[2] != res.Rows[2] {
		t.Errorf("oracle.jsonl holds %v, Run returned %v", read, res.Rows)
	}
	for _, name := range []string{"oracle.csv", "ratio.png", "summary.md", "train/metrics.jsonl", "data/bytes_train_000000.bin"} {
		if _, err := os.Stat(filepath.Join(c.Out, name)); err != nil {
			t.Error(err)
		}
	}
	// Byte-level shards: every token below 256, the validation shard
	// exactly ValTokens + 1 long.
	sh, err := data.OpenShard(filepath.Join(c.Out, "data", "bytes_val_000000.bin"), 256)
	if err != nil {
		t.Fatal(err)
	}
	if sh.Len() != 301 {
		t.Errorf("validation shard: %d tokens, want 301", sh.Len())
	}
	sh.Close()
	if _, err := Run(context.Background(), cpu.New(), c); err == nil || !strings.Contains(err.Error(), "-overwrite") {
		t.Errorf("second run: %v, want an error saying -overwrite", err)
	}
	// Replot rewrites the CSV from the JSONL.
	os.Remove(filepath.Join(c.Out, "oracle.csv"))
	if err := Replot(c.Out); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(c.Out, "oracle.csv")); strings.Count(string(b), "\n") != 4 {
		t.Errorf("replotted oracle.csv:\n%s", b)
	}
}

// With Vocab above 256 the study trains a byte-level BPE on the text: its
// merges beside the shards, the shards in its tokens, the model's
// vocabulary its size.
func TestRunBPE(t *testing.T) {
	c := tiny(t, gzipSlice(t, 60_000))
	c.Vocab, c.Steps, c.ValTokens = 320, 2, 200
	res, err := Run(context.Background(), cpu.New(), c)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 2 {
		t.Errorf("%d measurements, want 2", len(res.Rows))
	}
	checkRows(t, res.Rows, 64, 1e-3)
	bpe, err := smallbpe.Load(filepath.Join(c.Out, "data", "bpe320.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if bpe.VocabSize() != 320 {
		t.Errorf("merges file: vocabulary %d, want 320", bpe.VocabSize())
	}
	val, err := data.OpenShard(filepath.Join(c.Out, "data", "bpe320_val_000000.bin"), 320)
	if err != nil {
		t.Fatal(err)
	}
	if val.Len() != 201 {
		t.Errorf("validation shard: %d tokens, want 201", val.Len())
	}
	val.Close()
	tr, err := data.OpenShard(filepath.Join(c.Out, "data", "bpe320_train_000000.bin"), 320)
	if err != nil {
		t.Fatal(err)
	}
	if n := tr.Len(); n > 45_000 {
		t.Errorf("training shard: %d tokens from 60,000 bytes, want compression", n)
	}
	tr.Close()
	sum, err := os.ReadFile(res.Summary)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"byte-level BPE of V 320", "Model (V 320)", "nats/token"} {
		if !strings.Contains(string(sum), want) {
			t.Errorf("summary lacks %q:\n%s", want, sum)
		}
	}
}

// gzipRange is gzipSlice for bytes [lo, hi) of Opticks, cut at line
// starts so that paragraphs stay whole.
func gzipRange(t *testing.T, lo, hi int) string {
	t.Helper()
	full, err := os.ReadFile(opticks(t))
	if err != nil {
		t.Fatal(err)
	}
	cut := func(i int) int {
		if i == 0 || i >= len(full) {
			return min(i, len(full))
		}
		return i + bytes.IndexByte(full[i:], '\n') + 1
	}
	var buf bytes.Buffer
	z := gzip.NewWriter(&buf)
	z.Write(full[cut(lo):cut(hi)])
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "range.txt.gz")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// With ValText the validation is the whole of other files, for any
// vocabulary: the byte model's and the BPE model's validation shards hold
// the same text (decoded, byte for byte), all of Text trains, the BPE
// learns from Text alone, and the loss per byte is the loss x the scored
// targets / their bytes (the loss itself for bytes).
func TestRunValText(t *testing.T) {
	train, val := gzipRange(t, 0, 60_000), gzipRange(t, 60_000, 70_000)
	valText, err := data.ReadText(val)
	if err != nil {
		t.Fatal(err)
	}
	docs, err := paragraphs([]string{val})
	if err != nil {
		t.Fatal(err)
	}
	var texts [][]byte
	for _, vocab := range []int{256, 320} {
		c := tiny(t, train)
		c.Vocab, c.Steps, c.ValEvery, c.ValText, c.ValTokens = vocab, 1, 1, []string{val}, 0
		res, err := Run(context.Background(), cpu.New(), c)
		if err != nil {
			t.Fatal(err)
		}
		// decode writes each token's bytes, NUL (the end of text) as 0.
		prefix, tokenBytes := "bytes", func(t int32) []byte { return []byte{byte(t)} }
		if vocab != 256 {
			bpe, err := smallbpe.Load(filepath.Join(c.Out, "data", "bpe320.txt"))
			if err != nil {
				t.Fatal(err)
			}
			trainDocs, err := paragraphs([]string{train})
			if err != nil {
				t.Fatal(err)
			}
			want, err := smallbpe.Train(320, trainDocs...)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(bpe.Merges(), want.Merges()) {
				t.Error("the BPE's merges are not those of the training text alone")
			}
			prefix, tokenBytes = "bpe320", bpe.TokenBytes
		}
		decode := func(toks []int32) []byte {
			var b []byte
			for _, t := range toks {
				b = append(b, tokenBytes(t)...)
			}
			return b
		}
		toks := readShard(t, filepath.Join(c.Out, "data", prefix+"_val_000000.bin"), vocab)
		text := decode(toks)
		// The whole val text: each paragraph after a NUL.
		if want := "\x00" + strings.Join(docs, "\x00"); string(text) != want {
			t.Errorf("V %d: validation shard decodes to %d bytes, want the %d of the val text's paragraphs", vocab, len(text), len(want))
		}
		texts = append(texts, text)
		targets := (len(toks) - 1) / 16 * 16
		scored := decode(toks[1 : 1+targets])
		if res.ValTargets != targets || res.ValBytes != len(scored) {
			t.Errorf("V %d: %d targets, %d bytes; want %d and %d", vocab, res.ValTargets, res.ValBytes, targets, len(scored))
		}
		if got := res.Train.ValLoss * float64(targets) / float64(len(scored)); res.ValNatsPerByte != got || (vocab == 256 && got != res.Train.ValLoss) {
			t.Errorf("V %d: %.6f nats/byte from a val loss of %.6f", vocab, res.ValNatsPerByte, res.Train.ValLoss)
		}
		trainToks := readShard(t, filepath.Join(c.Out, "data", prefix+"_train_000000.bin"), vocab)
		if trained := decode(trainToks); len(trained) < 55_000 {
			t.Errorf("V %d: training shard of %d bytes, want all of the 60,000-byte training text", vocab, len(trained))
		}
		sum, err := os.ReadFile(res.Summary)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(sum), "Validation: the whole of "+val) || !strings.Contains(string(sum), "nats/byte") {
			t.Errorf("summary:\n%s", sum)
		}
	}
	if len(valText) < 9_000 || !bytes.Equal(texts[0], texts[1]) {
		t.Error("the byte and BPE studies validate on different text")
	}
}

// readShard returns a shard's tokens.
func readShard(t *testing.T, path string, vocab int) []int32 {
	t.Helper()
	sh, err := data.OpenShard(path, vocab)
	if err != nil {
		t.Fatal(err)
	}
	defer sh.Close()
	u := make([]uint16, sh.Len())
	if err := sh.ReadTokens(u, 0); err != nil {
		t.Fatal(err)
	}
	out := make([]int32, len(u))
	for i, x := range u {
		out[i] = int32(x)
	}
	return out
}

// Head exact solves T(B) at every update and says so in the summary.
func TestRunExactHead(t *testing.T) {
	c := tiny(t, opticks(t))
	c.Head, c.Steps, c.Every, c.ValEvery, c.ExactTol = "exact", 3, 3, 3, 1e-2
	res, err := Run(context.Background(), cpu.New(), c)
	if err != nil {
		t.Fatal(err)
	}
	sum, err := os.ReadFile(res.Summary)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(sum), "head exact") || !strings.Contains(string(sum), "Exact head steps: 3 solves") {
		t.Errorf("summary:\n%s", sum)
	}
}

// Bad settings are refused before any training, naming the setting.
func TestConfigErrors(t *testing.T) {
	text := opticks(t)
	for _, c := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"every 0", func(c *Config) { c.Every = 0 }, "every 0"},
		{"vocab 255", func(c *Config) { c.Vocab = 255 }, "vocab 255"},
		{"vocab too large", func(c *Config) { c.Vocab = smallbpe.MaxVocab + 1 }, "vocab 1048577"},
		{"no text", func(c *Config) { c.Text = nil }, "no text"},
		{"head", func(c *Config) { c.Head = "lion" }, `head "lion"`},
		{"missing text", func(c *Config) { c.Text = []string{filepath.Join(t.TempDir(), "none.txt")} }, "none.txt"},
		{"val tokens with val text", func(c *Config) { c.ValText = []string{c.Text[0] + ".other"} }, "leave val tokens 0"},
		{"val text is training text", func(c *Config) { c.ValText, c.ValTokens = c.Text, 0 }, "both training text and val text"},
		{"missing val text", func(c *Config) { c.ValText, c.ValTokens = []string{filepath.Join(t.TempDir(), "noval.txt")}, 0 }, "noval.txt"},
		{"no validation", func(c *Config) { c.ValTokens = 0 }, "val tokens 0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := tiny(t, text)
			c.edit(&cfg)
			_, err := Run(context.Background(), cpu.New(), cfg)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want one naming %q", err, c.want)
			}
			if _, err := os.Stat(filepath.Join(cfg.Out, "train")); err == nil {
				t.Error("a training run was started")
			}
		})
	}
}

// The timing table has one row per size with V(V-1)/2 pairs and, for a
// Zipf gradient with more positions than D, rank D.
func TestTiming(t *testing.T) {
	dir := t.TempDir()
	sizes, err := ParseSizes("8x3, 20x6")
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	table, err := Timing(dir, sizes, 200, DefaultConfig().Solver, &log)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| 8 | 3 | 3 | 28 |", "| 20 | 6 | 6 | 190 |"} {
		if !strings.Contains(table, want) || !strings.Contains(log.String(), want) {
			t.Errorf("table or log lacks %q:\n%s", want, table)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "timing.md")); string(b) != table {
		t.Errorf("timing.md differs from the returned table")
	}
}

func TestParseSizes(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []Size
		err  string
	}{
		{"8x3", []Size{{8, 3}}, ""},
		{"256x128,1024x512", []Size{{256, 128}, {1024, 512}}, ""},
		{"8by3", nil, `"8by3"`},
		{"1x3", nil, `"1x3"`},
		{"8x0", nil, `"8x0"`},
		{"8x3,", nil, `""`},
	} {
		got, err := ParseSizes(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: error %v, want one naming %s", c.in, err, c.err)
			}
			continue
		}
		if err != nil || len(got) != len(c.want) || got[0] != c.want[0] || got[len(got)-1] != c.want[len(c.want)-1] {
			t.Errorf("%q: %v, %v; want %v", c.in, got, err, c.want)
		}
	}
}

// zipfGradient's rows sum to zero (each position's p - onehot does), so
// the gradient's rank is at most V-1, as the solver assumes of a centred
// head gradient.
func TestZipfGradientCentred(t *testing.T) {
	g := zipfGradient(newRand(3, 5), 7, 5, 50)
	for c := 0; c < 5; c++ {
		var s float64
		for i := 0; i < 7; i++ {
			s += g[i*5+c]
		}
		if math.Abs(s) > 1e-12 {
			t.Errorf("column %d sums to %g, want 0", c, s)
		}
	}
}

// ReadRows names the file and line of a corrupt record.
func TestReadRowsCorrupt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "oracle.jsonl")
	os.WriteFile(path, []byte("{\"step\":1}\n{oops\n"), 0o644)
	if _, err := ReadRows(path); err == nil || !strings.Contains(err.Error(), path+": line 2") {
		t.Errorf("error %v, want one naming %s: line 2", err, path)
	}
}

func newRand(a, b uint64) *rand.Rand { return rand.New(rand.NewPCG(a, b)) }
