package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hilbert-ml/hilbert/data"
)

// tinyRun writes tiny shards (vocabulary 61) and a config file for a
// one-block model on them, and returns the config's path and the runs
// folder.
func tinyRun(t *testing.T, extra string) (cfg, runs string) {
	t.Helper()
	dir := t.TempDir()
	train, val := writeTinyShards(t, dir)
	runs = filepath.Join(dir, "runs")
	cfg = filepath.Join(dir, "tiny.yaml")
	base := `name: tiny
runs: ` + runs + `
model: {layers: 1, dim: 64, context: 16, vocab: 61}
train: [` + train + `]
val: ` + val + `
micro_batch: 2
batch_seqs: 2
steps: 6
val_every: 3
val_tokens: 200
diag_every: 3
panel_seqs: 2
panel_positions: 8
`
	// extra's keys replace the base's.
	var lines []string
	for _, l := range strings.Split(base, "\n") {
		key, _, _ := strings.Cut(l, ":")
		if !strings.Contains(extra, "\n"+key+":") && !strings.HasPrefix(extra, key+":") {
			lines = append(lines, l)
		}
	}
	text := strings.Join(lines, "\n") + extra
	if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return cfg, runs
}

func metricsLines(t *testing.T, path string) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("%s: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

// parse runs the train flag parser as train does.
func parse(t *testing.T, args ...string) (*trainSetup, error) {
	t.Helper()
	timeout := time.Minute
	return parseTrainFlags("train", trainUsage, args, io.Discard, func(f *flag.FlagSet) { rankFlags(f, &timeout) })
}

// trainFlags returns train's flag set.
func trainFlags(t *testing.T) *flag.FlagSet {
	t.Helper()
	var fs *flag.FlagSet
	timeout := time.Minute
	if _, err := parseTrainFlags("train", trainUsage, []string{"-h"}, io.Discard, func(f *flag.FlagSet) { rankFlags(f, &timeout); fs = f }); err != nil || fs == nil {
		t.Fatalf("no flag set: %v", err)
	}
	return fs
}

// Out-of-range flag values are errors naming the flag and the value, from
// the command line and from a config file alike (before: ignored, or a
// panic for -panel-positions -5).
func TestBadValuesNameTheFlag(t *testing.T) {
	for _, c := range []struct{ flag, value string }{
		{"dim", "-5"}, {"dim", "0"}, {"layers", "-1"}, {"context", "0"}, {"threads", "0"}, {"threads", "-2"},
		{"head-lr", "-1"}, {"muon-lr", "NaN"}, {"embed-lr", "Inf"}, {"clip", "0"}, {"clip", "NaN"},
		{"val-every", "-3"}, {"val-every", "0"}, {"diag-every", "-1"}, {"log-every", "-1"}, {"checkpoint-every", "-1"},
		{"panel-seqs", "-1"}, {"panel-positions", "-5"}, {"steps", "0"}, {"warmup", "-1"}, {"micro-batch", "-8"},
		{"val-tokens", "-1"}, {"seq-len", "-1"}, {"block-rows", "-1"}, {"text-val-tokens", "0"}, {"schedule-steps", "-1"},
	} {
		_, err := parse(t, "-"+c.flag, c.value)
		want := fmt.Sprintf("invalid value %q for flag -%s", c.value, c.flag)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("-%s %s: got %v, want %q", c.flag, c.value, err, want)
		}
		cfg := filepath.Join(t.TempDir(), "c.yaml")
		key := strings.ReplaceAll(c.flag, "-", "_")
		os.WriteFile(cfg, []byte(key+": "+c.value+"\n"), 0o644)
		_, err = parse(t, "-config", cfg)
		want = fmt.Sprintf("%s: %q: want", key, c.value)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("config %s: %s: got %v, want %q", key, c.value, err, want)
		}
	}
	// Values the checks combine: a warmup as long as the run.
	if _, err := parse(t, "-steps", "10", "-warmup", "10"); err == nil || !strings.Contains(err.Error(), "warmup = 10") {
		t.Errorf("-warmup 10 -steps 10: %v", err)
	}
}

// Config keys are the flag names with _ for -: every flag but the
// command-line-only ones is a key, a file setting every one of them to its
// default is the default job, and a file without a model or data section
// keeps its keys and the CLI's defaults.
func TestConfigKeysAreTheFlags(t *testing.T) {
	fs := trainFlags(t)
	none, err := parse(t)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	fs.VisitAll(func(f *flag.Flag) {
		switch f.Name {
		case "config", "resume", "overwrite", "break-lock": // command line only
			return
		case "train", "val", "text", "warmup", "preset", "layers", "dim", "context", "threads": // unset by default
			return
		}
		fmt.Fprintf(&b, "%s: %q\n", strings.ReplaceAll(f.Name, "-", "_"), f.DefValue)
	})
	cfg := filepath.Join(t.TempDir(), "all.yaml")
	os.WriteFile(cfg, []byte(b.String()), 0o644)
	all, err := parse(t, "-config", cfg)
	if err != nil {
		t.Fatalf("a file of every flag's default:\n%s\n%v", b.String(), err)
	}
	if !reflect.DeepEqual(all.job, none.job) {
		t.Errorf("a file of the defaults changed the job:\n%+v\nwant\n%+v", all.job, none.job)
	}

	write := func(text string) string {
		p := filepath.Join(t.TempDir(), "c.yaml")
		os.WriteFile(p, []byte(text), 0o644)
		return p
	}
	// No model or data section: the keys still take effect.
	st, err := parse(t, "-config", write("steps: 3\nhead: adamw\nclip: 0.5\nruns: elsewhere\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c := st.job.Config; c.Steps != 3 || c.Head != "adamw" || c.ClipNorm != 0.5 || c.RunsDir != "elsewhere" || c.ValEvery != 40 {
		t.Errorf("steps 3, head adamw, clip 0.5, runs elsewhere: got %+v", c)
	}
	// A model section keeps the CLI's defaults (validation every 40 updates
	// over 16,384 tokens), and flags override the file.
	st, err = parse(t, "-config", write("model: {layers: 1, dim: 64, context: 16}\nsteps: 50\n"), "-steps", "4")
	if err != nil {
		t.Fatal(err)
	}
	c := st.job.Config
	if c.ValEvery != 40 || c.ValTokens != 16_384 || c.DiagEvery != 20 || c.Steps != 4 || c.Model.Dim != 64 || c.Model.MLPHidden != 256 || c.Model.HeadDim != 64 {
		t.Errorf("model section: got %+v", c)
	}
	// Lists and globs.
	dir := t.TempDir()
	for _, n := range []string{"a_train_1.bin", "a_train_2.bin", "v.bin"} {
		os.WriteFile(filepath.Join(dir, n), nil, 0o644)
	}
	st, err = parse(t, "-config", write("train: ["+filepath.Join(dir, "a_train_*.bin")+"]\nval: "+filepath.Join(dir, "v.bin")+"\n"))
	if err != nil || len(st.job.Config.TrainShards) != 2 {
		t.Errorf("train as a list of globs: %v %v", st, err)
	}

	for _, bad := range []struct{ text, want string }{
		{"stepz: 3\n", "stepz: unknown key"},
		{"runs_dir: x\n", "the key is runs"},
		{"val_shard: x\n", "the key is val"},
		{"clip_norm: 2\n", "the key is clip"},
		{"train_shards: [x]\n", "the key is train"},
		{"muon-lr: 0.1\n", "write muon_lr"},
		{"resume: true\n", "command line only"},
		{"steps: 3\nsteps: 4\n", "set twice"},
		{"steps:\n", "no value"},
		{"head: [a, b]\n", "want a single value"},
		{"model: {dim: 64, width: 3}\n", `unknown model field "width"`},
		{"model: {dim: -64}\n", "model.dim"},
		{"preset: cpu-128\nmodel: {dim: 64}\n", "not both"},
		{"- steps\n", "want a mapping"},
		{"steps: &s 5\nval_every: *s\n", "line 2: *s: YAML aliases are not read"},
		{"a: &a [x, x, x]\nb: &b [*a, *a, *a]\nc: [*b, *b, *b]\n", "line 2: *a: YAML aliases are not read"}, // an alias bomb's start
		{"model: {dim: &d 64, context: *d}\n", "*d: YAML aliases"},
	} {
		if _, err := parse(t, "-config", write(bad.text)); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%q: got %v, want %q", bad.text, err, bad.want)
		}
	}
}

// The train table of docs/running.md (moved there from the README) lists
// exactly the flags train has.
func TestReadmeListsTheTrainFlags(t *testing.T) {
	data, err := os.ReadFile("../../../docs/running.md")
	if err != nil {
		t.Fatal(err)
	}
	section := string(data)
	i := strings.Index(section, "## `hilbert train`")
	if i < 0 {
		t.Fatal("docs/running.md has no hilbert train section")
	}
	section = section[i:]
	if j := strings.Index(section[3:], "\n## "); j >= 0 {
		section = section[:j+3]
	}
	inReadme := map[string]bool{}
	for _, row := range regexp.MustCompile("(?m)^\\| (`-[^|]*)\\|").FindAllStringSubmatch(section, -1) {
		for _, f := range regexp.MustCompile("`-([a-z-]+)").FindAllStringSubmatch(row[1], -1) {
			inReadme[f[1]] = true
		}
	}
	inCode := map[string]bool{}
	trainFlags(t).VisitAll(func(f *flag.Flag) { inCode[f.Name] = true })
	var missing, extra []string
	for f := range inCode {
		if !inReadme[f] {
			missing = append(missing, f)
		}
	}
	for f := range inReadme {
		if !inCode[f] {
			extra = append(extra, f)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	if len(missing)+len(extra) > 0 {
		t.Errorf("docs/running.md's train table: missing %v, not flags %v", missing, extra)
	}
}

// The example config in the repository is the default job.
func TestExampleConfigIsTheDefaultJob(t *testing.T) {
	st, err := parse(t, "-config", "../../../configs/opticks.yaml")
	if err != nil {
		t.Fatal(err)
	}
	def, err := parse(t)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(st.job, def.job) {
		t.Errorf("configs/opticks.yaml gives\n%+v\nthe default job is\n%+v", st.job, def.job)
	}
	// And a flag still overrides it.
	st, err = parse(t, "-config", "../../../configs/opticks.yaml", "-head", "adamw")
	if err != nil || st.job.Config.Head != "adamw" {
		t.Errorf("-head adamw over the example: %v", err)
	}
}

// -warmup 0 means no warmup (the first update at the full rate); without
// it, the default 10%.
func TestWarmupZeroFlag(t *testing.T) {
	cfg, runs := tinyRun(t, "steps: 20\nval_every: 20\ndiag_every: 20\n")
	var stdout, stderr bytes.Buffer
	for _, c := range []struct {
		args  []string
		scale float64
	}{{[]string{"-warmup", "0", "-name", "w0"}, 1}, {[]string{"-name", "wdef"}, 0}} {
		args := append([]string{"train", "-config", cfg, "-quiet"}, c.args...)
		if code := Run(args, &stdout, &stderr); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, stderr.String())
		}
		m := metricsLines(t, filepath.Join(runs, c.args[len(c.args)-1], "metrics.jsonl"))
		if m[1]["step"] != 1.0 || m[1]["lr_scale"] != c.scale {
			t.Errorf("%v: update 1 is %v, want lr_scale %v", c.args, m[1], c.scale)
		}
	}
}

// Flags with no subcommand are train's, as docs/running.md's
// `go run ./cmd/hilbert -resume` has it; devices -h lists its usage.
func TestFlagsWithoutSubcommandAndHelp(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := Run([]string{"-resume", "-runs", t.TempDir(), "-name", "none"}, &stdout, &stderr)
	if code == 0 || strings.Contains(stderr.String(), "unknown subcommand") || !strings.Contains(stderr.String(), "hilbert train: run \"none\" has no checkpoint") {
		t.Errorf("hilbert -resume: exit %d, %s", code, stderr.String())
	}
	stderr.Reset()
	if code := Run([]string{"devices", "-h"}, &stdout, &stderr); code != 0 || !strings.Contains(stderr.String(), "usage: hilbert devices") {
		t.Errorf("devices -h: exit %d, %s", code, stderr.String())
	}
}

// Without a terminal the progress is plain lines, a persistent one at
// every validation, starting with update 0's loss.
func TestPlainProgressLines(t *testing.T) {
	cfg, _ := tinyRun(t, "")
	var stdout, stderr bytes.Buffer
	if code := Run([]string{"train", "-config", cfg}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	out := stderr.String()
	for _, want := range []string{"hilbert: update 0/6  val loss ", "(initial model)", "hilbert: update 3/6  val loss ", "hilbert: update 6/6  val loss "} {
		if !strings.Contains(out, want) {
			t.Errorf("stderr lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "\r") {
		t.Errorf("a progress bar on a non-terminal:\n%q", out)
	}
	if !strings.Contains(stdout.String(), "(from ") {
		t.Errorf("the final line lacks the starting loss: %s", stdout.String())
	}
}

// A resumed run must keep every setting that changes the numbers and its
// data: the refusal lists each difference. -steps may grow.
func TestResumeRefusesChangedSettings(t *testing.T) {
	full := opticksText(t)
	dir := t.TempDir()
	text, other := filepath.Join(dir, "a.txt"), filepath.Join(dir, "b.txt")
	os.WriteFile(text, full[:40_000], 0o644)
	os.WriteFile(other, full[40_000:80_000], 0o644)
	base := []string{"train", "-runs", filepath.Join(dir, "runs"), "-name", "r", "-layers", "1", "-dim", "64", "-context", "16",
		"-micro-batch", "2", "-batch-seqs", "2", "-val-tokens", "300", "-text-val-tokens", "400", "-panel-seqs", "2", "-quiet"}
	run := func(args ...string) (int, string) {
		var stdout, stderr bytes.Buffer
		code := Run(append(append([]string{}, base...), args...), &stdout, &stderr)
		return code, stderr.String()
	}
	if code, e := run("-text", text, "-steps", "2"); code != 0 {
		t.Fatalf("first run: %s", e)
	}
	runDir := filepath.Join(dir, "runs", "r")
	data := folderFiles(t, filepath.Join(runDir, "data"))
	code, e := run("-text", other, "-steps", "2", "-resume", "-clip", "0.5", "-muon-lr", "0.01", "-autocast", "bf16", "-val-tokens", "200")
	for _, want := range []string{"clip: checkpoint 1, this run 0.5", "muon_lr: checkpoint 0.02, this run 0.01",
		"autocast: checkpoint off, this run bf16", "val_tokens: checkpoint 300, this run 200", "train_data: checkpoint crc32c:"} {
		if code == 0 || !strings.Contains(e, want) {
			t.Errorf("changed resume: exit %d, stderr lacks %q:\n%s", code, want, e)
		}
	}
	// The refusal left the run's data as they were, byte for byte, and no
	// temporary folder.
	if after := folderFiles(t, filepath.Join(runDir, "data")); !reflect.DeepEqual(after, data) {
		t.Errorf("the refused resume changed the data folder: %d files before, %d after", len(data), len(after))
	}
	if left, _ := filepath.Glob(filepath.Join(runDir, ".data-*")); len(left) > 0 {
		t.Errorf("the refused resume left %v", left)
	}
	// Only the text changed: refused too, naming the data.
	code, e = run("-text", other, "-steps", "2", "-resume")
	if code == 0 || !strings.Contains(e, "train_data: checkpoint") || strings.Contains(e, "clip:") ||
		!strings.Contains(e, "not the checkpoint's data, so "+filepath.Join(runDir, "data")+" is left as it is") {
		t.Errorf("resume with other text: exit %d: %s", code, e)
	}
	if after := folderFiles(t, filepath.Join(runDir, "data")); !reflect.DeepEqual(after, data) {
		t.Errorf("the refused resume (other text only) changed the data folder")
	}
	code, e = run("-text", text, "-steps", "4", "-resume", "-val-every", "1", "-log-every", "2")
	if code != 0 || !strings.Contains(e, "resuming r at update 2 of 4; the schedule ends at update 2") {
		t.Fatalf("extending the run: exit %d: %s", code, e)
	}
	m := metricsLines(t, filepath.Join(dir, "runs", "r", "metrics.jsonl"))
	if len(m) != 5 || m[4]["step"] != 4.0 || m[3]["lr_scale"] != 0.1 {
		t.Errorf("metrics after the extension: %v", m)
	}
}

// folderFiles returns the contents of every file in dir, by name.
func folderFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) == 0 {
		t.Fatalf("%s: %d files, %v", dir, len(entries), err)
	}
	out := map[string]string{}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = string(b)
	}
	return out
}

// A stale lock (its holder died) is reported with -break-lock, which takes
// it over.
func TestStaleLockFromTheCLI(t *testing.T) {
	cfg, runs := tinyRun(t, "")
	dead := exec.Command(os.Args[0], "-test.run=^$")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	os.MkdirAll(filepath.Join(runs, "tiny"), 0o755)
	rec := fmt.Sprintf(`{"pid":%d,"host":%q,"started":"2026-01-02T03:04:05Z","command":"hilbert train"}`, dead.Process.Pid, host)
	os.WriteFile(filepath.Join(runs, "tiny", "run.lock"), []byte(rec), 0o644)
	var stdout, stderr bytes.Buffer
	code := Run([]string{"train", "-config", cfg, "-quiet"}, &stdout, &stderr)
	if code == 0 || !strings.Contains(stderr.String(), "stale lock") || !strings.Contains(stderr.String(), "-break-lock") ||
		!strings.Contains(stderr.String(), "is no longer running") {
		t.Fatalf("stale lock: exit %d: %s", code, stderr.String())
	}
	if _, err := os.Stat(filepath.Join(runs, "tiny", "metrics.jsonl")); err == nil {
		t.Error("the refused run wrote metrics")
	}
	stderr.Reset()
	if code := Run([]string{"train", "-config", cfg, "-quiet", "-break-lock"}, &stdout, &stderr); code != 0 ||
		!strings.Contains(stderr.String(), fmt.Sprintf("took over the stale lock of pid %d", dead.Process.Pid)) {
		t.Fatalf("-break-lock: exit %d: %s", code, stderr.String())
	}
}

// TestHilbertProcess is the child process of the tests that run hilbert
// as a program (signals, exit status): it runs main with the arguments in
// HILBERT_TEST_ARGS.
func TestHilbertProcess(t *testing.T) {
	args := os.Getenv("HILBERT_TEST_ARGS")
	if args == "" {
		t.Skip("the child process of TestSignalsCheckpointAndExit130")
	}
	os.Exit(Run(strings.Split(args, "\x1f"), os.Stdout, os.Stderr))
}

// SIGINT, SIGTERM and SIGHUP each stop a run with a checkpoint and exit
// status 130, even with stdout and stderr broken pipes (| tee killed by
// the same Ctrl-C); meanwhile a second process on the run is refused; the
// run resumes.
func TestSignalsCheckpointAndExit130(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts hilbert processes")
	}
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP} {
		t.Run(sig.String(), func(t *testing.T) {
			cfg, runs := tinyRun(t, "")
			args := []string{"train", "-config", cfg, "-steps", "1000000", "-checkpoint-every", "0", "-val-every", "100000", "-diag-every", "100000"}
			cmd := exec.Command(os.Args[0], "-test.run=^TestHilbertProcess$")
			cmd.Env = append(os.Environ(), "HILBERT_TEST_ARGS="+strings.Join(args, "\x1f"))
			outR, outW, _ := os.Pipe()
			errR, errW, _ := os.Pipe()
			cmd.Stdout, cmd.Stderr = outW, errW
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			outW.Close()
			errW.Close()
			var childErr bytes.Buffer
			drained := make(chan struct{})
			go func() {
				sc := bufio.NewScanner(errR)
				for sc.Scan() {
					childErr.WriteString(sc.Text() + "\n")
				}
				close(drained)
			}()
			metrics := filepath.Join(runs, "tiny", "metrics.jsonl")
			deadline := time.Now().Add(2 * time.Minute)
			for {
				if b, err := os.ReadFile(metrics); err == nil && bytes.Count(b, []byte("\n")) >= 4 {
					break
				}
				if time.Now().After(deadline) {
					cmd.Process.Kill()
					t.Fatalf("the child logged nothing:\n%s", childErr.String())
				}
				time.Sleep(20 * time.Millisecond)
			}
			// The run is locked: a second process on it is refused.
			var stdout, stderr bytes.Buffer
			if code := Run([]string{"train", "-config", cfg, "-resume", "-quiet"}, &stdout, &stderr); code == 0 ||
				!strings.Contains(stderr.String(), fmt.Sprintf("in use by pid %d", cmd.Process.Pid)) {
				t.Errorf("a second process on the run: exit %d: %s", code, stderr.String())
			}
			// Both pipes break, then the signal comes.
			outR.Close()
			errR.Close()
			<-drained
			cmd.Process.Signal(sig)
			err := cmd.Wait()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != exitInterrupted {
				t.Fatalf("%v: exit %v, want status %d\n%s", sig, err, exitInterrupted, childErr.String())
			}
			var ptr struct{ Step int }
			b, err := os.ReadFile(filepath.Join(runs, "tiny", "checkpoints", "latest.json"))
			if err != nil || json.Unmarshal(b, &ptr) != nil || ptr.Step < 3 {
				t.Fatalf("no checkpoint after %v: %s %v", sig, b, err)
			}
			if b, _ := os.ReadFile(filepath.Join(runs, "tiny", "run.lock")); len(b) != 0 {
				t.Errorf("the interrupted run left its lock: %s", b)
			}
			// It resumes where it stopped (here, to two updates more).
			stderr.Reset()
			steps := fmt.Sprint(ptr.Step + 2)
			if code := Run([]string{"train", "-config", cfg, "-resume", "-quiet", "-steps", steps, "-checkpoint-every", "0"}, &stdout, &stderr); code != 0 {
				t.Fatalf("resume: exit %d: %s", code, stderr.String())
			}
			if m := metricsLines(t, metrics); len(m) != ptr.Step+3 {
				t.Errorf("%d metrics lines after resuming at %d to %s", len(m), ptr.Step, steps)
			}
		})
	}
}

// writeTinyShards writes a training shard of 4,000 and a validation shard
// of 600 tokens of a vocabulary of 61 (a noisy ramp) into dir.
func writeTinyShards(t *testing.T, dir string) (train, val string) {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	tokens := func(n int) []int32 {
		out := make([]int32, n)
		for i := range out {
			out[i] = int32((i*5 + rng.IntN(3)) % 61)
		}
		return out
	}
	train, val = filepath.Join(dir, "t_train.bin"), filepath.Join(dir, "t_val.bin")
	if err := data.WriteShard(train, tokens(4000), false); err != nil {
		t.Fatal(err)
	}
	if err := data.WriteShard(val, tokens(600), false); err != nil {
		t.Fatal(err)
	}
	return train, val
}

// Usage errors (an unknown or bad flag, a bad value, a bad config file,
// flags that do not go together) exit 2 with the error and a one-line
// hint, not the whole usage; -h prints the usage and exits 0; other errors
// exit 1.
func TestUsageErrorsExit2(t *testing.T) {
	dir := t.TempDir()
	badConfig := filepath.Join(dir, "bad.yaml")
	os.WriteFile(badConfig, []byte("stepz: 3\n"), 0o644)
	runs := filepath.Join(dir, "runs")
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"train", "-dim", "-5"}, 2, `hilbert train: invalid value "-5" for flag -dim: want a positive integer`},
		{[]string{"train", "-no-such-flag"}, 2, "flag provided but not defined: -no-such-flag"},
		{[]string{"-steps"}, 2, "flag needs an argument: -steps"},
		{[]string{"train", "-config", badConfig}, 2, "stepz: unknown key"},
		{[]string{"train", "-config", filepath.Join(dir, "none.yaml")}, 2, "-config: open"},
		{[]string{"train", "-resume", "-overwrite"}, 2, "-resume and -overwrite: pick one"},
		{[]string{"train", "-steps", "10", "-warmup", "10"}, 2, "warmup = 10"},
		{[]string{"train", "extra"}, 2, `unexpected arguments ["extra"]`},
		{[]string{"train", "-name", ""}, 2, "-name is empty: want a folder name"},
		{[]string{"train", "-runs", " ", "-name", "x"}, 2, "-runs is empty: want the folder"},
		{[]string{"train", "-comm-timeout", "-1s"}, 2, `invalid value "-1s" for flag -comm-timeout: want a duration > 0`},
		{[]string{"train", "-comm-timeout", "0"}, 2, "want a duration > 0"},
		{[]string{"compare", "-head-optimizers", "sgd"}, 2, `-head-optimizers "sgd": "sgd": want adamw or rownorm`},
		{[]string{"bench", "gemm", "-reps", "0"}, 2, "want reps >= 1"},
		{[]string{"prepare"}, 2, "-out and at least one input are required"},
		{[]string{"sample", "-top-p", "2"}, 2, "for flag -top-p"},
		{[]string{"train", "-h"}, 0, "usage: hilbert train [flags]"},
		{[]string{"train", "-resume", "-runs", runs, "-name", "none"}, 1, `run "none" has no checkpoint`},
	} {
		var stdout, stderr bytes.Buffer
		code := Run(c.args, &stdout, &stderr)
		e := stderr.String()
		if code != c.code || !strings.Contains(e, c.want) {
			t.Errorf("%q: exit %d, want %d and %q:\n%s", c.args, code, c.code, c.want, e)
			continue
		}
		cmd := c.args[0]
		if strings.HasPrefix(cmd, "-") {
			cmd = "train"
		} else if cmd == "bench" {
			cmd = "bench gemm"
		}
		hint := fmt.Sprintf("run 'hilbert %s -h' for the flags\n", cmd)
		switch {
		case code == 2 && (!strings.HasSuffix(e, hint) || strings.Count(e, "\n") != 2):
			t.Errorf("%q: want the error and the hint %q, two lines:\n%s", c.args, hint, e)
		case code == 0 && !strings.Contains(e, "-micro-batch"):
			t.Errorf("%q: -h does not list the flags:\n%s", c.args, e)
		}
	}
}

// The message of an interrupted run says how to continue it: with
// -resume, unless the command already has it.
func TestInterruptedMessage(t *testing.T) {
	cfg, _ := tinyRun(t, "")
	var stdout, stderr bytes.Buffer
	if code := Run([]string{"train", "-config", cfg, "-quiet", "-steps", "2"}, &stdout, &stderr); code != 0 {
		t.Fatalf("first run: exit %d: %s", code, stderr.String())
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel() // as a signal before the first update
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-config", cfg, "-quiet", "-resume", "-steps", "4"}, "tiny interrupted at update 2; checkpoint written. Continue with the same command"},
		{[]string{"-config", cfg, "-quiet", "-name", "other"}, "other interrupted at update 0; checkpoint written. Continue with the same command and -resume"},
	} {
		st, err := parse(t, c.args...)
		if err != nil {
			t.Fatal(err)
		}
		lock, err := lockRun(st, st.job.Config, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		_, err = trainOne(cancelled, st, st.job.Config, lock, st.resume, nil, io.Discard, io.Discard)
		var ie *interruptedError
		if !errors.As(err, &ie) || !strings.HasSuffix(err.Error(), c.want) {
			t.Errorf("%q: %v, want an interruption ending %q", c.args, err, c.want)
		}
	}
}
