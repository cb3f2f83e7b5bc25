// Package nccl binds NVIDIA's collective communication library
// (libnccl.so.2) at run time with purego, so the module still builds with
// CGO_ENABLED=0. It exposes the calls data-parallel training needs:
// ncclGetUniqueId, ncclCommInitRank, ncclAllReduce, ncclBroadcast,
// ncclAllGather and ncclCommDestroy, on CUDA device addresses (uintptr, as
// they are not Go pointers) and a CUDA stream (0 is the legacy default
// stream). Communicator wraps them as a dist.Communicator over the float32
// buffers of one cuda.Device, enqueued on the device's stream.
//
// ncclCommInitRank takes the 128-byte ncclUniqueId by value. purego passes
// structs by value on linux and darwin for amd64 and arm64: on amd64 (System
// V) an aggregate over 16 bytes is copied onto the stack, on arm64 (AAPCS64)
// one over 16 bytes is copied to memory whose address goes in a register;
// purego does both, and the tests check the bytes that arrive in a stub
// library built with gcc.
//
// The library is found like the CUDA libraries of device/cuda: the path in
// $HILBERT_NCCL_LIB, the folders of $HILBERT_CUDA_LIB_DIR,
// CUDA_PATH/CUDA_HOME, LD_LIBRARY_PATH, the system library folders, and the
// nvidia/nccl/lib folder of every Python site-packages (pip's nvidia-nccl-cu12
// wheel, which PyTorch installs).
package nccl

import (
	"fmt"
	"github.com/hilbert-ml/hilbert/device/cuda"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/ebitengine/purego"

	"github.com/hilbert-ml/hilbert/dist"
)

// LibEnv names the environment variable holding the path of the NCCL
// library, tried before any search.
const LibEnv = "HILBERT_NCCL_LIB"

// LibNames are the file names of the NCCL library, tried in order.
var LibNames = []string{"libnccl.so.2", "libnccl.so"}

// UniqueID is NCCL's ncclUniqueId: 128 opaque bytes made by rank 0 with
// GetUniqueID and given to every rank (through MPI, or a TCP rendezvous)
// for InitRank.
type UniqueID struct {
	// Internal holds the bytes of ncclUniqueId.internal.
	Internal [128]byte
}

// DataType is ncclDataType_t.
type DataType int32

// NCCL data types (nccl.h).
const (
	Int8     DataType = 0
	Uint8    DataType = 1
	Int32    DataType = 2
	Uint32   DataType = 3
	Int64    DataType = 4
	Uint64   DataType = 5
	Float16  DataType = 6
	Float32  DataType = 7
	Float64  DataType = 8
	BFloat16 DataType = 9
)

// RedOp is ncclRedOp_t.
type RedOp int32

// NCCL reductions (nccl.h); Avg needs NCCL 2.10 or later.
const (
	Sum  RedOp = 0
	Prod RedOp = 1
	Max  RedOp = 2
	Min  RedOp = 3
	Avg  RedOp = 4
)

// Library is a loaded NCCL.
type Library struct {
	path string

	getVersion     func(v *int32) int32
	getErrorString func(r int32) string
	getUniqueID    func(id *UniqueID) int32
	commInitRank   func(comm *uintptr, nranks int32, id UniqueID, rank int32) int32
	commDestroy    func(comm uintptr) int32
	allReduce      func(send, recv uintptr, count uint64, dtype DataType, op RedOp, comm, stream uintptr) int32
	broadcast      func(send, recv uintptr, count uint64, dtype DataType, root int32, comm, stream uintptr) int32
	allGather      func(send, recv uintptr, count uint64, dtype DataType, comm, stream uintptr) int32
}

var (
	openMu sync.Mutex
	opened = map[string]*Library{}
)

// Open loads NCCL: the library at path when path is not empty, otherwise
// the first found by the search described in the package documentation. The
// error lists what was searched.
func Open(path string) (*Library, error) {
	openMu.Lock()
	defer openMu.Unlock()
	var candidates []string
	if path == "" {
		path = os.Getenv(LibEnv)
	}
	if path != "" {
		candidates = []string{path}
	} else {
		dirs := searchDirs()
		for _, name := range LibNames {
			for _, d := range dirs {
				p := filepath.Join(d, name)
				if _, err := os.Stat(p); err == nil {
					candidates = append(candidates, p)
				}
			}
		}
		candidates = append(candidates, LibNames...) // the system loader's path
	}
	var tried []string
	for _, p := range candidates {
		if l, ok := opened[p]; ok {
			return l, nil
		}
		h, err := purego.Dlopen(p, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err != nil {
			tried = append(tried, fmt.Sprintf("%s: %v", p, err))
			continue
		}
		l, err := bind(p, h)
		if err != nil {
			return nil, err
		}
		opened[p] = l
		return l, nil
	}
	return nil, fmt.Errorf("nccl: libnccl.so.2 not found (set %s to its path, or install NCCL, e.g. pip's nvidia-nccl-cu12); tried: %s",
		LibEnv, strings.Join(tried, "; "))
}

// bind resolves every function of l from the library handle h.
func bind(path string, h uintptr) (l *Library, err error) {
	l = &Library{path: path}
	fns := []struct {
		name string
		fn   any
	}{
		{"ncclGetVersion", &l.getVersion}, {"ncclGetErrorString", &l.getErrorString},
		{"ncclGetUniqueId", &l.getUniqueID}, {"ncclCommInitRank", &l.commInitRank},
		{"ncclCommDestroy", &l.commDestroy}, {"ncclAllReduce", &l.allReduce},
		{"ncclBroadcast", &l.broadcast}, {"ncclAllGather", &l.allGather},
	}
	for _, f := range fns {
		sym, err := purego.Dlsym(h, f.name)
		if err != nil {
			return nil, fmt.Errorf("nccl: %s: symbol %s missing: %v", path, f.name, err)
		}
		purego.RegisterFunc(f.fn, sym)
	}
	return l, nil
}

// Path returns the file the library was loaded from.
func (l *Library) Path() string { return l.path }

// check turns an ncclResult_t into an error.
func (l *Library) check(what string, r int32) error {
	if r == 0 {
		return nil
	}
	return fmt.Errorf("nccl: %s: %s (ncclResult %d)", what, l.getErrorString(r), r)
}

// Version returns NCCL's version code (for example 22105 for 2.21.5).
func (l *Library) Version() (int, error) {
	var v int32
	if err := l.check("ncclGetVersion", l.getVersion(&v)); err != nil {
		return 0, err
	}
	return int(v), nil
}

// GetUniqueID makes the id rank 0 shares with the other ranks.
func (l *Library) GetUniqueID() (UniqueID, error) {
	var id UniqueID
	err := l.check("ncclGetUniqueId", l.getUniqueID(&id))
	return id, err
}

// Comm is an NCCL communicator of one rank.
type Comm struct {
	lib        *Library
	h          uintptr
	rank, size int
}

// InitRank joins rank (of nranks) to the communicator named by id; it
// blocks until every rank has joined. Each rank must have made its CUDA
// device current first.
func (l *Library) InitRank(nranks int, id UniqueID, rank int) (*Comm, error) {
	if nranks < 1 || rank < 0 || rank >= nranks {
		return nil, fmt.Errorf("nccl: init: rank %d of %d ranks out of range", rank, nranks)
	}
	var h uintptr
	if err := l.check(fmt.Sprintf("ncclCommInitRank(rank %d of %d)", rank, nranks), l.commInitRank(&h, int32(nranks), id, int32(rank))); err != nil {
		return nil, err
	}
	return &Comm{lib: l, h: h, rank: rank, size: nranks}, nil
}

// ShareID returns, on every rank of the MPI job c, the id made by rank 0
// with GetUniqueID and broadcast with MPI.
func (l *Library) ShareID(c *dist.MPIComm) (UniqueID, error) {
	var id UniqueID
	if c.Rank() == 0 {
		var err error
		if id, err = l.GetUniqueID(); err != nil {
			return id, err
		}
	}
	if err := c.BroadcastBytes(id.Internal[:], 0); err != nil {
		return UniqueID{}, fmt.Errorf("nccl: sharing the unique id: %w", err)
	}
	return id, nil
}

// InitWithMPI makes the NCCL communicator of the ranks of the MPI job c
// (NCCL rank = MPI rank), sharing the id with ShareID. Each rank must have
// made its own CUDA device current first (for example the GPU of its local
// rank, OMPI_COMM_WORLD_LOCAL_RANK).
func (l *Library) InitWithMPI(c *dist.MPIComm) (*Comm, error) {
	id, err := l.ShareID(c)
	if err != nil {
		return nil, err
	}
	return l.InitRank(c.Size(), id, c.Rank())
}

// ShareIDTCP returns, on every rank of a torchrun-style launch e, the id
// made by rank 0 and sent through dist.RendezvousBroadcast at
// MASTER_ADDR:MASTER_PORT; a rank missing after timeout is an error.
func (l *Library) ShareIDTCP(e dist.TorchrunEnv, timeout time.Duration) (UniqueID, error) {
	var id UniqueID
	var payload []byte
	if e.Rank == 0 {
		var err error
		if id, err = l.GetUniqueID(); err != nil {
			return id, err
		}
		payload = id.Internal[:]
	}
	got, err := dist.RendezvousBroadcast(e.Addr(), e.Rank, e.WorldSize, payload, timeout)
	if err != nil {
		return UniqueID{}, fmt.Errorf("nccl: sharing the unique id: %w", err)
	}
	if len(got) != len(id.Internal) {
		return UniqueID{}, fmt.Errorf("nccl: sharing the unique id: received %d bytes from rank 0, expected %d", len(got), len(id.Internal))
	}
	copy(id.Internal[:], got)
	return id, nil
}

// InitWithTorchrun makes the NCCL communicator of a torchrun-style launch
// (NCCL rank = RANK of WORLD_SIZE), sharing the id with ShareIDTCP. Each rank
// must have made its CUDA device (LOCAL_RANK, usually) current first.
func (l *Library) InitWithTorchrun(e dist.TorchrunEnv, timeout time.Duration) (*Comm, error) {
	id, err := l.ShareIDTCP(e, timeout)
	if err != nil {
		return nil, err
	}
	return l.InitRank(e.WorldSize, id, e.Rank)
}

// Rank returns this communicator's rank.
func (c *Comm) Rank() int { return c.rank }

// Size returns the number of ranks.
func (c *Comm) Size() int { return c.size }

// Handle returns the ncclComm_t.
func (c *Comm) Handle() uintptr { return c.h }

func (c *Comm) live(what string) error {
	if c.h == 0 {
		return fmt.Errorf("nccl: %s on a destroyed communicator", what)
	}
	return nil
}

// AllReduce reduces count elements of send over all ranks into recv (send
// == recv reduces in place), enqueued on stream.
func (c *Comm) AllReduce(send, recv uintptr, count int, dtype DataType, op RedOp, stream uintptr) error {
	if err := c.live("all-reduce"); err != nil {
		return err
	}
	if count < 0 {
		return fmt.Errorf("nccl: all-reduce: negative count %d", count)
	}
	return c.lib.check(fmt.Sprintf("ncclAllReduce of %d elements on rank %d of %d", count, c.rank, c.size),
		c.lib.allReduce(send, recv, uint64(count), dtype, op, c.h, stream))
}

// Broadcast copies count elements of root's send into every rank's recv,
// enqueued on stream.
func (c *Comm) Broadcast(send, recv uintptr, count int, dtype DataType, root int, stream uintptr) error {
	if err := c.live("broadcast"); err != nil {
		return err
	}
	if count < 0 || root < 0 || root >= c.size {
		return fmt.Errorf("nccl: broadcast: count %d, root %d of %d ranks out of range", count, root, c.size)
	}
	return c.lib.check(fmt.Sprintf("ncclBroadcast of %d elements from rank %d on rank %d of %d", count, root, c.rank, c.size),
		c.lib.broadcast(send, recv, uint64(count), dtype, int32(root), c.h, stream))
}

// AllGather writes rank r's count elements of send into recv at element
// r*count on every rank (recv holds Size()*count elements), enqueued on
// stream.
func (c *Comm) AllGather(send, recv uintptr, count int, dtype DataType, stream uintptr) error {
	if err := c.live("all-gather"); err != nil {
		return err
	}
	if count < 0 {
		return fmt.Errorf("nccl: all-gather: negative count %d", count)
	}
	return c.lib.check(fmt.Sprintf("ncclAllGather of %d elements per rank on rank %d of %d", count, c.rank, c.size),
		c.lib.allGather(send, recv, uint64(count), dtype, c.h, stream))
}

// Destroy frees the communicator; later calls return an error.
func (c *Comm) Destroy() error {
	if err := c.live("destroy"); err != nil {
		return err
	}
	h := c.h
	c.h = 0
	return c.lib.check("ncclCommDestroy", c.lib.commDestroy(h))
}

// searchDirs returns the existing folders searched for NCCL, in order: the
// CUDA backend's (device/cuda), which include each Python site-packages'
// nvidia/*/lib folders, nvidia/nccl/lib among them.
func searchDirs() []string { return cuda.LibrarySearchDirs() }
