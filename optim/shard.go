package optim

import (
	"fmt"
	"slices"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/tensor"
)

// Gatherer is what sharded Muon needs of a data-parallel communicator:
// its rank, its size and an all-gather of float32 device buffers (rank r's
// send lands in recv[r*n : (r+1)*n] of every rank, n = send.Len()).
// dist.Communicator implements it; optim does not import dist.
type Gatherer interface {
	Rank() int
	Size() int
	AllGather(send, recv device.Buffer) error
}

// Sharder is an optimizer whose work can be divided among data-parallel
// ranks (Muon). Set.SetSharding finds it by type assertion.
type Sharder interface {
	SetSharding(c Gatherer) error
}

// SetSharding divides the optimizers' work among the ranks of c: every
// group whose optimizer is a Sharder (Muon) shards its Newton-Schulz
// iterations (see Muon.SetSharding). Every rank must call it with the same
// parameters and then step with the same gradients. nil, or a communicator
// of one rank, undoes it.
func (s *Set) SetSharding(c Gatherer) error {
	for _, g := range s.groups {
		if sh, ok := g.Optimizer.(Sharder); ok {
			if err := sh.SetSharding(c); err != nil {
				return fmt.Errorf("optim: group %q: %w", g.Name, err)
			}
		}
	}
	return nil
}

// muonShard is the division of Muon's matrices among ranks.
type muonShard struct {
	c      Gatherer
	owner  []int // state index -> the rank that orthogonalises it
	offset []int // state index -> its offset in its owner's segment
	seg    int   // floats each rank sends: its matrices, padding, one flag
}

// SetSharding makes Step divide the Newton-Schulz orthogonalisations among
// the ranks of c, as modded-nanogpt does: each matrix is assigned to one
// rank (largest first, each to the rank with the least work so far, the
// work of a rows x cols matrix taken as rows*cols*min(rows, cols)), every
// rank updates all momenta and orthogonalises the directions of its own
// matrices, one all-gather shares the results, and every rank applies every
// update. Each matrix is computed by the same code on the same direction as
// unsharded, so the parameters after a step are bit-identical to an
// unsharded step on every rank (given a deterministic backend), while each
// rank's Newton-Schulz work falls to about 1/Size of the whole.
//
// Every rank must step with identical gradients (averaged over ranks, see
// dist.Reducer) and identical parameters; a parameter without a gradient
// must lack it on every rank. An orthogonalisation that fails on its owner
// (a non-finite direction) fails the step on every rank, naming the
// parameter and the rank. nil, or a communicator of one rank, returns Muon
// to unsharded steps.
func (o *Muon) SetSharding(c Gatherer) error {
	if c == nil || c.Size() <= 1 {
		o.shard = nil
		return nil
	}
	for _, st := range o.state {
		if st.p.DType() != device.Float32 {
			return fmt.Errorf("optim: muon: sharding all-gathers float32 buffers; parameter %s is %v", st.p.Name, st.p.DType())
		}
	}
	size, rank := c.Size(), c.Rank()
	if rank < 0 || rank >= size {
		return fmt.Errorf("optim: muon: rank %d out of range [0, %d)", rank, size)
	}
	order := make([]int, len(o.state))
	for i := range order {
		order[i] = i
	}
	work := func(i int) int {
		st := o.state[i]
		return st.rows * st.cols * min(st.rows, st.cols)
	}
	slices.SortStableFunc(order, func(a, b int) int { return work(b) - work(a) })
	sh := &muonShard{c: c, owner: make([]int, len(o.state)), offset: make([]int, len(o.state))}
	load := make([]int, size)
	used := make([]int, size)
	for _, i := range order {
		r := 0
		for q := range size {
			if load[q] < load[r] {
				r = q
			}
		}
		sh.owner[i], sh.offset[i] = r, used[r]
		load[r] += work(i)
		used[r] += o.state[i].p.Len()
	}
	sh.seg = slices.Max(used) + 1 // + the flag
	o.shard = sh
	return nil
}

// shardedStep is Step with the orthogonalisations divided among ranks.
func (o *Muon) shardedStep(lr float64) error {
	sh := o.shard
	rank, size := sh.c.Rank(), sh.c.Size()
	if len(o.state) == 0 {
		return nil
	}
	dev := o.state[0].p.Device()
	send, err := tensor.NewPooled(dev, device.Float32, sh.seg)
	if err != nil {
		return err
	}
	defer send.Release()
	recv, err := tensor.NewPooled(dev, device.Float32, size*sh.seg)
	if err != nil {
		return err
	}
	defer recv.Release()
	r := muonRule{o.cfg}
	flag := float32(0) // 1 + the state index of the first failure here
	var failure error
	grads := make([]*tensor.Tensor, len(o.state))
	for i, st := range o.state {
		g, err := gradOf("muon", st.p)
		if err != nil {
			return err
		}
		if g == nil || st.p.Len() == 0 {
			continue
		}
		grads[i] = g
		if sh.owner[i] != rank || flag != 0 {
			if err := r.momentum(st.update(g, lr)); err != nil { // another rank orthogonalises it
				return err
			}
			continue
		}
		x, err := r.direction(st.update(g, lr))
		if err != nil {
			return err
		}
		if err := orthogonalize(dev, x, st.rows, st.cols, o.cfg.NSIterations, o.cfg.Eps); err != nil {
			flag, failure = float32(i+1), err
		} else {
			dev.Copy(send.Buffer().Slice(sh.offset[i], st.p.Len()), x.Buffer())
		}
		x.Release()
	}
	dev.CopyFromHost(send.Buffer().Slice(sh.seg-1, 1), []float32{flag})
	if err := sh.c.AllGather(send.Buffer(), recv.Buffer()); err != nil {
		return fmt.Errorf("optim: muon: sharded step: %w", err)
	}
	flags := make([]float32, 1)
	for q := range size {
		dev.CopyToHost(flags, recv.Buffer().Slice(q*sh.seg+sh.seg-1, 1))
		if i := int(flags[0]) - 1; i >= 0 && i < len(o.state) {
			if q == rank {
				return fmt.Errorf("optim: muon: %s (orthogonalised on rank %d): %w", o.state[i].p.Name, q, failure)
			}
			return fmt.Errorf("optim: muon: %s: its orthogonalisation failed on rank %d", o.state[i].p.Name, q)
		}
	}
	for i, st := range o.state {
		if grads[i] == nil {
			continue
		}
		if err := r.apply(st.update(grads[i], lr), recv.Buffer().Slice(sh.owner[i]*sh.seg+sh.offset[i], st.p.Len())); err != nil {
			return fmt.Errorf("optim: muon: %s: %w", st.p.Name, err)
		}
		st.changed()
	}
	return nil
}
