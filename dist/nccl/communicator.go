package nccl

import (
	"fmt"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/compose"
	"github.com/hilbert-ml/hilbert/device/cuda"
	"github.com/hilbert-ml/hilbert/dist"
)

// avgVersion is the first NCCL version with ncclAvg (2.10.0).
const avgVersion = 21000

// Communicator is a dist.Communicator over NCCL for the float32 buffers of
// one CUDA device. Its collectives are enqueued on the device's stream
// (through cuda.Device.OnStream), so they run after the kernels enqueued
// before them and before those enqueued after, like the device's own ops:
// a buffer read on the host (CopyToHost) after a collective holds its
// result. Barrier waits for the device.
type Communicator struct {
	comm    *Comm
	dev     *cuda.Device
	avg     bool          // the library has ncclAvg
	scratch device.Buffer // one float all-reduced by Barrier
	closed  bool
}

var _ dist.Communicator = (*Communicator)(nil)

// NewCommunicator joins rank (of nranks) to the NCCL communicator named by
// id, on dev: ncclCommInitRank runs with dev's context current. Rank 0 makes
// id with GetUniqueID and shares it (ShareID through MPI, ShareIDTCP under
// torchrun); each rank passes its own GPU, usually cuda.New(dist.LocalRank()).
func NewCommunicator(l *Library, dev *cuda.Device, nranks int, id UniqueID, rank int) (*Communicator, error) {
	if l == nil || dev == nil {
		return nil, fmt.Errorf("nccl: communicator: nil library or device")
	}
	v, err := l.Version()
	if err != nil {
		return nil, err
	}
	scratch, err := dev.Alloc(device.Float32, 1)
	if err != nil {
		return nil, fmt.Errorf("nccl: communicator: %w", err)
	}
	var comm *Comm
	if err := dev.OnStream(func(uintptr) error {
		var err error
		comm, err = l.InitRank(nranks, id, rank)
		return err
	}); err != nil {
		dev.Free(scratch)
		return nil, err
	}
	return &Communicator{comm: comm, dev: dev, avg: v >= avgVersion, scratch: scratch}, nil
}

// Rank returns this process's rank.
func (c *Communicator) Rank() int { return c.comm.Rank() }

// Size returns the number of ranks.
func (c *Communicator) Size() int { return c.comm.Size() }

// Comm returns the underlying NCCL communicator.
func (c *Communicator) Comm() *Comm { return c.comm }

// buffer returns b's device address after checking that it is a float32
// buffer of the communicator's device.
func (c *Communicator) buffer(what string, b device.Buffer) (uintptr, error) {
	if c.closed {
		return 0, dist.ErrClosed
	}
	if b == nil {
		return 0, fmt.Errorf("nccl: %s: nil buffer", what)
	}
	cb, ok := b.(*cuda.Buffer)
	if !ok || b.Device() != device.Device(c.dev) {
		return 0, fmt.Errorf("nccl: %s: buffer is on %s, the communicator on %s", what, b.Device().Name(), c.dev.Name())
	}
	if b.DType() != device.Float32 {
		return 0, fmt.Errorf("nccl: %s: buffer is %v, expected float32", what, b.DType())
	}
	return uintptr(cb.Ptr()), nil
}

// AllReduce replaces buf on every rank by the sum (or average) over ranks,
// in place. Average is ncclAvg where the library has it (NCCL 2.10), a sum
// scaled by 1/Size on the device otherwise.
func (c *Communicator) AllReduce(buf device.Buffer, op dist.Op) error {
	if op != dist.Sum && op != dist.Average {
		return fmt.Errorf("nccl: all-reduce: unknown reduction %v (expected dist.Sum or dist.Average)", op)
	}
	p, err := c.buffer("all-reduce", buf)
	if err != nil || buf.Len() == 0 {
		return err
	}
	red := Sum
	if op == dist.Average && c.avg {
		red = Avg
	}
	if err := c.dev.OnStream(func(s uintptr) error {
		return c.comm.AllReduce(p, p, buf.Len(), Float32, red, s)
	}); err != nil {
		return err
	}
	if op == dist.Average && !c.avg && c.Size() > 1 {
		compose.Scale(c.dev, buf, buf, 1/float32(c.Size()))
	}
	return nil
}

// Broadcast copies root's buf into every rank's buf.
func (c *Communicator) Broadcast(buf device.Buffer, root int) error {
	p, err := c.buffer("broadcast", buf)
	if err != nil || buf.Len() == 0 {
		return err
	}
	return c.dev.OnStream(func(s uintptr) error {
		return c.comm.Broadcast(p, p, buf.Len(), Float32, root, s)
	})
}

// AllGather writes rank r's send into recv[r*n : (r+1)*n] of every rank.
func (c *Communicator) AllGather(send, recv device.Buffer) error {
	sp, err := c.buffer("all-gather send", send)
	if err != nil {
		return err
	}
	rp, err := c.buffer("all-gather recv", recv)
	if err != nil {
		return err
	}
	if recv.Len() != c.Size()*send.Len() {
		return fmt.Errorf("nccl: all-gather: recv has %d elements, expected %d ranks x %d = %d",
			recv.Len(), c.Size(), send.Len(), c.Size()*send.Len())
	}
	if send.Len() == 0 {
		return nil
	}
	return c.dev.OnStream(func(s uintptr) error {
		return c.comm.AllGather(sp, rp, send.Len(), Float32, s)
	})
}

// Barrier all-reduces one float and waits for the device: it returns once
// every rank has enqueued it and the device has run it.
func (c *Communicator) Barrier() error {
	if err := c.AllReduce(c.scratch, dist.Sum); err != nil {
		return err
	}
	return c.dev.Synchronize()
}

// Close destroys the NCCL communicator (the device stays open); later calls
// return dist.ErrClosed.
func (c *Communicator) Close() error {
	if c.closed {
		return dist.ErrClosed
	}
	c.closed = true
	err := c.dev.Synchronize() // the enqueued collectives finish first
	c.dev.Free(c.scratch)
	if e := c.dev.OnStream(func(uintptr) error { return c.comm.Destroy() }); err == nil {
		err = e
	}
	return err
}
