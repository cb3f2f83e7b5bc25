package dist

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/cpu"
)

// workerEnv selects, in a process started by mpirun, which worker body the
// re-executed test binary runs instead of the tests.
const workerEnv = "HILBERT_DIST_TEST_WORKER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(workerEnv); mode != "" {
		os.Exit(runWorker(mode))
	}
	os.Exit(m.Run())
}

// runWorker is the body of one rank; it returns the process's exit code.
func runWorker(mode string) int {
	timeout := 0 * time.Second
	if mode == "hang" {
		timeout = 2 * time.Second
	}
	chunk := 0
	switch mode {
	case "collectives":
		chunk = 300 // 1000-element buffers: chunks of 300, 300, 300 and 100
	case "bench":
		chunk, _ = strconv.Atoi(os.Getenv("HILBERT_DIST_CHUNK"))
	}
	c, err := NewMPI(MPIOptions{Timeout: timeout, Chunk: chunk})
	if err != nil {
		fmt.Println("worker:", err)
		return 2
	}
	switch mode {
	case "collectives":
		var l Communicator
		if l, err = Launch(MPIOptions{}); err == nil {
			if _, ok := l.(*MPIComm); !ok || l.Size() != c.Size() || l.Rank() != c.Rank() {
				err = fmt.Errorf("Launch under mpirun returned %T rank %d of %d, expected the MPI communicator", l, l.Rank(), l.Size())
			} else {
				err = l.Close()
			}
		}
		if err == nil {
			err = checkCollectives(c)
		}
	case "die", "exit", "hang":
		err = loseRank(c, mode)
	case "bench":
		err = benchAllReduce(c, os.Stdout)
		if err == nil {
			err = benchReducer(c, os.Stdout)
		}
	case "reducer":
		err = checkReducer(c)
	case "muon":
		err = checkShardedMuon(c)
	case "muonbench":
		err = benchShardedMuon(c, os.Stdout)
	case "stepbench":
		err = benchStep(c, os.Stdout)
	default:
		err = fmt.Errorf("unknown worker mode %q", mode)
	}
	if err != nil {
		fmt.Printf("rank %d: FAIL: %v\n", c.Rank(), err)
		return 3
	}
	if err := c.Close(); err != nil {
		fmt.Printf("rank %d: FAIL: %v\n", c.Rank(), err)
		return 4
	}
	fmt.Printf("ok rank %d of %d\n", c.Rank(), c.Size())
	return 0
}

// checkCollectives compares every collective against values computed
// independently in float64 from the ranks' known inputs.
func checkCollectives(c *MPIComm) error {
	r, p := c.Rank(), c.Size()
	if p < 2 {
		return fmt.Errorf("size %d, expected at least 2 ranks", p)
	}
	const n = 1000
	for _, op := range []Op{Sum, Average} {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32((r+1)*i + r)
		}
		if err := c.AllReduce(cpu.NewFloat32(x), op); err != nil {
			return err
		}
		for i, got := range x {
			var want float64
			for q := 0; q < p; q++ {
				want += float64((q+1)*i + q)
			}
			if op == Average {
				want /= float64(p)
			}
			if float64(got) != want {
				return fmt.Errorf("all-reduce %v: element %d = %v, expected %v", op, i, got, want)
			}
		}
	}
	root := p - 1
	b := make([]float32, n)
	for i := range b {
		b[i] = -1
		if r == root {
			b[i] = 7*float32(i) + 0.5
		}
	}
	if err := c.Broadcast(cpu.NewFloat32(b), root); err != nil {
		return err
	}
	for i, got := range b {
		if want := 7*float64(i) + 0.5; float64(got) != want {
			return fmt.Errorf("broadcast: element %d = %v, expected %v", i, got, want)
		}
	}
	bb := make([]byte, 37)
	for i := range bb {
		bb[i] = byte(r*50 + i)
	}
	if err := c.BroadcastBytes(bb, root); err != nil {
		return err
	}
	for i, got := range bb {
		if want := byte(root*50 + i); got != want {
			return fmt.Errorf("byte broadcast: byte %d = %d, expected %d", i, got, want)
		}
	}
	const m = 17
	send := make([]float32, m)
	for j := range send {
		send[j] = float32(100*r + j)
	}
	recv := make([]float32, p*m)
	if err := c.AllGather(cpu.NewFloat32(send), cpu.NewFloat32(recv)); err != nil {
		return err
	}
	for q := 0; q < p; q++ {
		for j := 0; j < m; j++ {
			if got, want := recv[q*m+j], float32(100*q+j); got != want {
				return fmt.Errorf("all-gather: recv[%d] = %v, expected %v", q*m+j, got, want)
			}
		}
	}
	// Barrier: the last rank arrives 300 ms late; nobody may leave earlier.
	start := time.Now()
	if r == p-1 {
		time.Sleep(300 * time.Millisecond)
	}
	if err := c.Barrier(); err != nil {
		return err
	}
	if d := time.Since(start); d < 250*time.Millisecond {
		return fmt.Errorf("barrier returned after %v, before the late rank arrived (300 ms)", d)
	}
	// MPI_Init must leave Go's signal handling alone: a nil dereference is
	// still a recoverable panic, not OpenMPI's crash report.
	if err := nilDeref(); err == nil || !strings.Contains(err.Error(), "nil pointer") {
		return fmt.Errorf("nil dereference after MPI_Init: recovered %v, expected Go's nil pointer panic", err)
	}
	// Agree: the same value passes, one differing on the last rank is named.
	if err := Agree(c, "model config", []byte("d128 L2")); err != nil {
		return err
	}
	v := []byte("seed 1")
	if r == p-1 {
		v = []byte("seed 2")
	}
	if err := Agree(c, "seed", v); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("ranks [%d] have a different seed than rank 0", p-1)) {
		return fmt.Errorf("Agree on differing seeds: error %v, expected one naming rank %d", err, p-1)
	}
	// A buffer of another device is refused with an error, not a panic.
	if err := c.AllReduce(fakeBuffer{n: 4}, Sum); err == nil || !strings.Contains(err.Error(), "buffer is on fake:0") {
		return fmt.Errorf("all-reduce of a non-CPU buffer: error %v, expected one naming its device", err)
	}
	// MPI_ERRORS_RETURN is in force: an error inside MPI (a root beyond the
	// world, passed past the Go checks) comes back as an error naming it
	// instead of aborting the job.
	one := []float32{1}
	err := c.call("raw broadcast", func() uintptr {
		rc, _, _ := purego.SyscallN(c.abi.bcast, uintptr(unsafe.Pointer(&one[0])), 1, c.abi.float, uintptr(p+5), c.abi.commWorld)
		return rc
	})
	runtime.KeepAlive(one)
	if err == nil || !strings.Contains(err.Error(), "MPI_ERR_ROOT") || !strings.Contains(err.Error(), "raw broadcast on rank") {
		return fmt.Errorf("MPI_Bcast with root %d: error %v, expected MPI_ERR_ROOT returned as an error", p+5, err)
	}
	// Bad input is an error, not a crash.
	if err := c.AllGather(cpu.NewFloat32(send), cpu.NewFloat32(recv[:m])); err == nil || !strings.Contains(err.Error(), "recv has") {
		return fmt.Errorf("all-gather with a short recv: error %v, expected one naming recv's length", err)
	}
	if err := c.Broadcast(cpu.NewFloat32(b), p); err == nil || !strings.Contains(err.Error(), "out of range") {
		return fmt.Errorf("broadcast from root %d: error %v, expected out of range", p, err)
	}
	if err := c.AllReduce(cpu.NewFloat32(b), Op(9)); err == nil {
		return fmt.Errorf("all-reduce with Op(9) succeeded, expected an error")
	}
	return nil
}

// loseRank makes the last rank die (SIGKILL) or hang after a barrier while
// rank 0 keeps all-reducing.
func loseRank(c *MPIComm, mode string) error {
	if err := c.Barrier(); err != nil {
		return err
	}
	if c.Rank() == c.Size()-1 {
		switch mode {
		case "die":
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
		case "exit":
			os.Exit(0) // without MPI_Finalize
		}
		time.Sleep(time.Hour)
	}
	x := make([]float32, 1<<16)
	for {
		if err := c.AllReduce(cpu.NewFloat32(x), Sum); err != nil {
			return err
		}
	}
}

// mpirun runs the test binary as np ranks in worker mode, returning the
// combined output, the exit error and the wall time; it skips when mpirun is
// not installed.
func mpirun(t *testing.T, np int, mode string, limit time.Duration) (string, error, time.Duration) {
	t.Helper()
	bin, err := exec.LookPath("mpirun")
	if err != nil {
		t.Skip("mpirun not on PATH: install openmpi-bin (and libopenmpi3) to run the multi-rank tests")
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--oversubscribe", "--allow-run-as-root", "-np", strconv.Itoa(np),
		"-x", workerEnv+"="+mode, os.Args[0])
	cmd.Env = append(os.Environ(), workerEnv+"="+mode)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	return string(out), err, time.Since(start)
}

func TestMPICollectives(t *testing.T) {
	for _, np := range []int{2, 3} {
		t.Run(fmt.Sprintf("%d ranks", np), func(t *testing.T) {
			out, err, _ := mpirun(t, np, "collectives", 2*time.Minute)
			if err != nil {
				t.Fatalf("mpirun: %v\n%s", err, out)
			}
			for r := 0; r < np; r++ {
				if want := fmt.Sprintf("ok rank %d of %d", r, np); !strings.Contains(out, want) {
					t.Errorf("output lacks %q:\n%s", want, out)
				}
			}
		})
	}
}

// TestMPIRankDies makes the last rank die while rank 0 is in an all-reduce:
// OpenMPI's mpirun notices the death, kills the other ranks and exits
// non-zero naming the dead rank, within seconds (about 1.3 s measured).
func TestMPIRankDies(t *testing.T) {
	tests := []struct {
		mode string
		want []string // in mpirun's output
	}{
		{"die", []string{"process rank 1", "signal 9"}},                             // SIGKILL
		{"exit", []string{"process rank 1", "exited without calling \"finalize\""}}, // exit 0, no MPI_Finalize
	}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			const bound = 30 * time.Second
			out, err, took := mpirun(t, 2, tt.mode, 2*bound)
			if err == nil {
				t.Fatalf("mpirun succeeded although rank 1 died:\n%s", out)
			}
			if took > bound {
				t.Errorf("job took %v to stop after rank 1 died, bound %v", took, bound)
			}
			for _, w := range tt.want {
				if !strings.Contains(strings.Join(strings.Fields(out), " "), w) {
					t.Errorf("mpirun's output lacks %q:\n%s", w, out)
				}
			}
			if strings.Contains(out, "ok rank 0") {
				t.Errorf("rank 0 finished normally although its peer died:\n%s", out)
			}
		})
	}
}

// TestMPIRankHangs stops the last rank (alive, never calling MPI again):
// mpirun alone would wait forever, so rank 0's 2 s watchdog must return the
// timeout error, after which rank 0 exits and mpirun stops the hung rank.
func TestMPIRankHangs(t *testing.T) {
	const bound = 30 * time.Second
	out, err, took := mpirun(t, 2, "hang", 2*bound)
	if err == nil {
		t.Fatalf("mpirun succeeded although rank 1 hung:\n%s", out)
	}
	if took > bound {
		t.Errorf("job took %v to stop after rank 1 hung, bound %v", took, bound)
	}
	want := "all-reduce of 65536 floats on rank 0 of 2 did not complete within 2s"
	if !strings.Contains(out, want) {
		t.Errorf("output lacks the watchdog's error %q:\n%s", want, out)
	}
}

// nilDeref dereferences a nil pointer and returns the recovered panic.
func nilDeref() (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	var p *int
	_ = *p
	return nil
}

// fakeDevice is a device of another backend; only its name is used.
type fakeDevice struct{ device.Device }

func (fakeDevice) Name() string { return "fake:0" }

// fakeBuffer is a float32 buffer of fakeDevice.
type fakeBuffer struct{ n int }

func (b fakeBuffer) Device() device.Device          { return fakeDevice{} }
func (b fakeBuffer) DType() device.DType            { return device.Float32 }
func (b fakeBuffer) Len() int                       { return b.n }
func (b fakeBuffer) Slice(off, n int) device.Buffer { return fakeBuffer{n: n} }
