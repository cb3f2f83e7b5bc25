package dist

import (
	"cmp"
	"fmt"
	"math"
	"runtime"
	"sync"
	"time"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/hilbert-ml/hilbert/device"
)

// MPIOptions configures the MPI communicator.
type MPIOptions struct {
	// Library is the path of the MPI library; empty means $HILBERT_MPI_LIB,
	// then the first of MPILibNames found.
	Library string
	// Timeout, when positive, bounds every collective: one that has not
	// completed by then returns an error naming this rank, the collective and
	// the timeout, and the communicator refuses further use (the MPI call
	// itself cannot be cancelled; the caller should exit, which makes mpirun
	// stop the other ranks). It catches a rank that hangs while alive, which
	// mpirun alone does not; a rank that dies is caught by mpirun itself (see
	// the package documentation).
	Timeout time.Duration
	// Chunk is the most elements one MPI_Allreduce call reduces; a larger
	// buffer is reduced in chunks of this size. Zero means DefaultChunk;
	// it is capped at MPI's C int count limit.
	Chunk int
}

// DefaultChunk is MPIOptions.Chunk's default: 4M floats (16 MiB). OpenMPI
// 4.1's default all-reduce algorithm slows down past a few tens of
// megabytes: on the project's 2-core machine, 2 ranks all-reduce 13M floats
// (52 MB) in one call at a median 2.9 GB/s, and in 4M-float chunks at
// 5.9 GB/s (2.0x; TestMPIAllReduceBandwidth with HILBERT_DIST_CHUNK).
const DefaultChunk = 1 << 22

// MPIComm is the communicator of MPI_COMM_WORLD. It reduces buffers of the
// CPU backend in place in host memory.
type MPIComm struct {
	abi        *mpiABI
	thread     chan<- mpiCall
	rank, size int
	timeout    time.Duration
	chunk      int
	mu         sync.Mutex // one collective at a time, in the callers' order
	broken     error
	closed     bool
}

// NewMPI initialises MPI (once per process) and returns the communicator of
// all ranks started by mpirun. MPI errors are returned as Go errors
// (MPI_ERRORS_RETURN is set on the world communicator).
func NewMPI(opts MPIOptions) (*MPIComm, error) {
	if opts.Timeout < 0 {
		return nil, fmt.Errorf("dist: mpi: negative timeout %v", opts.Timeout)
	}
	if opts.Chunk < 0 {
		return nil, fmt.Errorf("dist: mpi: negative chunk %d", opts.Chunk)
	}
	chunk := opts.Chunk
	chunk = cmp.Or(chunk, DefaultChunk)
	chunk = min(chunk, maxCount)
	mpiProcess.Lock()
	defer mpiProcess.Unlock()
	if mpiProcess.finalized {
		return nil, fmt.Errorf("dist: mpi: MPI was finalised in this process and cannot be initialised again")
	}
	if mpiProcess.abi == nil {
		abi, path, err := openMPI(opts.Library)
		if err != nil {
			return nil, err
		}
		thread := startMPIThread()
		var provided int32
		if rc := onThread(thread, func() uintptr {
			rc, _, _ := purego.SyscallN(abi.init, 0, 0, mpiThreadFunneled, uintptr(unsafe.Pointer(&provided)))
			return rc
		}); int32(rc) != 0 {
			return nil, fmt.Errorf("dist: mpi: MPI_Init_thread (%s, %s) failed: %s", abi.name, path, abi.errString(thread, rc))
		}
		if provided < mpiThreadFunneled {
			return nil, fmt.Errorf("dist: mpi: %s provides thread level %d, expected at least MPI_THREAD_FUNNELED (%d)", path, provided, mpiThreadFunneled)
		}
		if rc := onThread(thread, func() uintptr {
			rc, _, _ := purego.SyscallN(abi.errhSet, abi.commWorld, abi.errorsReturn)
			return rc
		}); int32(rc) != 0 {
			return nil, fmt.Errorf("dist: mpi: MPI_Comm_set_errhandler: %s", abi.errString(thread, rc))
		}
		mpiProcess.abi, mpiProcess.path, mpiProcess.thread = abi, path, thread
	}
	abi, thread := mpiProcess.abi, mpiProcess.thread
	var rank, size int32
	if rc := onThread(thread, func() uintptr {
		rc, _, _ := purego.SyscallN(abi.rank, abi.commWorld, uintptr(unsafe.Pointer(&rank)))
		return rc
	}); int32(rc) != 0 {
		return nil, fmt.Errorf("dist: mpi: MPI_Comm_rank: %s", abi.errString(thread, rc))
	}
	if rc := onThread(thread, func() uintptr {
		rc, _, _ := purego.SyscallN(abi.size, abi.commWorld, uintptr(unsafe.Pointer(&size)))
		return rc
	}); int32(rc) != 0 {
		return nil, fmt.Errorf("dist: mpi: MPI_Comm_size: %s", abi.errString(thread, rc))
	}
	mpiProcess.users++
	return &MPIComm{abi: abi, thread: thread, rank: int(rank), size: int(size), timeout: opts.Timeout, chunk: chunk}, nil
}

// Library returns the path of the loaded MPI library and its ABI family.
func (c *MPIComm) Library() (path, abi string) { return mpiProcess.path, c.abi.name }

// Rank returns this process's rank in MPI_COMM_WORLD.
func (c *MPIComm) Rank() int { return c.rank }

// Size returns the number of ranks in MPI_COMM_WORLD.
func (c *MPIComm) Size() int { return c.size }

// hostFloats returns the host slice of a float32 buffer whose device keeps
// it in host memory (device.HostMemory: the CPU's).
func hostFloats(what string, b device.Buffer) ([]float32, error) {
	if err := checkFloat32(what, b); err != nil {
		return nil, err
	}
	if h, ok := b.Device().(device.HostMemory); ok {
		if f, ok := h.HostFloat32s(b); ok {
			return f, nil
		}
	}
	return nil, fmt.Errorf("dist: mpi: %s: buffer is on %s, not in host memory; the MPI backend reduces CPU buffers (use dist/nccl for GPUs)", what, b.Device().Name())
}

// call runs f under the communicator's lock and watchdog. f returns the MPI
// function's C int result in the low 32 bits of a register (the upper ones
// are not defined), hence the int32 conversions.
func (c *MPIComm) call(what string, f func() uintptr) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	if c.broken != nil {
		return c.broken
	}
	if p := mpiProcess.stuck.Load(); p != nil {
		c.broken = *p
		return c.broken
	}
	done := make(chan uintptr, 1)
	c.thread <- mpiCall{f, done}
	var expired <-chan time.Time // nil, never ready, without a timeout
	if c.timeout > 0 {
		t := time.NewTimer(c.timeout)
		defer t.Stop()
		expired = t.C
	}
	select {
	case rc := <-done:
		if int32(rc) != 0 {
			return fmt.Errorf("dist: mpi: %s on rank %d of %d: %s", what, c.rank, c.size, c.abi.errString(c.thread, rc))
		}
		return nil
	case <-expired:
		c.broken = fmt.Errorf("dist: mpi: %s on rank %d of %d did not complete within %v: another rank died or hung; this communicator is unusable, exit the process",
			what, c.rank, c.size, c.timeout)
		mpiProcess.stuck.Store(&c.broken)
		return c.broken
	}
}

// maxCount is the largest element count of one MPI call (C int).
const maxCount = math.MaxInt32

// AllReduce sums (or averages) buf over all ranks in place. buf must be a
// float32 buffer of the CPU backend. Average divides the sum by Size() in
// float32, so integer-valued sums divisible by the rank count stay exact.
func (c *MPIComm) AllReduce(buf device.Buffer, op Op) error {
	if err := checkOp(op); err != nil {
		return err
	}
	x, err := hostFloats("all-reduce", buf)
	if err != nil {
		return err
	}
	for off := 0; off < len(x); off += c.chunk {
		part := x[off:min(len(x), off+c.chunk)]
		p := unsafe.Pointer(unsafe.SliceData(part))
		err := c.call(fmt.Sprintf("all-reduce of %d floats", len(part)), func() uintptr {
			rc, _, _ := purego.SyscallN(c.abi.allreduce, c.abi.inPlace, uintptr(p), uintptr(len(part)), c.abi.float, c.abi.opSum, c.abi.commWorld)
			return rc
		})
		runtime.KeepAlive(part)
		if err != nil {
			return err
		}
	}
	if op == Average && c.size > 1 {
		divide(x, c.size)
	}
	return nil
}

// divide divides x by n in float32. For a power of two it multiplies by
// 1/n, which is exact and gives the same bits as the division at several
// times its speed (a gradient average of hundreds of MB was dominated by
// the divisions).
func divide(x []float32, n int) {
	if n&(n-1) == 0 {
		inv := 1 / float32(n)
		for i := range x {
			x[i] *= inv
		}
		return
	}
	d := float32(n)
	for i := range x {
		x[i] /= d
	}
}

// Broadcast copies root's buf into every rank's buf.
func (c *MPIComm) Broadcast(buf device.Buffer, root int) error {
	if root < 0 || root >= c.size {
		return fmt.Errorf("dist: mpi: broadcast: root %d out of range [0, %d)", root, c.size)
	}
	x, err := hostFloats("broadcast", buf)
	if err != nil {
		return err
	}
	for off := 0; off < len(x); off += maxCount {
		part := x[off:min(len(x), off+maxCount)]
		p := unsafe.Pointer(unsafe.SliceData(part))
		err := c.call(fmt.Sprintf("broadcast of %d floats from rank %d", len(part), root), func() uintptr {
			rc, _, _ := purego.SyscallN(c.abi.bcast, uintptr(p), uintptr(len(part)), c.abi.float, uintptr(root), c.abi.commWorld)
			return rc
		})
		runtime.KeepAlive(part)
		if err != nil {
			return err
		}
	}
	return nil
}

// BroadcastBytes copies root's b into every rank's b (used to share an NCCL
// unique id, or to compare configurations).
func (c *MPIComm) BroadcastBytes(b []byte, root int) error {
	if root < 0 || root >= c.size {
		return fmt.Errorf("dist: mpi: broadcast: root %d out of range [0, %d)", root, c.size)
	}
	if len(b) == 0 {
		return c.Barrier()
	}
	if len(b) > maxCount {
		return fmt.Errorf("dist: mpi: broadcast of %d bytes exceeds MPI's count limit %d", len(b), maxCount)
	}
	p := unsafe.Pointer(unsafe.SliceData(b))
	err := c.call(fmt.Sprintf("broadcast of %d bytes from rank %d", len(b), root), func() uintptr {
		rc, _, _ := purego.SyscallN(c.abi.bcast, uintptr(p), uintptr(len(b)), c.abi.byte, uintptr(root), c.abi.commWorld)
		return rc
	})
	runtime.KeepAlive(b)
	return err
}

// AllGather writes rank r's send into recv[r*n:(r+1)*n] on every rank.
func (c *MPIComm) AllGather(send, recv device.Buffer) error {
	if err := checkGather(send, recv, c.size); err != nil {
		return err
	}
	s, err := hostFloats("all-gather send", send)
	if err != nil {
		return err
	}
	r, err := hostFloats("all-gather recv", recv)
	if err != nil {
		return err
	}
	return c.allGatherHost(s, r)
}

// allGatherHost is AllGather on host slices (len(r) = Size * len(s)).
func (c *MPIComm) allGatherHost(s, r []float32) error {
	if len(s) == 0 {
		return nil
	}
	if len(r) > maxCount {
		return fmt.Errorf("dist: mpi: all-gather of %d floats exceeds MPI's count limit %d", len(r), maxCount)
	}
	sp, rp := unsafe.Pointer(unsafe.SliceData(s)), unsafe.Pointer(unsafe.SliceData(r))
	err := c.call(fmt.Sprintf("all-gather of %d floats per rank", len(s)), func() uintptr {
		rc, _, _ := purego.SyscallN(c.abi.allgather, uintptr(sp), uintptr(len(s)), c.abi.float, uintptr(rp), uintptr(len(s)), c.abi.float, c.abi.commWorld)
		return rc
	})
	runtime.KeepAlive(s)
	runtime.KeepAlive(r)
	return err
}

// Barrier returns once every rank has entered it.
func (c *MPIComm) Barrier() error {
	return c.call("barrier", func() uintptr {
		rc, _, _ := purego.SyscallN(c.abi.barrier, c.abi.commWorld)
		return rc
	})
}

// Close releases the communicator; the last one closed finalises MPI (after
// which MPI cannot be used again in this process). A communicator broken by
// a timeout does not finalise, as MPI_Finalize would wait for the lost rank.
func (c *MPIComm) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	c.closed = true
	mpiProcess.Lock()
	defer mpiProcess.Unlock()
	mpiProcess.users--
	if mpiProcess.users > 0 || c.broken != nil || mpiProcess.stuck.Load() != nil {
		return nil
	}
	mpiProcess.finalized = true
	if rc := onThread(c.thread, func() uintptr {
		rc, _, _ := purego.SyscallN(c.abi.finalize)
		return rc
	}); int32(rc) != 0 {
		return fmt.Errorf("dist: mpi: MPI_Finalize on rank %d: %s", c.rank, c.abi.errString(c.thread, rc))
	}
	return nil
}
