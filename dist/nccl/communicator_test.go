package nccl

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/device/cuda"
	"github.com/hilbert-ml/hilbert/dist"
	"github.com/hilbert-ml/hilbert/internal/cudaemu"
	"github.com/hilbert-ml/hilbert/tensor"
)

// TestCommunicatorEmulated runs the dist.Communicator of 2 ranks (goroutines,
// each with its own emulated CUDA device) over the stub NCCL, which really
// reduces the buffers the emulator keeps in host memory: the results match
// float64 references, and the stub saw each buffer's device address and the
// device's stream.
func TestCommunicatorEmulated(t *testing.T) {
	l, s := openStub(t)
	cudaemu.Setenv(t)
	id, err := l.GetUniqueID()
	if err != nil {
		t.Fatal(err)
	}
	const p, n = 2, 300
	devs := make([]*cuda.Device, p)
	for r := range devs {
		if devs[r], err = cuda.New(0); err != nil {
			t.Fatalf("cuda.New on the emulator: %v", err)
		}
		t.Cleanup(func() { devs[r].Close() })
	}
	errs := make([]error, p)
	var wg sync.WaitGroup
	for r := range p {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = emulatedRank(l, s, devs[r], id, p, r, n)
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

// emulatedRank is one rank's share of TestCommunicatorEmulated.
func emulatedRank(l *Library, s *stub, dev *cuda.Device, id UniqueID, p, r, n int) error {
	c, err := NewCommunicator(l, dev, p, id, r)
	if err != nil {
		return err
	}
	if c.Rank() != r || c.Size() != p {
		return fmt.Errorf("rank %d of %d, expected %d of %d", c.Rank(), c.Size(), r, p)
	}
	upload := func(x []float32) (device.Buffer, error) {
		b, err := dev.Alloc(device.Float32, len(x))
		if err == nil {
			dev.CopyFromHost(b, x)
		}
		return b, err
	}
	for _, op := range []dist.Op{dist.Sum, dist.Average} {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32((r+1)*i) + 0.5*float32(r)
		}
		b, err := upload(x)
		if err != nil {
			return err
		}
		if err := c.AllReduce(b, op); err != nil {
			return err
		}
		if got, want := s.send(int32(r)), uintptr(b.(*cuda.Buffer).Ptr()); got != want || s.stream(int32(r)) != dev.Stream() || s.count(int32(r)) != uint64(n) {
			return fmt.Errorf("all-reduce: the stub saw buffer %#x stream %#x count %d, expected %#x %#x %d", got, s.stream(int32(r)), s.count(int32(r)), want, dev.Stream(), n)
		}
		dev.CopyToHost(x, b)
		for i, v := range x {
			var want float64
			for q := range p {
				want += float64((q+1)*i) + 0.5*float64(q)
			}
			if op == dist.Average {
				want /= float64(p)
			}
			if float64(v) != want {
				return fmt.Errorf("all-reduce %v: element %d = %v, expected %v", op, i, v, want)
			}
		}
		dev.Free(b)
	}
	send, _ := upload([]float32{float32(10 * r), float32(10*r + 1)})
	recv, _ := dev.Alloc(device.Float32, 2*p)
	if err := c.AllGather(send, recv); err != nil {
		return err
	}
	got := make([]float32, 2*p)
	dev.CopyToHost(got, recv)
	for q := range p {
		if got[2*q] != float32(10*q) || got[2*q+1] != float32(10*q+1) {
			return fmt.Errorf("all-gather: %v", got)
		}
	}
	bc, _ := upload([]float32{float32(r), float32(r)})
	if err := c.Broadcast(bc, 1); err != nil {
		return err
	}
	dev.CopyToHost(got[:2], bc)
	if got[0] != 1 || got[1] != 1 {
		return fmt.Errorf("broadcast from rank 1: %v", got[:2])
	}
	if err := c.Barrier(); err != nil {
		return err
	}
	// A CPU buffer is refused with an error naming the devices.
	if err := c.AllReduce(cpu.NewFloat32(make([]float32, 4)), dist.Sum); err == nil || !strings.Contains(err.Error(), "buffer is on cpu") {
		return fmt.Errorf("all-reduce of a CPU buffer: error %v, expected one naming the devices", err)
	}
	if err := c.AllGather(send, send); err == nil || !strings.Contains(err.Error(), "recv has") {
		return fmt.Errorf("all-gather with a short recv: error %v", err)
	}
	if err := c.Close(); err != nil {
		return err
	}
	if err := c.AllReduce(send, dist.Sum); err != dist.ErrClosed {
		return fmt.Errorf("all-reduce after Close: %v, expected dist.ErrClosed", err)
	}
	return nil
}

// TestReducerEmulated averages gradients of 2 ranks (goroutines, each with
// its own emulated CUDA device) with dist.Reducer over the Communicator and
// the stub NCCL: a packed bucket of two gradients (summed, then scaled as
// it is unpacked on the device) and a lone one (averaged in place with
// ncclAvg) both come back as the mean.
func TestReducerEmulated(t *testing.T) {
	l, _ := openStub(t)
	cudaemu.Setenv(t)
	id, err := l.GetUniqueID()
	if err != nil {
		t.Fatal(err)
	}
	const p = 2
	sizes := []int{300, 20, 20}
	value := func(r, k, i int) float32 { return float32((r+1)*(k+1)*i) + 0.5*float32(r) }
	errs := make([]error, p)
	var wg sync.WaitGroup
	for r := range p {
		dev, err := cuda.New(0)
		if err != nil {
			t.Fatalf("cuda.New on the emulator: %v", err)
		}
		t.Cleanup(func() { dev.Close() })
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = func() error {
				c, err := NewCommunicator(l, dev, p, id, r)
				if err != nil {
					return err
				}
				defer c.Close()
				var params []*tensor.Tensor
				for k, n := range sizes {
					x := make([]float32, n)
					for i := range x {
						x[i] = value(r, k, i)
					}
					w, err := tensor.New(dev, n)
					if err != nil {
						return err
					}
					g, err := tensor.FromFloat32(dev, x, n)
					if err != nil {
						return err
					}
					w.SetGrad(g)
					params = append(params, w)
				}
				red, err := dist.NewReducer(c, params, dist.ReducerOptions{BucketBytes: 100})
				if err != nil {
					return err
				}
				defer red.Close()
				if red.Buckets() != 2 {
					return fmt.Errorf("%d buckets, expected 2", red.Buckets())
				}
				if err := red.Wait(); err != nil {
					return err
				}
				for k, w := range params {
					got := w.Grad().Float32s()
					for i, v := range got {
						want := (float64(value(0, k, i)) + float64(value(1, k, i))) / 2
						if float64(v) != want {
							return fmt.Errorf("gradient %d element %d = %v, expected %v", k, i, v, want)
						}
					}
				}
				return nil
			}()
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}
