package cli

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hilbert-ml/hilbert/data/fineweb"
	"github.com/hilbert-ml/hilbert/tokenizer/smallbpe"
)

// TestOracleStudy runs `hilbert oracle` end to end on a slice of Opticks
// (gzip-compressed, as the shared corpus is) with a tiny byte-level model.
func TestOracleStudy(t *testing.T) {
	full := opticksText(t)
	dir := t.TempDir()
	text := filepath.Join(dir, "slice.txt.gz")
	writeGzip(t, text, full[:60_000])
	out := filepath.Join(dir, "study")
	args := []string{"oracle", "-out", out, "-text", text, "-dim", "64", "-layers", "1", "-context", "16",
		"-micro-batch", "4", "-batch-seqs", "4", "-steps", "4", "-every", "2", "-val-tokens", "300", "-val-every", "2",
		"-tol", "1e-3", "-quiet"}
	var stdout, stderr bytes.Buffer
	if code := Run(args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout.String(), stderr.String())
	}
	if !strings.Contains(stdout.String(), "oracle: 3 measurements over 4 updates") {
		t.Errorf("stdout: %s", stdout.String())
	}
	f, err := os.Open(filepath.Join(out, "oracle.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var steps []int
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r oracleRow
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		steps = append(steps, r.Step)
		if !r.Converged || r.Gap > 1e-3 || r.TLower > r.TUpper {
			t.Errorf("update %d: gap %g, T in [%g, %g], converged %v", r.Step, r.Gap, r.TLower, r.TUpper, r.Converged)
		}
		if r.Rank != 64 || math.Abs(r.Bound-math.Sqrt(65.0/128)) > 1e-15 {
			t.Errorf("update %d: rank %d, bound %g", r.Step, r.Rank, r.Bound)
		}
		// The paper's guarantee, on the certified interval.
		if r.RatioHi < r.Bound || r.RatioLo > 1+1e-12 || r.RatioLo > r.Ratio || r.Ratio > r.RatioHi {
			t.Errorf("update %d: ratio %g in [%g, %g], bound %g", r.Step, r.Ratio, r.RatioLo, r.RatioHi, r.Bound)
		}
		if math.Abs(r.Ratio-r.RowNormHalf/((r.TLower+r.TUpper)/2)) > 1e-12 {
			t.Errorf("update %d: ratio %g, RowNormHalf / T = %g", r.Step, r.Ratio, r.RowNormHalf/((r.TLower+r.TUpper)/2))
		}
	}
	if len(steps) != 3 || steps[0] != 1 || steps[1] != 2 || steps[2] != 4 {
		t.Errorf("measured updates %v, want [1 2 4]", steps)
	}
	for _, name := range []string{"oracle.csv", "ratio.png", "summary.md", "train/metrics.jsonl", "data/bytes_train_000000.bin"} {
		if _, err := os.Stat(filepath.Join(out, name)); err != nil {
			t.Error(err)
		}
	}
	// The shards are byte-level: every token below 256, the validation
	// shard exactly -val-tokens + 1 long.
	sh, err := fineweb.OpenShard(filepath.Join(out, "data", "bytes_val_000000.bin"), 256)
	if err != nil {
		t.Fatal(err)
	}
	if sh.Len() != 301 {
		t.Errorf("validation shard: %d tokens, want 301", sh.Len())
	}
	sh.Close()
	// A second run refuses to overwrite without -overwrite.
	stdout.Reset()
	stderr.Reset()
	if code := Run(args, &stdout, &stderr); code == 0 || !strings.Contains(stderr.String(), "-overwrite") {
		t.Errorf("second run: exit %d, stderr %s", code, stderr.String())
	}
}

// TestOracleBPE runs the study with -vocab: a byte-level BPE trained on
// the text, the model's vocabulary its size.
func TestOracleBPE(t *testing.T) {
	full := opticksText(t)
	dir := t.TempDir()
	text := filepath.Join(dir, "slice.txt.gz")
	writeGzip(t, text, full[:60_000])
	out := filepath.Join(dir, "bpe")
	args := []string{"oracle", "-out", out, "-text", text, "-vocab", "320", "-dim", "64", "-layers", "1", "-context", "16",
		"-micro-batch", "4", "-batch-seqs", "4", "-steps", "2", "-every", "2", "-val-tokens", "200", "-val-every", "2",
		"-tol", "1e-3", "-quiet"}
	var stdout, stderr bytes.Buffer
	if code := Run(args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout.String(), stderr.String())
	}
	if !strings.Contains(stdout.String(), "oracle: 2 measurements over 2 updates") {
		t.Errorf("stdout: %s", stdout.String())
	}
	bpe, err := smallbpe.Load(filepath.Join(out, "data", "bpe320.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if bpe.VocabSize() != 320 {
		t.Errorf("merges file: vocabulary %d, want 320", bpe.VocabSize())
	}
	// The shards hold BPE tokens: validated against V 320, the validation
	// shard -val-tokens + 1 long, and fewer training tokens than bytes.
	val, err := fineweb.OpenShard(filepath.Join(out, "data", "bpe320_val_000000.bin"), 320)
	if err != nil {
		t.Fatal(err)
	}
	if val.Len() != 201 {
		t.Errorf("validation shard: %d tokens, want 201", val.Len())
	}
	val.Close()
	tr, err := fineweb.OpenShard(filepath.Join(out, "data", "bpe320_train_000000.bin"), 320)
	if err != nil {
		t.Fatal(err)
	}
	if n := tr.Len(); n > 45_000 {
		t.Errorf("training shard: %d tokens from 60,000 bytes, want compression", n)
	}
	tr.Close()
	f, err := os.Open(filepath.Join(out, "oracle.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r oracleRow
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		if !r.Converged || r.Rank != 64 || r.RatioHi < r.Bound || r.RatioLo > 1+1e-12 {
			t.Errorf("update %d: rank %d, ratio in [%g, %g], bound %g, converged %v", r.Step, r.Rank, r.RatioLo, r.RatioHi, r.Bound, r.Converged)
		}
	}
	sum, err := os.ReadFile(filepath.Join(out, "summary.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(sum), "byte-level BPE of V 320") || !strings.Contains(string(sum), "Model (V 320)") || !strings.Contains(string(sum), "nats/token") {
		t.Errorf("summary:\n%s", sum)
	}
	for _, bad := range []string{"255", "1048577"} {
		stderr.Reset()
		if code := Run([]string{"oracle", "-out", filepath.Join(dir, "bad"), "-text", text, "-vocab", bad}, &stdout, &stderr); code == 0 || !strings.Contains(stderr.String(), "-vocab "+bad) {
			t.Errorf("-vocab %s: exit %d, stderr %s", bad, code, stderr.String())
		}
	}
}

// TestOracleExactHead trains a few updates with the exact head step.
func TestOracleExactHead(t *testing.T) {
	opticks, err := opticksPath()
	if err != nil {
		t.Skip(err)
	}
	out := filepath.Join(t.TempDir(), "exact")
	args := []string{"oracle", "-out", out, "-text", opticks, "-head", "exact", "-dim", "64", "-layers", "1", "-context", "16",
		"-micro-batch", "4", "-batch-seqs", "4", "-steps", "3", "-every", "3", "-val-tokens", "300", "-val-every", "3",
		"-tol", "1e-3", "-exact-tol", "1e-2", "-quiet"}
	var stdout, stderr bytes.Buffer
	if code := Run(args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout.String(), stderr.String())
	}
	sum, err := os.ReadFile(filepath.Join(out, "summary.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(sum), "head exact") || !strings.Contains(string(sum), "Exact head steps: 3 solves") {
		t.Errorf("summary:\n%s", sum)
	}
}

func TestOracleTiming(t *testing.T) {
	out := t.TempDir()
	var stdout, stderr bytes.Buffer
	if code := Run([]string{"oracle", "-out", out, "-timing", "8x3,20x6", "-timing-samples", "200"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d\nstderr: %s", code, stderr.String())
	}
	table, err := os.ReadFile(filepath.Join(out, "timing.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(table), "| 8 | 3 | 3 | 28 |") || !strings.Contains(string(table), "| 20 | 6 | 6 | 190 |") {
		t.Errorf("timing table:\n%s", table)
	}
	if code := Run([]string{"oracle", "-out", out, "-timing", "8by3"}, &stdout, &stderr); code == 0 {
		t.Error("-timing 8by3: no error")
	}
}

func writeGzip(t *testing.T, path string, data []byte) {
	t.Helper()
	var buf bytes.Buffer
	z := gzip.NewWriter(&buf)
	z.Write(data)
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}
