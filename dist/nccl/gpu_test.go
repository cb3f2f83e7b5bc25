package nccl

import (
	"strings"
	"testing"
	"time"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/cuda"
	"github.com/hilbert-ml/hilbert/dist"
)

// TestGPUAllReduce runs a 1-rank NCCL communicator on the real GPU of
// dist.LocalRank() with the real libnccl.so.2 (scripts/gpu runs it when a GPU
// is lent): a sum and an average of one rank leave the buffer unchanged, the
// all-gather copies it, and it prints the time of a 64M-float in-place
// all-reduce. It skips without a GPU or NCCL.
func TestGPUAllReduce(t *testing.T) {
	ordinal, err := dist.LocalRank()
	if err != nil {
		t.Fatal(err)
	}
	dev, err := cuda.New(ordinal)
	if err != nil {
		t.Skipf("no CUDA device: %v", err)
	}
	defer dev.Close()
	if strings.Contains(dev.Describe(), "emulator") {
		t.Skip("the CUDA emulator: TestCommunicatorEmulated covers it")
	}
	l, err := Open("")
	if err != nil {
		t.Skipf("no NCCL: %v", err)
	}
	v, _ := l.Version()
	id, err := l.GetUniqueID()
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewCommunicator(l, dev, 1, id, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const n = 1 << 20
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(i%1000) - 0.25
	}
	b, err := dev.Alloc(device.Float32, n)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Free(b)
	dev.CopyFromHost(b, x)
	for _, op := range []dist.Op{dist.Sum, dist.Average} {
		if err := c.AllReduce(b, op); err != nil {
			t.Fatal(err)
		}
		got := make([]float32, n)
		dev.CopyToHost(got, b)
		for i := range got {
			if got[i] != x[i] {
				t.Fatalf("1-rank all-reduce %v: element %d = %v, expected %v", op, i, got[i], x[i])
			}
		}
	}
	recv, err := dev.Alloc(device.Float32, n)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Free(recv)
	if err := c.AllGather(b, recv); err != nil {
		t.Fatal(err)
	}
	got := make([]float32, n)
	dev.CopyToHost(got, recv)
	for i := range got {
		if got[i] != x[i] {
			t.Fatalf("1-rank all-gather: element %d = %v, expected %v", i, got[i], x[i])
		}
	}
	big, err := dev.Alloc(device.Float32, 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Free(big)
	if err := c.Barrier(); err != nil {
		t.Fatal(err)
	}
	const reps = 10
	start := time.Now()
	for range reps {
		if err := c.AllReduce(big, dist.Sum); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Barrier(); err != nil {
		t.Fatal(err)
	}
	d := time.Since(start) / reps
	t.Logf("NCCL %d (%s) on %s: 1-rank all-reduce of 64M floats (256 MiB) in %v (%.1f GB/s)",
		v, l.Path(), dev.Describe(), d, float64(4<<26)/d.Seconds()/1e9)
}
