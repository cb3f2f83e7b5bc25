package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/safetensors"
)

// In a process started by mpirun (or another test), cmdArgsEnv holds the
// JSON list of arguments TestMain runs hilbert with instead of the tests;
// cmdPIDDirEnv, when set, is where each rank writes its pid as rank-N.pid.
const (
	cmdArgsEnv   = "HILBERT_CMD_TEST_ARGS"
	cmdPIDDirEnv = "HILBERT_CMD_TEST_PIDS"
)

func TestMain(m *testing.M) {
	if raw := os.Getenv(cmdArgsEnv); raw != "" {
		var args []string
		if err := json.Unmarshal([]byte(raw), &args); err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", cmdArgsEnv, err)
			os.Exit(2)
		}
		if dir := os.Getenv(cmdPIDDirEnv); dir != "" {
			rank := os.Getenv("OMPI_COMM_WORLD_RANK")
			os.WriteFile(filepath.Join(dir, "rank-"+rank+".pid"), []byte(strconv.Itoa(os.Getpid())), 0o644)
		}
		os.Exit(Run(args, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// mpiHilbert runs hilbert with args as np ranks under mpirun (the test
// binary in TestMain's worker mode), returning the output and the error;
// it skips when mpirun is not installed. extraEnv are NAME=VALUE pairs for
// every rank.
func mpiHilbert(t *testing.T, ctx context.Context, np int, args []string, extraEnv ...string) *exec.Cmd {
	t.Helper()
	bin, err := exec.LookPath("mpirun")
	if err != nil {
		t.Skip("mpirun not on PATH: install openmpi-bin (and libopenmpi3) to run the data-parallel tests")
	}
	raw, _ := json.Marshal(args)
	mpiArgs := []string{"--oversubscribe", "--allow-run-as-root", "-np", strconv.Itoa(np), "-x", cmdArgsEnv + "=" + string(raw)}
	for _, e := range extraEnv {
		mpiArgs = append(mpiArgs, "-x", e)
	}
	cmd := exec.CommandContext(ctx, bin, append(mpiArgs, os.Args[0])...)
	// One thread per rank: two ranks share the CI machine's two cores.
	cmd.Env = append(os.Environ(), "GOMAXPROCS=1", "OMPI_MCA_rmaps_base_oversubscribe=1")
	return cmd
}

// mpmdHilbert runs hilbert under mpirun as one rank per argument list (an
// MPMD launch: rank r gets perRank[r]); it skips when mpirun is not
// installed.
func mpmdHilbert(t *testing.T, ctx context.Context, perRank ...[]string) *exec.Cmd {
	t.Helper()
	bin, err := exec.LookPath("mpirun")
	if err != nil {
		t.Skip("mpirun not on PATH: install openmpi-bin (and libopenmpi3) to run the data-parallel tests")
	}
	args := []string{"--oversubscribe", "--allow-run-as-root"}
	for r, a := range perRank {
		if r > 0 {
			args = append(args, ":")
		}
		raw, _ := json.Marshal(a)
		args = append(args, "-np", "1", "-x", cmdArgsEnv+"="+string(raw), os.Args[0])
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "GOMAXPROCS=1")
	return cmd
}

func runMPI(t *testing.T, np int, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := mpiHilbert(t, ctx, np, args).CombinedOutput()
	if err != nil {
		t.Fatalf("mpirun -np %d hilbert %s: %v\n%s", np, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// runLosses reads a run's training losses by update.
func runLosses(t *testing.T, dir string) map[int]float64 {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]float64{}
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		var r struct {
			Step int      `json:"step"`
			Loss *float64 `json:"loss"`
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		if r.Loss != nil {
			out[r.Step] = *r.Loss
		}
	}
	return out
}

// runWeights reads the parameters of a run's latest checkpoint.
func runWeights(t *testing.T, dir string) map[string][]float32 {
	t.Helper()
	ptr, err := os.ReadFile(filepath.Join(dir, "checkpoints", "latest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var latest struct{ Dir string }
	json.Unmarshal(ptr, &latest)
	f, err := safetensors.Open(filepath.Join(dir, "checkpoints", latest.Dir, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]float32{}
	for _, info := range f.Tensors() {
		n := 1
		for _, d := range info.Shape {
			n *= d
		}
		v := make([]float32, n)
		if err := f.ReadFloat32(info.Name, info.Shape, v); err != nil {
			t.Fatal(err)
		}
		out[info.Name] = v
	}
	return out
}

// compareRuns checks two runs' losses (relative tol) and final weights
// (absolute tol; 0 asks for bit equality).
func compareRuns(t *testing.T, what, a, b string, lossTol, weightTol float64) {
	t.Helper()
	la, lb := runLosses(t, a), runLosses(t, b)
	if len(la) == 0 || len(la) != len(lb) {
		t.Fatalf("%s: %d and %d logged losses", what, len(la), len(lb))
	}
	for step, x := range la {
		if y := lb[step]; math.Abs(x-y) > lossTol*math.Abs(x) {
			t.Errorf("%s: update %d: loss %.9g vs %.9g", what, step, x, y)
		}
	}
	wa, wb := runWeights(t, a), runWeights(t, b)
	worst, where := 0.0, ""
	for name, x := range wa {
		y, ok := wb[name]
		if !ok || len(y) != len(x) {
			t.Fatalf("%s: parameter %s missing or of another size", what, name)
		}
		for i := range x {
			d := math.Abs(float64(x[i] - y[i]))
			if weightTol == 0 && math.Float32bits(x[i]) != math.Float32bits(y[i]) {
				t.Fatalf("%s: %s[%d]: %v vs %v; want bit equality", what, name, i, x[i], y[i])
			}
			if d > worst {
				worst, where = d, fmt.Sprintf("%s[%d]", name, i)
			}
		}
	}
	t.Logf("%s: largest weight difference %.3g at %s", what, worst, where)
	if worst > weightTol && weightTol > 0 {
		t.Errorf("%s: weights differ by %.3g at %s; tolerance %.3g", what, worst, where, weightTol)
	}
}

// copyDir copies a run folder (without its lock).
func copyDir(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.Walk(from, func(path string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, path)
		dst := filepath.Join(to, rel)
		if info.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		if info.Name() == "run.lock" {
			return nil
		}
		src, err := os.Open(path)
		if err != nil {
			return err
		}
		defer src.Close()
		out, err := os.Create(dst)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, src); err != nil {
			return err
		}
		return out.Close()
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestDataParallel trains the tiny model on 2 ranks and checks it against
// 1 rank with the same global batch (4 sequences: 1 rank x 2 x 2
// accumulation, 2 ranks x 2 x 1): the same losses to float32 rounding
// (1e-5 relative: only the order of summing the two micro-batches'
// gradients and losses differs) and the same weights to 1e-5 after six
// updates (AdamW and RowNorm normalise the steps, so a rounding
// difference in a near-zero gradient moves a weight by up to a learning
// rate; here the largest difference is about 1e-7). A 2-rank run stopped at
// update 3 and resumed on 2 ranks equals the uninterrupted one bit for
// bit; resumed on 1 rank it equals it to the same tolerance.
func TestDataParallel(t *testing.T) {
	cfg, runs := tinyRun(t, "micro_batch: 2\nbatch_seqs: 4\ncheckpoint_every: 3\n")
	args := func(name string, more ...string) []string {
		return append([]string{"train", "-config", cfg, "-quiet", "-name", name}, more...)
	}
	var stdout, stderr strings.Builder
	if code := Run(args("one"), &stdout, &stderr); code != 0 {
		t.Fatalf("1 rank: exit %d\n%s", code, stderr.String())
	}
	out := runMPI(t, 2, args("two")...)
	if !strings.Contains(out, "data-parallel over 2 ranks") || strings.Count(out, "run two:") != 1 {
		t.Errorf("2 ranks: want one announcement and one summary line (rank 0's):\n%s", out)
	}
	compareRuns(t, "1 rank vs 2 ranks", filepath.Join(runs, "one"), filepath.Join(runs, "two"), 1e-5, 1e-5)

	runMPI(t, 2, args("half", "-steps", "3", "-schedule-steps", "6")...)
	copyDir(t, filepath.Join(runs, "half"), filepath.Join(runs, "half1"))
	runMPI(t, 2, args("half", "-steps", "6", "-resume")...)
	compareRuns(t, "2 ranks resumed on 2 vs uninterrupted", filepath.Join(runs, "two"), filepath.Join(runs, "half"), 0, 0)
	// The thread count is a setting of the run (the ranks ran one each);
	// -threads sets the process's, so it is put back for the other tests.
	defer cpu.SetThreads(0)
	if code := Run(args("half1", "-steps", "6", "-resume", "-threads", "1"), &stdout, &stderr); code != 0 {
		t.Fatalf("resume on 1 rank: exit %d\n%s", code, stderr.String())
	}
	compareRuns(t, "2 ranks resumed on 1 vs uninterrupted", filepath.Join(runs, "two"), filepath.Join(runs, "half1"), 1e-5, 1e-5)
}

// TestDataParallelBadSplit checks the clear error of a global batch that
// does not split over the ranks.
func TestDataParallelBadSplit(t *testing.T) {
	cfg, _ := tinyRun(t, "micro_batch: 2\nbatch_seqs: 2\n")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := mpiHilbert(t, ctx, 2, []string{"train", "-config", cfg, "-quiet"}).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "do not split over 2 ranks") {
		t.Fatalf("mpirun: %v; want a failure naming the split:\n%s", err, out)
	}
}

// TestDataParallelRankDies kills rank 1 in the middle of a run and checks
// that the job stops, with an error that names the rank, within a bounded
// time (mpirun notices the death and stops rank 0).
func TestDataParallelRankDies(t *testing.T) {
	cfg, _ := tinyRun(t, "micro_batch: 2\nbatch_seqs: 4\nsteps: 100000\ncheckpoint_every: 0\nval_every: 100000\ndiag_every: 100000\n")
	pids := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := mpiHilbert(t, ctx, 2, []string{"train", "-config", cfg, "-quiet"}, cmdPIDDirEnv+"="+pids)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var pid int
	for pid == 0 && ctx.Err() == nil {
		if raw, err := os.ReadFile(filepath.Join(pids, "rank-1.pid")); err == nil {
			pid, _ = strconv.Atoi(string(raw))
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(3 * time.Second) // into the training loop
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	err := cmd.Wait()
	took := time.Since(killed)
	if err == nil {
		t.Fatalf("the job succeeded although rank 1 was killed:\n%s", out.String())
	}
	const bound = 30 * time.Second
	if took > bound {
		t.Errorf("the job took %v to stop after rank 1 died; want at most %v", took, bound)
	}
	if !strings.Contains(out.String(), "rank 1") {
		t.Errorf("the output does not name rank 1:\n%s", out.String())
	}
	t.Logf("stopped %v after rank 1 died", took.Round(time.Millisecond))
}

// TestDataParallelCtrlC sends SIGINT to mpirun (a terminal's Ctrl-C, which
// reaches only mpirun) in the middle of a 2-rank run without periodic
// checkpoints and checks that the ranks write the checkpoint before
// mpirun's SIGTERM, odls_base_sigkill_timeout (here 5 s) after its
// SIGCONT, and so before its SIGKILL another 5 s later (by default each is
// 1 s, which a large model's checkpoint may not fit in: docs/distributed.md's
// --mca setting).
func TestDataParallelCtrlC(t *testing.T) {
	cfg, runs := tinyRun(t, "micro_batch: 2\nbatch_seqs: 4\nsteps: 100000\ncheckpoint_every: 0\nval_every: 100000\ndiag_every: 100000\n")
	pids := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := mpiHilbert(t, ctx, 2, []string{"train", "-config", cfg, "-quiet"}, cmdPIDDirEnv+"="+pids)
	const grace = 5 * time.Second
	cmd.Env = append(cmd.Env, fmt.Sprintf("OMPI_MCA_odls_base_sigkill_timeout=%d", int(grace.Seconds())))
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for ctx.Err() == nil {
		if _, err := os.Stat(filepath.Join(pids, "rank-1.pid")); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(3 * time.Second) // into the training loop
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	sent := time.Now()
	latest := filepath.Join(runs, "tiny", "checkpoints", "latest.json")
	var written time.Duration
	for written == 0 && ctx.Err() == nil {
		if _, err := os.Stat(latest); err == nil {
			written = time.Since(sent)
		}
		time.Sleep(20 * time.Millisecond)
		if cmd.ProcessState != nil {
			break
		}
	}
	cmd.Wait()
	if written == 0 {
		t.Fatalf("no checkpoint after mpirun's Ctrl-C:\n%s", out.String())
	}
	if written >= grace {
		t.Errorf("the checkpoint came %v after the Ctrl-C, after mpirun's SIGTERM (%v); want it on mpirun's first notice", written, grace)
	}
	if !strings.Contains(out.String(), "checkpoint written") {
		t.Errorf("rank 0 did not report its checkpoint:\n%s", out.String())
	}
	t.Logf("checkpoint %v after the Ctrl-C", written.Round(time.Millisecond))
}

// TestDataParallelMismatch starts two ranks with different seeds (an MPMD
// launch, one app context each) and checks that both refuse to train,
// naming the setting's check and the rank that differs.
func TestDataParallelMismatch(t *testing.T) {
	cfg, _ := tinyRun(t, "micro_batch: 2\nbatch_seqs: 4\n")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	train := []string{"train", "-config", cfg, "-quiet", "-seed"}
	out, err := mpmdHilbert(t, ctx, append(train, "1"), append(train[:len(train):len(train)], "2")).CombinedOutput()
	if err == nil {
		t.Fatalf("ranks with different seeds trained:\n%s", out)
	}
	for _, want := range []string{"ranks [1] have a different run configuration", "differing: seed"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "fingerprints") {
			t.Log(line)
		}
	}
}

// TestDataParallelResumeOneRank resumes a 2-rank run with -resume given
// to one rank only (an MPMD launch): with it on rank 0, rank 1 would train
// from the initial weights beside it; with it on rank 1, rank 0 finds the
// checkpoint it was not told to resume. Both launches must fail promptly
// (well inside -comm-timeout) with an error that says what to do, and
// leave the checkpoint as it was.
func TestDataParallelResumeOneRank(t *testing.T) {
	cfg, runs := tinyRun(t, "micro_batch: 2\nbatch_seqs: 4\ncheckpoint_every: 3\n")
	base := []string{"train", "-config", cfg, "-quiet", "-comm-timeout", "2m"}
	runMPI(t, 2, append(base, "-steps", "3", "-schedule-steps", "6")...)
	latest := filepath.Join(runs, "tiny", "checkpoints", "latest.json")
	before, err := os.ReadFile(latest)
	if err != nil {
		t.Fatal(err)
	}
	resume := append(base[:len(base):len(base)], "-steps", "6", "-resume")
	fresh := append(base[:len(base):len(base)], "-steps", "6")
	for _, tc := range []struct {
		name  string
		ranks [][]string
		want  string
	}{
		{"rank 0 only", [][]string{resume, fresh}, "start every rank with -resume, or none"},
		{"rank 1 only", [][]string{fresh, resume}, "pass -resume to continue it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			start := time.Now()
			out, err := mpmdHilbert(t, ctx, tc.ranks...).CombinedOutput()
			if err == nil {
				t.Fatalf("-resume on %s trained:\n%s", tc.name, out)
			}
			if ctx.Err() != nil {
				t.Fatalf("-resume on %s hung for %v:\n%s", tc.name, time.Since(start), out)
			}
			if !strings.Contains(string(out), tc.want) {
				t.Errorf("output lacks %q:\n%s", tc.want, out)
			}
			if now, _ := os.ReadFile(latest); string(now) != string(before) {
				t.Errorf("latest.json changed: %s, was %s", now, before)
			}
		})
	}
}

// TestLaunchRanks checks the communicator a plain start gets (one rank)
// and the clear error of a torchrun-style launch on the CPU.
func TestLaunchRanks(t *testing.T) {
	for _, v := range []string{"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"} {
		t.Setenv(v, "")
		os.Unsetenv(v)
	}
	c, err := launchRanks(cpu.New(), time.Second)
	if err != nil || c.Size() != 1 || c.Rank() != 0 {
		t.Fatalf("plain start: %v, %v; want one rank", c, err)
	}
	c.Close()
	t.Setenv("RANK", "0")
	t.Setenv("WORLD_SIZE", "2")
	t.Setenv("MASTER_ADDR", "127.0.0.1")
	t.Setenv("MASTER_PORT", "29500")
	if _, err := launchRanks(cpu.New(), time.Second); err == nil || !strings.Contains(err.Error(), "needs -device cuda") {
		t.Errorf("torchrun launch on the CPU: %v; want the error naming -device cuda", err)
	}
}
