package nccl

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/hilbert-ml/hilbert/dist"
)

// stub is the test's view of the stub library's records.
type stub struct {
	id     func(rank int32, out *byte)
	count  func(rank int32) uint64
	dtype  func(rank int32) int32
	op     func(rank int32) int32
	root   func(rank int32) int32
	nranks func(rank int32) int32
	stream func(rank int32) uintptr
	send   func(rank int32) uintptr
	recv   func(rank int32) uintptr
	last   func(rank int32) string
}

var (
	stubOnce sync.Once
	stubPath string
	stubErr  error
)

// workerEnv selects, in a process started by mpirun, the worker body the
// re-executed test binary runs instead of the tests; its value is the stub's
// path.
const workerEnv = "HILBERT_NCCL_TEST_WORKER"

func TestMain(m *testing.M) {
	if lib := os.Getenv(workerEnv); lib != "" {
		os.Exit(shareWorker(lib))
	}
	code := m.Run()
	if stubPath != "" {
		os.RemoveAll(filepath.Dir(stubPath))
	}
	os.Exit(code)
}

// buildStub compiles testdata/stubnccl.c with gcc into dir/libnccl.so.2.
func buildStub(t *testing.T) string {
	t.Helper()
	stubOnce.Do(func() {
		cc, err := exec.LookPath("gcc")
		if err != nil {
			stubErr = fmt.Errorf("gcc not on PATH: %w", err)
			return
		}
		dir, err := os.MkdirTemp("", "stubnccl")
		if err != nil {
			stubErr = err
			return
		}
		stubPath = filepath.Join(dir, "libnccl.so.2")
		out, err := exec.Command(cc, "-O2", "-fPIC", "-shared", "-pthread", "-Wall", "-Werror", "-o", stubPath, "testdata/stubnccl.c").CombinedOutput()
		if err != nil {
			stubErr = fmt.Errorf("gcc: %v\n%s", err, out)
		}
	})
	if stubErr != nil {
		if strings.HasPrefix(stubErr.Error(), "gcc not on PATH") {
			t.Skip("gcc not on PATH: the stub NCCL cannot be built")
		}
		t.Fatal(stubErr)
	}
	return stubPath
}

func openStub(t *testing.T) (*Library, *stub) {
	t.Helper()
	p := buildStub(t)
	l, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	h, err := purego.Dlopen(p, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		t.Fatal(err)
	}
	s := &stub{}
	for name, fn := range map[string]any{
		"stub_id": &s.id, "stub_count": &s.count, "stub_dtype": &s.dtype, "stub_op": &s.op, "stub_root": &s.root,
		"stub_nranks": &s.nranks, "stub_stream": &s.stream, "stub_send": &s.send, "stub_recv": &s.recv, "stub_last": &s.last,
	} {
		purego.RegisterLibFunc(fn, h, name)
	}
	return l, s
}

func addr(x []float32) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(x))) }

// TestCollectives runs 3 ranks as goroutines against the stub, which
// performs the reductions, and checks the results against float64 sums and
// the arguments the stub received, the 128-byte id passed by value included.
func TestCollectives(t *testing.T) {
	l, s := openStub(t)
	if v, err := l.Version(); err != nil || v != 22105 {
		t.Fatalf("Version() = %d, %v; expected the stub's 22105", v, err)
	}
	id, err := l.GetUniqueID()
	if err != nil {
		t.Fatal(err)
	}
	if id2, _ := l.GetUniqueID(); id2 == id {
		t.Fatal("two GetUniqueID calls returned the same id")
	}
	const p, n = 3, 513
	errs := make([]error, p)
	var wg sync.WaitGroup
	for r := 0; r < p; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			errs[r] = rank(l, s, id, p, r, n)
		}(r)
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

// rank is one rank's share of TestCollectives.
func rank(l *Library, s *stub, id UniqueID, p, r, n int) error {
	c, err := l.InitRank(p, id, r)
	if err != nil {
		return err
	}
	var got UniqueID
	s.id(int32(r), &got.Internal[0])
	if got != id {
		return fmt.Errorf("the stub received id % x..., expected % x...", got.Internal[:8], id.Internal[:8])
	}
	if s.nranks(int32(r)) != int32(p) {
		return fmt.Errorf("the stub received nranks %d, expected %d", s.nranks(int32(r)), p)
	}
	stream := uintptr(0xabc00 + r)
	for _, op := range []RedOp{Sum, Avg} {
		for _, inPlace := range []bool{true, false} {
			x := make([]float32, n)
			for i := range x {
				x[i] = float32((r+1)*i) + 0.25*float32(r)
			}
			y := x
			if !inPlace {
				y = make([]float32, n)
			}
			if err := c.AllReduce(addr(x), addr(y), n, Float32, op, stream); err != nil {
				return err
			}
			runtime.KeepAlive(x)
			if s.send(int32(r)) != addr(x) || s.recv(int32(r)) != addr(y) || s.count(int32(r)) != uint64(n) ||
				s.dtype(int32(r)) != int32(Float32) || s.op(int32(r)) != int32(op) || s.stream(int32(r)) != stream {
				return fmt.Errorf("all-reduce: the stub received send %#x recv %#x count %d dtype %d op %d stream %#x; expected %#x %#x %d %d %d %#x",
					s.send(int32(r)), s.recv(int32(r)), s.count(int32(r)), s.dtype(int32(r)), s.op(int32(r)), s.stream(int32(r)),
					addr(x), addr(y), n, Float32, op, stream)
			}
			for i, v := range y {
				var want float64
				for q := 0; q < p; q++ {
					want += float64(float32((q+1)*i) + 0.25*float32(q))
				}
				if op == Avg {
					want /= float64(p)
				}
				if float64(v) != float64(float32(want)) {
					return fmt.Errorf("all-reduce %d in place %v: element %d = %v, expected %v", op, inPlace, i, v, float32(want))
				}
			}
		}
	}
	b := make([]float32, n)
	for i := range b {
		b[i] = float32(r*1000 + i)
	}
	if err := c.Broadcast(addr(b), addr(b), n, Float32, 1, stream); err != nil {
		return err
	}
	if s.root(int32(r)) != 1 || s.last(int32(r)) != "broadcast" {
		return fmt.Errorf("broadcast: the stub recorded root %d, call %q", s.root(int32(r)), s.last(int32(r)))
	}
	for i, v := range b {
		if v != float32(1000+i) {
			return fmt.Errorf("broadcast: element %d = %v, expected %v", i, v, 1000+i)
		}
	}
	send := []float32{float32(r), float32(10 * r)}
	recv := make([]float32, 2*p)
	if err := c.AllGather(addr(send), addr(recv), 2, Float32, stream); err != nil {
		return err
	}
	for q := 0; q < p; q++ {
		if recv[2*q] != float32(q) || recv[2*q+1] != float32(10*q) {
			return fmt.Errorf("all-gather: recv = %v", recv)
		}
	}
	runtime.KeepAlive(send)
	if err := c.AllReduce(addr(b), addr(b), n, Float64, Sum, stream); err == nil || !strings.Contains(err.Error(), "invalid argument (stub)") {
		return fmt.Errorf("all-reduce of float64 in the stub: error %v, expected the stub's invalid argument", err)
	}
	runtime.KeepAlive(b)
	if err := c.Destroy(); err != nil {
		return err
	}
	if s.last(int32(r)) != "destroy" {
		return fmt.Errorf("destroy: the stub's last call is %q", s.last(int32(r)))
	}
	if err := c.AllReduce(0, 0, 0, Float32, Sum, 0); err == nil || !strings.Contains(err.Error(), "destroyed") {
		return fmt.Errorf("all-reduce after destroy: error %v, expected one naming the destroyed communicator", err)
	}
	return nil
}

func TestInitRankErrors(t *testing.T) {
	l, _ := openStub(t)
	tests := []struct {
		nranks, rank int
		errPart      string
	}{
		{2, 2, "rank 2 of 2 ranks out of range"},
		{0, 0, "rank 0 of 0 ranks out of range"},
		{2, -1, "rank -1 of 2 ranks out of range"},
		{17, 0, "invalid argument (stub)"}, // the stub allows 16 ranks: its error comes back
	}
	for _, tt := range tests {
		_, err := l.InitRank(tt.nranks, UniqueID{}, tt.rank)
		if err == nil || !strings.Contains(err.Error(), tt.errPart) {
			t.Errorf("InitRank(%d, id, %d): error %v, expected one containing %q", tt.nranks, tt.rank, err, tt.errPart)
		}
	}
}

// TestSearch finds the stub in the nvidia/nccl/lib folder of a virtualenv's
// site-packages, as pip's nvidia-nccl-cu12 wheel installs it.
func TestSearch(t *testing.T) {
	p := buildStub(t)
	venv := t.TempDir()
	lib := filepath.Join(venv, "lib", "python3.11", "site-packages", "nvidia", "nccl", "lib")
	if err := os.MkdirAll(lib, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(lib, "libnccl.so.2"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("VIRTUAL_ENV", venv)
	t.Setenv("HILBERT_CUDA_NO_PYTHON", "1")
	t.Setenv("LD_LIBRARY_PATH", "")
	dirs := searchDirs()
	found := false
	for _, d := range dirs {
		found = found || d == lib
	}
	if !found {
		t.Fatalf("searchDirs() = %v lacks %s", dirs, lib)
	}
	l, err := Open("")
	if err != nil {
		t.Fatal(err)
	}
	if l.Path() != filepath.Join(lib, "libnccl.so.2") && !strings.HasPrefix(l.Path(), "/usr") {
		t.Errorf("Open found %s, expected the venv's %s (or a system NCCL)", l.Path(), lib)
	}
	if _, err := Open("/nonexistent/libnccl.so.2"); err == nil || !strings.Contains(err.Error(), "/nonexistent/libnccl.so.2") {
		t.Errorf("Open of a missing path: error %v, expected one naming the path", err)
	}
}

// shareWorker shares an id through MPI and prints it as hex.
func shareWorker(lib string) int {
	c, err := dist.NewMPI(dist.MPIOptions{Timeout: time.Minute})
	if err != nil {
		fmt.Println("worker:", err)
		return 2
	}
	l, err := Open(lib)
	if err != nil {
		fmt.Println("worker:", err)
		return 2
	}
	own, err := l.GetUniqueID()
	if err != nil {
		fmt.Printf("rank %d: %v\n", c.Rank(), err)
		return 3
	}
	fmt.Printf("rank %d own %x\n", c.Rank(), own.Internal)
	id, err := l.ShareID(c)
	if err != nil {
		fmt.Printf("rank %d: %v\n", c.Rank(), err)
		return 3
	}
	fmt.Printf("rank %d id %x\n", c.Rank(), id.Internal)
	if err := c.Close(); err != nil {
		fmt.Printf("rank %d: %v\n", c.Rank(), err)
		return 4
	}
	return 0
}

// TestShareID runs 2 MPI ranks; each makes its own id (the stub's ids hold
// the pid), and after ShareID both must hold rank 0's.
func TestShareID(t *testing.T) {
	bin, err := exec.LookPath("mpirun")
	if err != nil {
		t.Skip("mpirun not on PATH: install openmpi-bin (and libopenmpi3) to run the multi-rank tests")
	}
	p := buildStub(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--oversubscribe", "--allow-run-as-root", "-np", "2", "-x", workerEnv+"="+p, os.Args[0])
	cmd.Env = append(os.Environ(), workerEnv+"="+p)
	b, err := cmd.CombinedOutput()
	out := string(b)
	if err != nil {
		t.Fatalf("mpirun: %v\n%s", err, out)
	}
	ids := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		var r int
		var kind, id string
		if n, _ := fmt.Sscanf(line, "rank %d %s %s", &r, &kind, &id); n == 3 {
			ids[fmt.Sprint(kind, r)] = id
		}
	}
	if len(ids["id0"]) != 256 || ids["id0"] != ids["id1"] {
		t.Fatalf("ranks hold ids %q and %q, expected rank 0's 128 bytes on both:\n%s", ids["id0"], ids["id1"], out)
	}
	if ids["own1"] == "" || ids["own1"] == ids["id1"] {
		t.Fatalf("rank 1's own id %q equals the shared one: the test cannot tell sharing from coincidence:\n%s", ids["own1"], out)
	}
}

// TestInitWithTorchrun starts 3 ranks as goroutines with a torchrun
// environment on localhost: the id travels over TCP, and the stub's
// communicator forms only if every rank presents rank 0's id (otherwise
// ncclCommInitRank would wait, caught by the 20 s bound).
func TestInitWithTorchrun(t *testing.T) {
	l, s := openStub(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	const p = 3
	comms := make([]*Comm, p)
	errs := make([]error, p)
	done := make(chan struct{})
	var wg sync.WaitGroup
	for r := 0; r < p; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			e := dist.TorchrunEnv{Rank: r, WorldSize: p, LocalRank: r, MasterAddr: "127.0.0.1", MasterPort: port}
			comms[r], errs[r] = l.InitWithTorchrun(e, 10*time.Second)
		}(r)
	}
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("InitWithTorchrun did not complete within 20s: the ranks do not share one id")
	}
	var id0 UniqueID
	s.id(0, &id0.Internal[0])
	for r := 0; r < p; r++ {
		if errs[r] != nil {
			t.Fatalf("rank %d: %v", r, errs[r])
		}
		var id UniqueID
		s.id(int32(r), &id.Internal[0])
		if id != id0 || id == (UniqueID{}) {
			t.Errorf("rank %d initialised with id % x..., rank 0 with % x...", r, id.Internal[:8], id0.Internal[:8])
		}
		if comms[r].Rank() != r || comms[r].Size() != p {
			t.Errorf("rank %d: communicator rank %d size %d", r, comms[r].Rank(), comms[r].Size())
		}
		if err := comms[r].Destroy(); err != nil {
			t.Error(err)
		}
	}
}
