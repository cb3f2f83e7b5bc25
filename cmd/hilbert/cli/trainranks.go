package cli

// Data-parallel training under mpirun: one process per rank, its
// communicator (MPI, or NCCL on GPUs) and the collective checks.

import (
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"time"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/cuda"
	"github.com/hilbert-ml/hilbert/dist"
	"github.com/hilbert-ml/hilbert/dist/nccl"
	"github.com/hilbert-ml/hilbert/train"
)

// trainRanks is one rank of a data-parallel run started by mpirun: rank 0
// takes the run's lock and prepares the data as a plain run does; the
// others wait for it, find the same shards, and train beside it without
// writing anything.
func trainRanks(st *trainSetup, comm dist.Communicator, stdout, stderr io.Writer) error {
	_, mpi := comm.(*dist.MPIComm)
	if g, ok := comm.(*gpuRanks); ok {
		_, mpi = g.launcher.(*dist.MPIComm)
	}
	ctx, stop := trainSignals(stderr, mpi)
	defer stop()
	c := st.job.Config
	var lock *train.RunLock
	var prepErr error
	if comm.Rank() == 0 {
		fmt.Fprintf(stderr, "hilbert: data-parallel over %d ranks\n", comm.Size())
		lock, prepErr = lockRun(st, c, stderr)
		if prepErr == nil {
			defer lock.Unlock()
			if prepErr = startRun(st, c, st.resume); prepErr == nil {
				var pd preparedData
				pd, prepErr = prepareData(ctx, &st.job, st.resume, stderr)
				defer pd.cleanup()
				if prepErr == nil && pd.mismatch {
					// The other ranks read the run's data folder, which
					// this text did not replace.
					prepErr = pd.mismatchError()
				}
			}
		}
	} else {
		st.quiet = true
	}
	if prepErr != nil {
		// Said now: once the others learn of it they exit, and mpirun
		// may end this process before Run would print it.
		prepErr = report(stderr, "train", prepErr)
	}
	// Every rank waits for rank 0's data; a failure there stops them all.
	failed, err := anyFailed(comm, st.dev, prepErr != nil)
	if err != nil {
		return err
	}
	if prepErr != nil {
		return prepErr
	}
	if failed {
		return fmt.Errorf("rank %d: rank 0 could not prepare the run (its error is above)", comm.Rank())
	}
	if comm.Rank() != 0 && len(st.job.Config.TrainShards) == 0 {
		if err := findTextShards(&st.job); err != nil {
			return err
		}
	}
	s, err := trainOne(ctx, st, st.job.Config, lock, st.resume, comm, stdout, stderr)
	if err != nil {
		return fmt.Errorf("rank %d: %w", comm.Rank(), err)
	}
	if comm.Rank() == 0 {
		printRun(stdout, s)
	}
	return nil
}

// launchRanks returns the communicator of the job this process was
// started in, for buffers of dev: one rank outside a launcher; under
// mpirun, MPI on a CPU device and NCCL on a GPU (its id shared through
// MPI); under torchrun's variables, NCCL (its id shared through
// MASTER_ADDR:MASTER_PORT), which needs a GPU.
func launchRanks(dev device.Device, timeout time.Duration) (dist.Communicator, error) {
	comm, err := dist.Launch(dist.MPIOptions{Timeout: timeout})
	if err != nil {
		return nil, err
	}
	gpu, onGPU := dev.(*cuda.Device)
	env, torchrun, err := dist.Torchrun()
	if err != nil {
		comm.Close()
		return nil, err
	}
	switch {
	case comm.Size() > 1 && !onGPU:
		return comm, nil
	case comm.Size() == 1 && (!torchrun || env.WorldSize == 1):
		return comm, nil
	case comm.Size() == 1 && !onGPU:
		comm.Close()
		return nil, fmt.Errorf("a torchrun-style launch (RANK=%d, WORLD_SIZE=%d) trains through NCCL, which needs -device cuda; on CPUs start the ranks with mpirun", env.Rank, env.WorldSize)
	}
	lib, err := nccl.Open("")
	if err != nil {
		comm.Close()
		return nil, fmt.Errorf("data-parallel on GPUs: %w", err)
	}
	var id nccl.UniqueID
	rank, size := env.Rank, env.WorldSize
	if mpi, ok := comm.(*dist.MPIComm); ok {
		rank, size = comm.Rank(), comm.Size()
		id, err = lib.ShareID(mpi)
	} else {
		id, err = lib.ShareIDTCP(env, timeout)
	}
	if err == nil {
		var nc *nccl.Communicator
		if nc, err = nccl.NewCommunicator(lib, gpu, size, id, rank); err == nil {
			return &gpuRanks{Communicator: nc, launcher: comm}, nil
		}
	}
	comm.Close()
	return nil, fmt.Errorf("data-parallel on GPUs: rank %d: NCCL: %w", rank, err)
}

// gpuRanks is NCCL's communicator, closing the launcher's (MPI's) with it.
type gpuRanks struct {
	*nccl.Communicator
	launcher dist.Communicator
}

func (g *gpuRanks) Close() error {
	err := g.Communicator.Close()
	if e := g.launcher.Close(); err == nil {
		err = e
	}
	return err
}

// anyFailed reports whether failed holds on any rank, through buffers of
// dev (the communicator's device).
func anyFailed(comm dist.Communicator, buf device.Device, failed bool) (bool, error) {
	b, err := buf.Alloc(device.Float32, 1)
	if err != nil {
		return false, err
	}
	defer buf.Free(b)
	v := float32(0)
	if failed {
		v = 1
	}
	buf.CopyFromHost(b, []float32{v})
	if err := comm.AllReduce(b, dist.Sum); err != nil {
		return false, err
	}
	out := make([]float32, 1)
	buf.CopyToHost(out, b)
	return out[0] > 0, nil
}

// findTextShards finds the shards rank 0 tokenized from the job's text
// into the run's data folder (the names shardsFromText gets).
func findTextShards(job *trainFile) error {
	dir := filepath.Join(job.Config.RunsDir, job.Config.Name, "data")
	train, _ := filepath.Glob(filepath.Join(dir, "text_train_*.bin"))
	val, _ := filepath.Glob(filepath.Join(dir, "text_val_*.bin"))
	if len(train) == 0 || len(val) == 0 {
		return fmt.Errorf("the shards rank 0 tokenized are not in %s (do the ranks share a file system?)", dir)
	}
	sort.Strings(train)
	sort.Strings(val)
	job.Config.TrainShards, job.Config.ValShard = train, val[0]
	return nil
}
