package dist

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/ebitengine/purego"
)

// The MPI library, loaded at run time without cgo: finding it, resolving
// its symbols and handles for the OpenMPI or MPICH ABI, and the one OS
// thread that makes every MPI call of the process (MPIComm in mpi.go).

// MPILibEnv names the environment variable that gives the path of the MPI
// library to load, overriding the search of MPILibNames.
const MPILibEnv = "HILBERT_MPI_LIB"

// MPILibNames are the MPI libraries tried, in order: OpenMPI 4 and 5
// (libmpi.so.40), then MPICH and its ABI-compatible derivatives (Intel MPI,
// MVAPICH, Cray MPICH: libmpi.so.12, libmpich.so.12).
var MPILibNames = []string{"libmpi.so.40", "libmpi.so.12", "libmpich.so.12", "libmpi.so"}

// mpiLibDirs are searched before the system loader path; Debian's OpenMPI
// lives in the multiarch folder, the others in their usual prefixes.
var mpiLibDirs = []string{
	"/usr/lib/x86_64-linux-gnu",
	"/usr/lib/aarch64-linux-gnu",
	"/usr/lib64/openmpi/lib",
	"/usr/lib64/mpich/lib",
	"/usr/lib64",
	"/usr/lib",
	"/usr/local/lib",
	"/opt/openmpi/lib",
}

// MPI ABI handles. OpenMPI's handles are the addresses of exported objects;
// MPICH's are integer constants fixed by its ABI (mpi.h of MPICH 3 and 4).
type mpiABI struct {
	name                           string
	commWorld, float, byte, opSum  uintptr
	errorsReturn, inPlace          uintptr
	init, rank, size, allreduce    uintptr
	bcast, allgather, barrier      uintptr
	finalize, errorString, errhSet uintptr
	initialized, finalized         uintptr
}

// MPICH ABI constants (mpi.h).
const (
	mpichCommWorld    = 0x44000000
	mpichFloat        = 0x4c00040a
	mpichByte         = 0x4c00010d
	mpichOpSum        = 0x58000003
	mpichErrorsReturn = 0x54000001
	mpiThreadFunneled = 1 // MPI_THREAD_FUNNELED, the same in both ABIs
)

// mpiProcess is the process-wide MPI state: MPI can be initialised and
// finalised once per process, whatever the number of communicators asked for.
var mpiProcess struct {
	sync.Mutex
	thread    chan<- mpiCall
	abi       *mpiABI
	path      string
	users     int
	finalized bool
	// stuck, once a collective timed out, is that error: the MPI thread is
	// blocked in it for good, so every communicator refuses further calls.
	stuck atomic.Pointer[error]
}

// mpiCall is one MPI call for the MPI thread: f's result goes to done.
type mpiCall struct {
	f    func() uintptr
	done chan<- uintptr
}

// startMPIThread starts the goroutine that makes every MPI call of the
// process, locked to one OS thread: MPI_Init_thread, the collectives and
// MPI_Finalize all run on that thread, as MPI_THREAD_FUNNELED requires and as
// the standard asks of MPI_Finalize, whichever goroutines use the
// communicator.
func startMPIThread() chan<- mpiCall {
	ch := make(chan mpiCall)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread stays MPI's
		for c := range ch {
			c.done <- c.f()
		}
	}()
	return ch
}

// onThread runs f on the MPI thread and returns its result.
func onThread(thread chan<- mpiCall, f func() uintptr) uintptr {
	done := make(chan uintptr, 1)
	thread <- mpiCall{f, done}
	return <-done
}

// openMPI loads the library and resolves the symbols and handles.
func openMPI(lib string) (*mpiABI, string, error) {
	var paths []string
	if lib == "" {
		lib = os.Getenv(MPILibEnv)
	}
	if lib != "" {
		paths = []string{lib}
	} else {
		for _, name := range MPILibNames {
			for _, dir := range mpiLibDirs {
				p := filepath.Join(dir, name)
				if _, err := os.Stat(p); err == nil {
					paths = append(paths, p)
				}
			}
			paths = append(paths, name)
		}
	}
	var tried []string
	for _, p := range paths {
		h, err := purego.Dlopen(p, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err != nil {
			tried = append(tried, fmt.Sprintf("%s: %v", p, err))
			continue
		}
		abi, err := resolveMPI(h)
		if err != nil {
			return nil, "", fmt.Errorf("dist: mpi: %s: %w", p, err)
		}
		return abi, p, nil
	}
	return nil, "", fmt.Errorf("dist: mpi: no MPI library could be loaded (install openmpi-bin and libopenmpi3, or set %s to the library's path); tried: %s",
		MPILibEnv, strings.Join(tried, "; "))
}

// resolveMPI finds the functions and the handles of the ABI the library
// implements: OpenMPI when ompi_mpi_comm_world is exported, MPICH otherwise.
func resolveMPI(h uintptr) (*mpiABI, error) {
	a := &mpiABI{}
	syms := []struct {
		name string
		p    *uintptr
	}{
		{"MPI_Init_thread", &a.init}, {"MPI_Comm_rank", &a.rank}, {"MPI_Comm_size", &a.size},
		{"MPI_Allreduce", &a.allreduce}, {"MPI_Bcast", &a.bcast}, {"MPI_Allgather", &a.allgather},
		{"MPI_Barrier", &a.barrier}, {"MPI_Finalize", &a.finalize}, {"MPI_Error_string", &a.errorString},
		{"MPI_Comm_set_errhandler", &a.errhSet}, {"MPI_Initialized", &a.initialized}, {"MPI_Finalized", &a.finalized},
	}
	for _, s := range syms {
		p, err := purego.Dlsym(h, s.name)
		if err != nil {
			return nil, fmt.Errorf("symbol %s missing: not an MPI library? (%v)", s.name, err)
		}
		*s.p = p
	}
	if world, err := purego.Dlsym(h, "ompi_mpi_comm_world"); err == nil {
		a.name = "OpenMPI"
		a.commWorld = world
		a.inPlace = 1 // #define MPI_IN_PLACE ((void *) 1)
		for _, s := range []struct {
			name string
			p    *uintptr
		}{{"ompi_mpi_float", &a.float}, {"ompi_mpi_byte", &a.byte}, {"ompi_mpi_op_sum", &a.opSum}, {"ompi_mpi_errors_return", &a.errorsReturn}} {
			p, err := purego.Dlsym(h, s.name)
			if err != nil {
				return nil, fmt.Errorf("OpenMPI handle %s missing: %v", s.name, err)
			}
			*s.p = p
		}
		return a, nil
	}
	a.name = "MPICH"
	a.commWorld, a.float, a.byte, a.opSum, a.errorsReturn = mpichCommWorld, mpichFloat, mpichByte, mpichOpSum, mpichErrorsReturn
	a.inPlace = ^uintptr(0) // #define MPI_IN_PLACE (void *) -1
	return a, nil
}

// errString returns MPI's text for an error code, asked on the MPI thread.
func (a *mpiABI) errString(thread chan<- mpiCall, rc uintptr) string {
	var buf [512]byte // MPI_MAX_ERROR_STRING is 256 (OpenMPI) or 512 (MPICH)
	var n int32
	r := onThread(thread, func() uintptr {
		r, _, _ := purego.SyscallN(a.errorString, uintptr(int32(rc)), uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(&n)))
		return r
	})
	if int32(r) != 0 || n <= 0 || int(n) > len(buf) {
		return fmt.Sprintf("MPI error %d", int32(rc))
	}
	return fmt.Sprintf("%s (MPI error %d)", string(buf[:n]), int32(rc))
}
