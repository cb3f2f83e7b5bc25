package cli

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hilbert-ml/hilbert/autograd"
	"github.com/hilbert-ml/hilbert/data"
	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/models/hf"
	"github.com/hilbert-ml/hilbert/safetensors"
	"github.com/hilbert-ml/hilbert/tensor"
	"github.com/hilbert-ml/hilbert/train"
)

var updateHF64 = flag.Bool("update-hf64", false, "rewrite testdata/hf64, the shards docs/writing-a-model.md uses with the Hugging Face fixtures")

// hf64Dir holds docs/writing-a-model.md's shards for the models/hf fixtures, whose
// vocabulary is 64 (GPT-2-tokenized text does not fit it): token ids
// below 61 in a learnable pattern, written by TestHF64Shards.
var hf64Dir = filepath.Join("testdata", "hf64")

// hf64Tokens are n tokens of the pattern (5i + a pseudo-random 0..2) mod
// 61, from an xorshift generator seeded with seed.
func hf64Tokens(n int, seed uint32) []int32 {
	out := make([]int32, n)
	for i := range out {
		seed ^= seed << 13
		seed ^= seed >> 17
		seed ^= seed << 5
		out[i] = int32((5*i + int(seed%3)) % 61)
	}
	return out
}

// TestHF64Shards: testdata/hf64 holds exactly what hf64Tokens writes (a
// training shard of 8,000 tokens, a validation shard of 1,000, and their
// manifest); go test -run TestHF64Shards -update-hf64 rewrites it.
func TestHF64Shards(t *testing.T) {
	dir := t.TempDir()
	if *updateHF64 {
		if err := os.RemoveAll(hf64Dir); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(hf64Dir, 0o755); err != nil {
			t.Fatal(err)
		}
		dir = hf64Dir
	}
	for _, s := range []struct {
		name string
		n    int
		seed uint32
	}{{"hf64_train_000000.bin", 8000, 1}, {"hf64_val_000000.bin", 1000, 2}} {
		if err := data.WriteShard(filepath.Join(dir, s.name), hf64Tokens(s.n, s.seed), false); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"hf64_train_000000.bin", "hf64_val_000000.bin", data.ManifestName} {
		want, err1 := os.ReadFile(filepath.Join(dir, name))
		have, err2 := os.ReadFile(filepath.Join(hf64Dir, name))
		if err1 != nil || err2 != nil || !bytes.Equal(want, have) {
			t.Errorf("%s differs from what hf64Tokens writes (%v, %v): run go test -run TestHF64Shards -update-hf64", filepath.Join(hf64Dir, name), err1, err2)
		}
	}
}

// hfFixture is the path of a models/hf test fixture (a random-init
// Hugging Face directory with PyTorch's golden outputs).
func hfFixture(name string) string {
	return filepath.Join("..", "..", "..", "models", "hf", "testdata", name)
}

// hfGolden is the part of a fixture's golden.json these tests read:
// PyTorch's token rows, their float64 logits [rows, T, vocab] and loss.
type hfGolden struct {
	Tokens   [][]int32
	Logits64 []float64
	Loss64   float64
}

func readHFGolden(t *testing.T, dir string) hfGolden {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g hfGolden
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	return g
}

// rowLoss is the mean next-token cross-entropy of golden row r computed
// in float64 from PyTorch's logits of it.
func (g hfGolden) rowLoss(r int) float64 {
	T := len(g.Tokens[r])
	vocab := len(g.Logits64) / (len(g.Tokens) * T)
	var sum float64
	for p := 0; p < T-1; p++ {
		l := g.Logits64[(r*T+p)*vocab : (r*T+p+1)*vocab]
		m := math.Inf(-1)
		for _, x := range l {
			m = max(m, x)
		}
		var z float64
		for _, x := range l {
			z += math.Exp(x - m)
		}
		sum += m + math.Log(z) - l[g.Tokens[r][p+1]]
	}
	return sum / float64(T-1)
}

// runCLI runs the hilbert command and returns its stdout, failing the
// test on a non-zero exit.
func runCLI(t *testing.T, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := Run(args, &stdout, &stderr); code != 0 {
		t.Fatalf("%q: exit %d\nstdout: %s\nstderr: %s", args, code, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// evalLoss parses "val loss L over N tokens" from eval's output.
func evalLoss(t *testing.T, out string) (float64, int) {
	t.Helper()
	i := strings.Index(out, "val loss ")
	var loss float64
	var tokens int
	if i < 0 {
		t.Fatalf("no val loss in %q", out)
	}
	if _, err := fmt.Sscanf(out[i:], "val loss %g over %d tokens", &loss, &tokens); err != nil {
		t.Fatalf("%q: %v", out, err)
	}
	return loss, tokens
}

// float64WindowsLoss is the token-weighted mean loss of the model in dir
// loaded in float64 over consecutive windows of seqLen+1 tokens of toks
// sharing one token (as data.Validation cuts a shard), one window at a
// time: an independent float64 reference for eval.
func float64WindowsLoss(t *testing.T, dir string, toks []int32, seqLen int) float64 {
	t.Helper()
	dev := cpu.New()
	m, _, err := hf.Load(dev, dir, hf.Options{DType: device.Float64})
	if err != nil {
		t.Fatal(err)
	}
	lm := m.(train.LanguageModel)
	g := autograd.New(dev)
	g.SetNoGrad(true)
	var sum float64
	n := (len(toks) - 1) / seqLen
	for w := range n {
		win := toks[w*seqLen : w*seqLen+seqLen+1]
		in, _ := tensor.FromInt32(dev, win[:seqLen], 1, seqLen)
		tg, _ := tensor.FromInt32(dev, win[1:], 1, seqLen)
		loss := lm.Loss(g, in, tg)
		if err := g.Err(); err != nil {
			t.Fatal(err)
		}
		sum += loss.Float64s()[0]
		g.Reset()
	}
	return sum / float64(n)
}

// TestEvalHuggingFace: hilbert eval -hf on shards of the fixtures' golden
// tokens gives the loss train.ValidationLoss gives on the loaded model
// (to the printed digits), and the reference loss within float32's 1e-5:
// PyTorch's where the validation window is a golden row exactly (a shard
// of row 0 and -seq-len 8; both rows cannot be windows, since
// data.Validation's consecutive windows share a token, the next-token
// target of one being the first input of the next, and row 0 ends in 56
// while row 1 starts with 25), and the float64 model's over two windows
// of both rows. A shard beyond the model's vocabulary and bad flags are
// errors naming the problem.
func TestEvalHuggingFace(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"gpt2", "llama"} {
		fixture := hfFixture(name)
		g := readHFGolden(t, fixture)
		// Reading PyTorch's logits as [rows, T, vocab] gives its loss.
		if whole := (g.rowLoss(0) + g.rowLoss(1)) / 2; math.Abs(whole-g.Loss64) > 1e-12*g.Loss64 {
			t.Fatalf("%s: the golden rows' losses average to %.15g, golden.json says %.15g", name, whole, g.Loss64)
		}
		both := append(append([]int32{}, g.Tokens[0]...), g.Tokens[1]...)
		for _, c := range []struct {
			name       string
			toks       []int32
			seqLen     int
			micro      string
			want       float64
			wantTokens int
			reference  string
		}{
			{"row 0", g.Tokens[0], 8, "1", g.rowLoss(0), 8, "PyTorch"},
			{"rows 0 and 1", both, 8, "2", float64WindowsLoss(t, fixture, both, 8), 16, "float64"},
		} {
			shard := filepath.Join(dir, name+strings.ReplaceAll(c.name, " ", "")+".bin")
			if err := data.WriteShard(shard, c.toks, false); err != nil {
				t.Fatal(err)
			}
			out := runCLI(t, "eval", "-hf", fixture, "-val", shard, "-seq-len", fmt.Sprint(c.seqLen), "-micro-batch", c.micro)
			got, tokens := evalLoss(t, out)
			if tokens != c.wantTokens {
				t.Errorf("%s %s: %d tokens, want %d", name, c.name, tokens, c.wantTokens)
			}
			if math.Abs(got-c.want) > 1e-5*c.want {
				t.Errorf("%s %s: eval -hf %.7f, %s %.7f", name, c.name, got, c.reference, c.want)
			}
			// The library's validation of the same model and windows.
			dev := cpu.New()
			m, _, err := hf.Load(dev, fixture, hf.Options{})
			if err != nil {
				t.Fatal(err)
			}
			var micro int
			fmt.Sscan(c.micro, &micro)
			v, err := data.Validation(shard, len(c.toks), c.seqLen, micro)
			if err != nil {
				t.Fatal(err)
			}
			lib, _, err := train.ValidationLoss(autograd.New(dev), m.(train.LanguageModel), v, 0)
			v.Close()
			if err != nil {
				t.Fatal(err)
			}
			if want := fmt.Sprintf("val loss %.6f over %d tokens", lib, c.wantTokens); !strings.Contains(out, want) {
				t.Errorf("%s %s: eval -hf printed %q; train.ValidationLoss gives %q", name, c.name, out, want)
			}
			t.Logf("%s %s: eval -hf %.6f, %s %.9f", name, c.name, got, c.reference, c.want)
		}
	}

	fixture := hfFixture("gpt2")
	outside := filepath.Join(dir, "outside.bin")
	if err := data.WriteShard(outside, []int32{1, 2, 3, 64, 5, 6, 7, 8, 9, 10}, false); err != nil {
		t.Fatal(err)
	}
	ok := filepath.Join(dir, "gpt2row0.bin")
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"-hf", fixture, "-val", outside}, []string{"vocabulary of 64", "got 64"}},
		{[]string{"-hf", fixture, "-val", ok, "-seq-len", "41"}, []string{"-seq-len 41", "context of 40"}},
		{[]string{"-hf", fixture}, []string{"-val"}},
		{[]string{"-hf", fixture, "-run", dir, "-val", ok}, []string{"not both"}},
		{[]string{"-run", dir, "-val", ok, "-seq-len", "8"}, []string{"-seq-len is for -hf"}},
		{[]string{"-hf", dir, "-val", ok}, []string{"config.json"}},
	} {
		var stdout, stderr bytes.Buffer
		code := Run(append([]string{"eval"}, c.args...), &stdout, &stderr)
		for _, w := range c.want {
			if code == 0 || !strings.Contains(stderr.String(), w) {
				t.Errorf("eval %q: exit %d, stderr %q; want a failure naming %q", c.args, code, stderr.String(), w)
			}
		}
	}
}

// initHFArgs trains a run of the Hugging Face directory dir on the tiny
// shards: 16-token sequences, 2 per update, validation every 2 updates.
func initHFArgs(runs, name, dir, trainShard, val string, extra ...string) []string {
	return append([]string{"train", "-quiet", "-runs", runs, "-name", name, "-init-hf", dir,
		"-train", trainShard, "-val", val, "-seq-len", "16", "-micro-batch", "2", "-batch-seqs", "2",
		"-schedule-steps", "6", "-val-every", "2", "-val-tokens", "200", "-diag-every", "2",
		"-panel-seqs", "2", "-panel-positions", "8", "-checkpoint-every", "2"}, extra...)
}

// TestTrainInitHF: hilbert train -init-hf DIR starts from the directory's
// model. At update 0 its validation loss is eval -hf's on the same shard
// and windows (so the weights are the directory's, for GPT-2 with its tied
// head untied and for a tied Qwen2), and training lowers it. A run
// stopped at update 2 and resumed ends bit for bit where the straight run
// does, also from a copy of the directory elsewhere; a resume from other
// weights is refused naming init_hf. Flags that would change the model,
// RowNorm on the tied head, and data beyond the model's vocabulary are
// refused naming the problem.
func TestTrainInitHF(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: trains")
	}
	dir := t.TempDir()
	trainShard, val := writeTinyShards(t, dir) // ids below 61: the fixtures' vocabulary is 64
	runs := filepath.Join(dir, "runs")
	for _, name := range []string{"gpt2", "qwen2"} {
		fixture := hfFixture(name)
		runCLI(t, initHFArgs(runs, name, fixture, trainShard, val, "-untie-head", "-steps", "6")...)
		recs := metricsLines(t, filepath.Join(runs, name, "metrics.jsonl"))
		first, last := recs[0], recs[len(recs)-1]
		if first["step"].(float64) != 0 || last["step"].(float64) != 6 {
			t.Fatalf("%s: records from update %v to %v, want 0 to 6", name, first["step"], last["step"])
		}
		out := runCLI(t, "eval", "-hf", fixture, "-val", val, "-seq-len", "16", "-micro-batch", "2", "-val-tokens", "200")
		if want := fmt.Sprintf("val loss %.6f over 192 tokens", first["val_loss"].(float64)); !strings.Contains(out, want) {
			t.Errorf("%s: update 0 logged %q; eval -hf printed %q", name, want, out)
		}
		if v0, v6 := first["val_loss"].(float64), last["val_loss"].(float64); !(v6 < v0) {
			t.Errorf("%s: val loss %.4f at update 0, %.4f at update 6: want a decrease", name, v0, v6)
		}
	}

	// Stopped at update 2 and resumed (from a copy of the directory: the
	// fingerprint is of the files, not the path).
	fixture := hfFixture("gpt2")
	runCLI(t, initHFArgs(runs, "stopped", fixture, trainShard, val, "-untie-head", "-steps", "2")...)
	moved := t.TempDir()
	copyDir(t, fixture, moved)
	runCLI(t, initHFArgs(runs, "stopped", moved, trainShard, val, "-untie-head", "-steps", "6", "-resume")...)
	a := metricsWithoutTimes(t, filepath.Join(runs, "gpt2", "metrics.jsonl"))
	b := metricsWithoutTimes(t, filepath.Join(runs, "stopped", "metrics.jsonl"))
	if strings.Join(a, "\n") != strings.Join(b, "\n") {
		t.Errorf("metrics of the straight and the resumed run differ:\n%s\n---\n%s", strings.Join(a, "\n"), strings.Join(b, "\n"))
	}
	for _, f := range []string{"model.safetensors", "optim.safetensors"} {
		x, err1 := os.ReadFile(filepath.Join(runs, "gpt2", "checkpoints", "step-0000006", f))
		y, err2 := os.ReadFile(filepath.Join(runs, "stopped", "checkpoints", "step-0000006", f))
		if err1 != nil || err2 != nil || !bytes.Equal(x, y) {
			t.Errorf("%s differs between the straight and the resumed run (%v, %v)", f, err1, err2)
		}
	}
	// The resumed run samples.
	if out := runCLI(t, "sample", "-run", filepath.Join(runs, "stopped"), "-prompt-ids", "1,2,3", "-tokens", "5", "-temperature", "0"); len(strings.Split(strings.TrimSpace(out), ",")) != 5 {
		t.Errorf("sample -run of the resumed run: %q, want 5 ids", out)
	}

	// Other initial weights: one float of the copy changed.
	st := filepath.Join(moved, "model.safetensors")
	raw, err := os.ReadFile(st)
	if err != nil {
		t.Fatal(err)
	}
	raw[len(raw)-4] ^= 1 // the last float's lowest mantissa byte
	if err := os.WriteFile(st, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := Run(initHFArgs(runs, "stopped", moved, trainShard, val, "-untie-head", "-steps", "8", "-resume"), &stdout, &stderr); code == 0 ||
		!strings.Contains(stderr.String(), "init_hf: checkpoint crc32c:") || !strings.Contains(stderr.String(), "differ from the checkpoint's in 1") {
		t.Errorf("resume from changed weights: exit %d: %s", code, stderr.String())
	}

	outside := filepath.Join(t.TempDir(), "outside.bin")
	toks := make([]int32, 400)
	for i := range toks {
		toks[i] = int32(i % 70)
	}
	if err := data.WriteShard(outside, toks, false); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		code int
		want []string
	}{
		{initHFArgs(runs, "tied", fixture, trainShard, val, "-steps", "2"), exitUsage, []string{"-untie-head", "-head adamw"}},
		{initHFArgs(runs, "preset", fixture, trainShard, val, "-preset", "gpt2-tiny", "-steps", "2"), exitUsage, []string{"-preset cannot change it"}},
		{initHFArgs(runs, "dim", fixture, trainShard, val, "-dim", "32", "-steps", "2"), exitUsage, []string{"-dim cannot change it"}},
		{initHFArgs(runs, "family", fixture, trainShard, val, "-model", "llama", "-steps", "2"), exitUsage, []string{"GPT2LMHeadModel", `model is "llama"`}},
		{initHFArgs(runs, "outside", fixture, outside, val, "-untie-head", "-steps", "2"), 1, []string{"vocab size 64", "got 64"}},
		{[]string{"train", "-runs", runs, "-name", "text", "-init-hf", fixture, "-untie-head", "-steps", "2"}, exitUsage, []string{"vocabulary of 64", "GPT-2's 50257"}},
		{[]string{"train", "-runs", runs, "-name", "none", "-init-hf", dir, "-steps", "2"}, exitUsage, []string{"config.json"}},
	} {
		stderr.Reset()
		code := Run(c.args, &stdout, &stderr)
		for _, w := range c.want {
			if code != c.code || !strings.Contains(stderr.String(), w) {
				t.Errorf("%q: exit %d, stderr %q; want exit %d naming %q", c.args[4:8], code, stderr.String(), c.code, w)
			}
		}
	}
}

// checkpointModel rebuilds the model of a run's latest checkpoint.
func checkpointModel(t *testing.T, run string) hf.Model {
	t.Helper()
	ck, err := train.OpenCheckpoint(filepath.Join(run, "checkpoints"))
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	m, err := ck.BuildModel(cpu.New())
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// logits32 are m's float32 logits of one sequence.
func logits32(t *testing.T, m hf.Model, ids []int32) []float32 {
	t.Helper()
	dev := cpu.New()
	g := autograd.New(dev)
	g.SetNoGrad(true)
	in, err := tensor.FromInt32(dev, ids, 1, len(ids))
	if err != nil {
		t.Fatal(err)
	}
	out := m.ForwardCached(g, in, nil)
	if err := g.Err(); err != nil {
		t.Fatal(err)
	}
	return out.Float32s()
}

// sameBits reports the first element where a and b differ, or -1.
func sameBits(a, b []float32) int {
	if len(a) != len(b) {
		return 0
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i
		}
	}
	return -1
}

// TestExport: hilbert export writes a run's latest checkpoint as a
// Hugging Face directory (a GPT-2 with its head untied and tied, a Qwen2
// with its q/k/v biases, and a GPT-2 of GPT-2's vocabulary trained on
// text, which gets GPT-2's tokenizer.json). hf.Load reads it back with
// every parameter and the logits bit-identical to the checkpoint's model
// in F32, and each parameter the checkpoint's rounded to nearest even in
// BF16 and F16; sample -hf on the export gives sample -run's greedy
// tokens (and text, through the exported tokenizer.json). The paper's
// transformer, a used -out and a bad -dtype are refused.
func TestExport(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: trains")
	}
	dir := t.TempDir()
	trainShard, val := writeTinyShards(t, dir)
	runs := filepath.Join(dir, "runs")
	text := filepath.Join(dir, "slice.txt")
	if err := os.WriteFile(text, opticksText(t)[:20_000], 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, arch string
		args       []string
		prompt     []string // sample's prompt flags
		tokenizer  bool
		dtypes     []string
	}{
		{"gpt2-untied", hf.GPT2Arch, initHFArgs(runs, "gpt2-untied", hfFixture("gpt2"), trainShard, val, "-untie-head", "-steps", "2"), []string{"-prompt-ids", "1,2,3"}, false, []string{"f32", "bf16", "f16"}},
		{"gpt2-tied", hf.GPT2Arch, initHFArgs(runs, "gpt2-tied", hfFixture("gpt2"), trainShard, val, "-head", "adamw", "-steps", "2"), []string{"-prompt-ids", "1,2,3"}, false, []string{"f32", "bf16", "f16"}},
		{"qwen2", hf.Qwen2Arch, initHFArgs(runs, "qwen2", hfFixture("qwen2"), trainShard, val, "-untie-head", "-steps", "2"), []string{"-prompt-ids", "1,2,3"}, false, []string{"f32", "bf16", "f16"}},
		{"gpt2-text", hf.GPT2Arch, []string{"train", "-quiet", "-runs", runs, "-name", "gpt2-text", "-model", "gpt2", "-preset", "gpt2-tiny", "-layers", "1", "-untie-head",
			"-text", text, "-text-val-tokens", "200", "-steps", "2", "-micro-batch", "2", "-batch-seqs", "2", "-val-every", "2", "-val-tokens", "100",
			"-diag-every", "2", "-panel-seqs", "2", "-panel-positions", "8"}, []string{"-prompt", "Light is"}, true, []string{"f32"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			runCLI(t, c.args...)
			run := filepath.Join(runs, c.name)
			want := checkpointModel(t, run)
			ids := []int32{1, 2, 3, 4, 5, 6, 7, 8}
			wantLogits := logits32(t, want, ids)
			for _, dt := range c.dtypes {
				out := filepath.Join(dir, c.name+"-"+dt)
				msg := runCLI(t, "export", "-run", run, "-out", out, "-dtype", dt)
				if !strings.Contains(msg, "as "+c.arch) {
					t.Errorf("export printed %q, want %s", msg, c.arch)
				}
				got, cfg, err := hf.Load(cpu.New(), out, hf.Options{})
				if err != nil {
					t.Fatal(err)
				}
				if cfg.Architecture != c.arch {
					t.Errorf("%s: config.json says %s, want %s", dt, cfg.Architecture, c.arch)
				}
				ws, gs := want.Parameters(), got.Parameters()
				if len(ws) != len(gs) {
					t.Fatalf("%s: %d parameters, the checkpoint's model %d", dt, len(gs), len(ws))
				}
				for i, p := range ws {
					w := p.Float32s()
					switch dt { // the rounding Save applies
					case "bf16":
						safetensors.DecodeBFloat16(w, safetensors.EncodeBFloat16(w))
					case "f16":
						safetensors.DecodeFloat16(w, safetensors.EncodeFloat16(w))
					}
					if gs[i].Name != p.Name {
						t.Fatalf("%s: parameter %d is %s, the checkpoint's %s", dt, i, gs[i].Name, p.Name)
					}
					if j := sameBits(gs[i].Float32s(), w); j >= 0 {
						t.Fatalf("%s: %s[%d] differs from the checkpoint's (rounded to %s)", dt, p.Name, j, dt)
					}
				}
				if dt != "f32" {
					continue
				}
				if j := sameBits(logits32(t, got, ids), wantLogits); j >= 0 {
					t.Errorf("logit %d of the export differs from the checkpoint model's", j)
				}
				_, err = os.Stat(filepath.Join(out, "tokenizer.json"))
				if (err == nil) != c.tokenizer {
					t.Errorf("tokenizer.json present %v, want %v", err == nil, c.tokenizer)
				}
				fromRun := runCLI(t, append([]string{"sample", "-run", run, "-tokens", "6", "-temperature", "0"}, c.prompt...)...)
				fromHF := runCLI(t, append([]string{"sample", "-hf", out, "-tokens", "6", "-temperature", "0"}, c.prompt...)...)
				if fromRun != fromHF || len(strings.TrimSpace(fromRun)) == 0 {
					t.Errorf("greedy sample -run %q, sample -hf of the export %q", fromRun, fromHF)
				}
				t.Logf("%s: %d parameters and %d logits bit-identical; greedy %q", c.arch, len(ws), len(wantLogits), strings.TrimSpace(fromHF))
			}
		})
	}

	// The paper's transformer, a used -out, a bad -dtype.
	cfg, paperRuns := tinyRun(t, "steps: 1\n")
	runCLI(t, "train", "-config", cfg, "-quiet")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-run", filepath.Join(paperRuns, "tiny"), "-out", filepath.Join(dir, "paper")}, "no Hugging Face architecture"},
		{[]string{"-run", filepath.Join(runs, "qwen2"), "-out", filepath.Join(dir, "qwen2-f32")}, "holds 2 files already"},
		{[]string{"-run", filepath.Join(runs, "qwen2"), "-out", filepath.Join(dir, "x"), "-dtype", "f8"}, `-dtype "f8"`},
		{[]string{"-run", filepath.Join(runs, "qwen2")}, "-out"},
		{[]string{"-run", filepath.Join(runs, "qwen2"), "-out", filepath.Join(dir, "y"), "-tokenizer", filepath.Join(dir, "gpt2-text-f32", "tokenizer.json")}, "50257 tokens, more than the model's vocabulary of 64"},
	} {
		var stdout, stderr bytes.Buffer
		if code := Run(append([]string{"export"}, c.args...), &stdout, &stderr); code == 0 || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("export %q: exit %d, stderr %q; want a failure naming %q", c.args, code, stderr.String(), c.want)
		}
	}
}
