// Package dist is Hilbert's data-parallel communication layer: a
// Communicator of ranks that all-reduce, broadcast and all-gather float32
// device buffers, with a single-process implementation (Single) so that code
// written for N ranks runs unchanged with one, and an MPI backend (OpenMPI's
// libmpi.so.40, or an MPICH-ABI library) bound at run time with purego, so
// the module still builds with CGO_ENABLED=0. The NCCL binding for GPUs is in
// the nccl subpackage.
//
// Every collective is called by all ranks in the same order with buffers of
// the same length; errors are returned, never panicked.
//
// # Data-parallel building blocks
//
// Reducer averages a model's gradients over the ranks in buckets, started
// from autograd's Graph.OnGradReady hook while the backward pass runs (or
// all at Wait after it); with Single it does nothing. A Communicator also
// satisfies optim.Gatherer, which sharded Muon (optim.Set.SetSharding)
// uses to divide the Newton-Schulz work among the ranks. LocalRank names
// the GPU of a rank on its node.
//
// # MPI
//
// NewMPI loads libmpi.so.40 (OpenMPI; Debian's openmpi-bin and libopenmpi3
// packages) or an MPICH-ABI libmpi.so.12, found in the usual library folders
// or at $HILBERT_MPI_LIB, and binds MPI_Init_thread (MPI_THREAD_FUNNELED:
// every MPI call runs on one locked OS thread, whichever goroutine asks),
// MPI_Comm_rank/size, MPI_Allreduce (in place), MPI_Bcast, MPI_Allgather,
// MPI_Barrier and MPI_Finalize. OpenMPI's handles are the addresses of its
// exported objects (ompi_mpi_comm_world, ompi_mpi_float, ompi_mpi_op_sum,
// ompi_mpi_errors_return), looked up with dlsym; when ompi_mpi_comm_world is
// absent the library is taken to follow MPICH's ABI, whose handles are the
// integer constants of its mpi.h (MPI_COMM_WORLD = 0x44000000 and so on).
// Only OpenMPI 4.1 is tested here. Jobs are launched with mpirun, which
// sets OMPI_COMM_WORLD_SIZE (PMI_SIZE under MPICH's Hydra); LaunchedSize
// reads them.
//
// Failure behaviour, as observed with OpenMPI 4.1.4's mpirun: when a rank
// dies (killed, or exits non-zero, or exits without MPI_Finalize) mpirun
// kills every other rank and exits non-zero with a message naming the rank,
// e.g. "mpirun noticed that process rank 1 with PID ... exited on signal 9
// (Killed)", about 1.3 s after the death in TestMPIRankDies. The surviving
// ranks are killed rather than returned an error, so they cannot clean up;
// the named error is mpirun's. A rank that hangs while alive is not noticed
// by mpirun: MPIOptions.Timeout bounds each collective, and the rank whose
// collective times out returns an error naming itself, the collective and the
// timeout (it cannot know which peer hung); exiting on that error makes
// mpirun stop the rest (TestMPIRankHangs).
//
// # Without MPI
//
// Torchrun reads torchrun's RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and
// MASTER_PORT, and RendezvousBroadcast sends rank 0's bytes (an NCCL unique
// id) to the other ranks over TCP, with a timeout that names the ranks that
// never connected.
//
// This package depends on device, device/compose and tensor, never on a
// backend: the MPI backend hands MPI the memory of buffers whose device
// keeps them in host memory (device.HostMemory, the CPU's), and Agree
// exchanges host slices.
package dist

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"github.com/hilbert-ml/hilbert/device"
)

// Op is the reduction of an all-reduce.
type Op int

const (
	// Sum leaves the elementwise sum over ranks in every rank's buffer.
	Sum Op = iota + 1
	// Average leaves the elementwise sum over ranks divided by the number of
	// ranks (the gradient average of data-parallel training).
	Average
)

// String returns the name of the reduction.
func (o Op) String() string {
	switch o {
	case Sum:
		return "sum"
	case Average:
		return "average"
	}
	return fmt.Sprintf("Op(%d)", int(o))
}

// Communicator is a group of ranks that exchange float32 buffers. All ranks
// must call the collectives in the same order with buffers of equal length.
type Communicator interface {
	// Rank returns this process's rank in [0, Size()).
	Rank() int
	// Size returns the number of ranks.
	Size() int
	// AllReduce replaces buf on every rank by the reduction op of the bufs of
	// all ranks.
	AllReduce(buf device.Buffer, op Op) error
	// Broadcast copies root's buf into the buf of every other rank.
	Broadcast(buf device.Buffer, root int) error
	// AllGather writes rank r's send into recv[r*n : (r+1)*n] of every rank,
	// where n = send.Len() and recv.Len() = Size()*n.
	AllGather(send, recv device.Buffer) error
	// Barrier returns once every rank has called it.
	Barrier() error
	// Close releases the communicator; later calls return ErrClosed.
	Close() error
}

// ErrClosed is returned by a Communicator used after Close.
var ErrClosed = errors.New("dist: communicator is closed")

// checkFloat32 returns an error unless b is a float32 buffer.
func checkFloat32(what string, b device.Buffer) error {
	if b == nil {
		return fmt.Errorf("dist: %s: nil buffer", what)
	}
	if b.DType() != device.Float32 {
		return fmt.Errorf("dist: %s: buffer is %v, expected float32", what, b.DType())
	}
	return nil
}

// checkOp returns an error unless op is Sum or Average.
func checkOp(op Op) error {
	if op != Sum && op != Average {
		return fmt.Errorf("dist: all-reduce: unknown reduction %v (expected dist.Sum or dist.Average)", op)
	}
	return nil
}

// checkGather validates AllGather's buffers for size ranks.
func checkGather(send, recv device.Buffer, size int) error {
	if err := checkFloat32("all-gather send", send); err != nil {
		return err
	}
	if err := checkFloat32("all-gather recv", recv); err != nil {
		return err
	}
	if recv.Len() != size*send.Len() {
		return fmt.Errorf("dist: all-gather: recv has %d elements, expected %d ranks x %d = %d",
			recv.Len(), size, send.Len(), size*send.Len())
	}
	return nil
}

// single is the communicator of one rank.
type single struct{ closed bool }

// Single returns the communicator of a lone process: rank 0 of 1. Its
// all-reduce leaves buffers unchanged (the sum and the average of one value
// are that value), its all-gather copies send into recv.
func Single() Communicator { return &single{} }

func (s *single) Rank() int { return 0 }
func (s *single) Size() int { return 1 }

func (s *single) AllReduce(buf device.Buffer, op Op) error {
	if s.closed {
		return ErrClosed
	}
	if err := checkOp(op); err != nil {
		return err
	}
	return checkFloat32("all-reduce", buf)
}

func (s *single) Broadcast(buf device.Buffer, root int) error {
	if s.closed {
		return ErrClosed
	}
	if root != 0 {
		return fmt.Errorf("dist: broadcast: root %d out of range [0, 1)", root)
	}
	return checkFloat32("broadcast", buf)
}

func (s *single) AllGather(send, recv device.Buffer) error {
	if s.closed {
		return ErrClosed
	}
	if err := checkGather(send, recv, 1); err != nil {
		return err
	}
	if send.Len() > 0 {
		recv.Device().Copy(recv, send)
	}
	return nil
}

func (s *single) allGatherHost(send, recv []float32) error {
	if s.closed {
		return ErrClosed
	}
	copy(recv, send)
	return nil
}

func (s *single) Barrier() error {
	if s.closed {
		return ErrClosed
	}
	return nil
}

func (s *single) Close() error {
	if s.closed {
		return ErrClosed
	}
	s.closed = true
	return nil
}

// LaunchedSize returns the number of ranks of the job this process was
// started in by a launcher, read from OMPI_COMM_WORLD_SIZE (OpenMPI's
// mpirun), PMI_SIZE (MPICH's Hydra, Slurm's PMI) or PMIX_SIZE, and 0 when none
// is set (a plain process). A malformed value is an error naming the
// variable.
func LaunchedSize() (int, error) {
	return firstEnvInt([]string{"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"}, 1, "a positive rank count")
}

// firstEnvInt returns the integer in the first of envs that is set (0 when
// none is); a value that is not an integer of floor or more is an error
// naming the variable and what it should hold.
func firstEnvInt(envs []string, floor int, what string) (int, error) {
	for _, env := range envs {
		v, ok := os.LookupEnv(env)
		if !ok || v == "" {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < floor {
			return 0, fmt.Errorf("dist: %s=%q: expected %s", env, v, what)
		}
		return n, nil
	}
	return 0, nil
}

// Launch returns the communicator of the job this process was started in:
// the MPI one when a launcher's rank count is set (see LaunchedSize), the
// single-process one otherwise, so that a plain run needs no MPI library.
func Launch(opts MPIOptions) (Communicator, error) {
	n, err := LaunchedSize()
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return Single(), nil
	}
	c, err := NewMPI(opts)
	if err != nil {
		return nil, err
	}
	if c.Size() != n {
		c.Close()
		return nil, fmt.Errorf("dist: the launcher announced %d ranks but MPI_COMM_WORLD has %d (is the MPI library the launcher's?)", n, c.Size())
	}
	return c, nil
}

// LocalRankEnvs are the variables LocalRank reads, in order: torchrun's,
// OpenMPI's mpirun, MPICH's Hydra, Slurm's srun.
var LocalRankEnvs = []string{"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"}

// LocalRank returns this process's rank among the ranks of its node, the
// GPU ordinal it should use (cuda.New(LocalRank())), read from the first of
// LocalRankEnvs that is set; 0 when none is (a plain process). A malformed
// value is an error naming the variable.
func LocalRank() (int, error) {
	return firstEnvInt(LocalRankEnvs, 0, "a non-negative local rank")
}
