package dist

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"time"
)

// TorchrunEnv is the launch environment set by torchrun (and by
// torch.distributed.launch, and by hand on clusters without MPI).
type TorchrunEnv struct {
	// Rank is $RANK, this process's global rank.
	Rank int
	// WorldSize is $WORLD_SIZE, the number of ranks.
	WorldSize int
	// LocalRank is $LOCAL_RANK, the rank on this node (0 when unset): the
	// GPU ordinal of one-GPU-per-rank training.
	LocalRank int
	// MasterAddr and MasterPort ($MASTER_ADDR, $MASTER_PORT) locate rank 0's
	// rendezvous.
	MasterAddr string
	MasterPort int
}

// Addr returns MASTER_ADDR:MASTER_PORT.
func (e TorchrunEnv) Addr() string {
	return net.JoinHostPort(e.MasterAddr, strconv.Itoa(e.MasterPort))
}

// Torchrun reads the torchrun environment. It reports false (and no error)
// when RANK and WORLD_SIZE are both unset; a partial or malformed
// environment is an error naming the variable.
func Torchrun() (TorchrunEnv, bool, error) {
	_, hasRank := os.LookupEnv("RANK")
	_, hasSize := os.LookupEnv("WORLD_SIZE")
	if !hasRank && !hasSize {
		return TorchrunEnv{}, false, nil
	}
	var e TorchrunEnv
	ints := []struct {
		name     string
		p        *int
		def, min int
		required bool
	}{
		{"RANK", &e.Rank, 0, 0, true}, {"WORLD_SIZE", &e.WorldSize, 0, 1, true},
		{"LOCAL_RANK", &e.LocalRank, 0, 0, false}, {"MASTER_PORT", &e.MasterPort, 29500, 1, false},
	}
	for _, v := range ints {
		s, ok := os.LookupEnv(v.name)
		if !ok || s == "" {
			if v.required {
				return e, false, fmt.Errorf("dist: torchrun environment: %s is unset (RANK and WORLD_SIZE go together)", v.name)
			}
			*v.p = v.def
			continue
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < v.min {
			return e, false, fmt.Errorf("dist: torchrun environment: %s=%q: expected an integer >= %d", v.name, s, v.min)
		}
		*v.p = n
	}
	if e.Rank >= e.WorldSize {
		return e, false, fmt.Errorf("dist: torchrun environment: RANK=%d out of range for WORLD_SIZE=%d", e.Rank, e.WorldSize)
	}
	e.MasterAddr = os.Getenv("MASTER_ADDR")
	e.MasterAddr = cmp.Or(e.MasterAddr, "127.0.0.1")
	return e, true, nil
}

// rendezvousMagic opens every rendezvous hello ("HLBT").
const rendezvousMagic = 0x484c4254

// RendezvousBroadcast gives every rank rank 0's payload through a TCP
// rendezvous at addr, the way an NCCL unique id travels without MPI: rank 0
// listens at addr and waits for the size-1 other ranks, which connect
// (retrying while rank 0 is not up yet) and announce their rank and world
// size; once all are in, rank 0 sends the payload to each. Within timeout,
// rank 0 returns an error listing the ranks that never connected, and the
// others one naming the address they could not reach; ranks that disagree on
// the world size, or a rank that connects twice, are errors too. Only rank
// 0's payload is used (the others may pass nil).
func RendezvousBroadcast(addr string, rank, size int, payload []byte, timeout time.Duration) ([]byte, error) {
	if size < 1 || rank < 0 || rank >= size {
		return nil, fmt.Errorf("dist: rendezvous: rank %d out of range for %d ranks", rank, size)
	}
	if timeout <= 0 {
		return nil, fmt.Errorf("dist: rendezvous: timeout %v, expected a positive duration", timeout)
	}
	deadline := time.Now().Add(timeout)
	if rank == 0 {
		return payload, serveRendezvous(addr, size, payload, deadline, timeout)
	}
	return joinRendezvous(addr, rank, size, deadline, timeout)
}

func serveRendezvous(addr string, size int, payload []byte, deadline time.Time, timeout time.Duration) error {
	if size == 1 {
		return nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("dist: rendezvous: rank 0 cannot listen at %s: %w", addr, err)
	}
	defer ln.Close()
	ln.(*net.TCPListener).SetDeadline(deadline)
	conns := make([]net.Conn, size)
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}()
	for joined := 1; joined < size; {
		c, err := ln.Accept()
		if err != nil {
			var missing []int
			for r := 1; r < size; r++ {
				if conns[r] == nil {
					missing = append(missing, r)
				}
			}
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				return fmt.Errorf("dist: rendezvous at %s: ranks %v of %d did not connect within %v", addr, missing, size, timeout)
			}
			return fmt.Errorf("dist: rendezvous at %s: accept: %w (ranks %v missing)", addr, err, missing)
		}
		c.SetDeadline(deadline)
		var hello [12]byte
		if _, err := io.ReadFull(c, hello[:]); err != nil {
			c.Close()
			continue // not one of ours (a port scanner, a health check)
		}
		if binary.LittleEndian.Uint32(hello[0:]) != rendezvousMagic {
			c.Close()
			continue
		}
		r, n := int(binary.LittleEndian.Uint32(hello[4:])), int(binary.LittleEndian.Uint32(hello[8:]))
		if n != size {
			c.Close()
			return fmt.Errorf("dist: rendezvous at %s: rank %d has world size %d, rank 0 has %d", addr, r, n, size)
		}
		if r < 1 || r >= size || conns[r] != nil {
			c.Close()
			return fmt.Errorf("dist: rendezvous at %s: rank %d connected twice or is out of range for %d ranks", addr, r, size)
		}
		conns[r] = c
		joined++
	}
	msg := binary.LittleEndian.AppendUint32(nil, uint32(len(payload)))
	msg = append(msg, payload...)
	for r := 1; r < size; r++ {
		if _, err := conns[r].Write(msg); err != nil {
			return fmt.Errorf("dist: rendezvous at %s: sending to rank %d: %w", addr, r, err)
		}
	}
	return nil
}

func joinRendezvous(addr string, rank, size int, deadline time.Time, timeout time.Duration) ([]byte, error) {
	var c net.Conn
	var last error
	for {
		var err error
		c, err = net.DialTimeout("tcp", addr, time.Until(deadline))
		if err == nil {
			break
		}
		last = err
		if time.Now().Add(100 * time.Millisecond).After(deadline) {
			return nil, fmt.Errorf("dist: rendezvous: rank %d could not reach rank 0 at %s within %v: %w", rank, addr, timeout, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
	defer c.Close()
	c.SetDeadline(deadline)
	var hello [12]byte
	binary.LittleEndian.PutUint32(hello[0:], rendezvousMagic)
	binary.LittleEndian.PutUint32(hello[4:], uint32(rank))
	binary.LittleEndian.PutUint32(hello[8:], uint32(size))
	if _, err := c.Write(hello[:]); err != nil {
		return nil, fmt.Errorf("dist: rendezvous: rank %d: sending to rank 0 at %s: %w", rank, addr, err)
	}
	var n [4]byte
	if _, err := io.ReadFull(c, n[:]); err != nil {
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			return nil, fmt.Errorf("dist: rendezvous: rank %d: rank 0 at %s did not send the payload within %v (other ranks missing?)", rank, addr, timeout)
		}
		return nil, fmt.Errorf("dist: rendezvous: rank %d: rank 0 at %s closed the connection (%w): it reported an error", rank, addr, err)
	}
	payload := make([]byte, binary.LittleEndian.Uint32(n[:]))
	if _, err := io.ReadFull(c, payload); err != nil {
		return nil, fmt.Errorf("dist: rendezvous: rank %d: reading %d bytes from rank 0 at %s: %w", rank, len(payload), addr, err)
	}
	return payload, nil
}
