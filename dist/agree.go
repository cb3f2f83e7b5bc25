package dist

import (
	"fmt"
	"hash/fnv"

	"github.com/hilbert-ml/hilbert/device"
)

// Agree checks that every rank holds the same value of what (a model
// configuration, a seed, a data set's name and size, serialised by the
// caller): each rank's FNV-64a hash of value is all-gathered and compared with
// rank 0's. A mismatch is an error, on every rank, that names what and the
// ranks that differ from rank 0. It exchanges host memory, so it runs on a
// Communicator that gathers host slices (Single, MPI); AgreeOn runs on
// another device's buffers (NCCL's).
func Agree(c Communicator, what string, value []byte) error {
	h, ok := c.(hostGatherer)
	if !ok {
		return fmt.Errorf("dist: comparing %s across ranks: %T gathers device buffers only; use AgreeOn with its device", what, c)
	}
	send := hashPieces(value)
	recv := make([]float32, len(send)*c.Size())
	if err := h.allGatherHost(send, recv); err != nil {
		return fmt.Errorf("dist: comparing %s across ranks: %w", what, err)
	}
	return compareHashes(recv, c.Size(), what)
}

// hostGatherer is a Communicator that all-gathers host slices
// (len(recv) = Size * len(send)) without a device.
type hostGatherer interface {
	allGatherHost(send, recv []float32) error
}

// AgreeOn is Agree with the exchanged hashes in buffers of dev, for a
// communicator of that device (an NCCL one on a GPU).
func AgreeOn(c Communicator, dev device.Device, what string, value []byte) error {
	send := hashPieces(value)
	recv := make([]float32, len(send)*c.Size())
	sendBuf, err := dev.Alloc(device.Float32, len(send))
	if err != nil {
		return fmt.Errorf("dist: comparing %s across ranks: %w", what, err)
	}
	defer dev.Free(sendBuf)
	recvBuf, err := dev.Alloc(device.Float32, len(recv))
	if err != nil {
		return fmt.Errorf("dist: comparing %s across ranks: %w", what, err)
	}
	defer dev.Free(recvBuf)
	dev.CopyFromHost(sendBuf, send)
	if err := c.AllGather(sendBuf, recvBuf); err != nil {
		return fmt.Errorf("dist: comparing %s across ranks: %w", what, err)
	}
	dev.CopyToHost(recv, recvBuf)
	return compareHashes(recv, c.Size(), what)
}

// hashPieces returns value's FNV-64a hash as four 16-bit pieces, each
// exact in a float32.
func hashPieces(value []byte) []float32 {
	h := fnv.New64a()
	h.Write(value)
	sum := h.Sum64()
	send := make([]float32, 4)
	for i := range send {
		send[i] = float32(uint16(sum >> (16 * i)))
	}
	return send
}

// compareHashes names the ranks whose gathered pieces differ from rank 0's.
func compareHashes(recv []float32, size int, what string) error {
	var differ []int
	for r := 1; r < size; r++ {
		for i := 0; i < 4; i++ {
			if recv[4*r+i] != recv[i] {
				differ = append(differ, r)
				break
			}
		}
	}
	if len(differ) > 0 {
		return fmt.Errorf("dist: ranks %v have a different %s than rank 0 (every rank must start with the same one)", differ, what)
	}
	return nil
}
