package dist

import (
	"bytes"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// freeAddr returns a localhost address with a port free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func TestRendezvousBroadcast(t *testing.T) {
	payload := bytes.Repeat([]byte{1, 2, 3, 250}, 32) // 128 bytes, an NCCL id's size
	tests := []struct {
		name  string
		size  int
		ranks []int // the ranks that take part
		sizes []int // the world size each claims (nil: size)
		want  []string
	}{
		{"four ranks", 4, []int{0, 1, 2, 3}, nil, nil},
		{"one rank", 1, []int{0}, nil, nil},
		{"rank 2 missing", 3, []int{0, 1}, nil, []string{"ranks [2] of 3 did not connect within 500ms", "rank 1"}},
		{"rank 0 missing", 2, []int{1}, nil, []string{"", "rank 1 could not reach rank 0"}},
		{"size mismatch", 3, []int{0, 1}, []int{3, 2}, []string{"rank 1 has world size 2, rank 0 has 3", "rank 1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr := freeAddr(t)
			got := make([][]byte, len(tt.ranks))
			errs := make([]error, len(tt.ranks))
			var wg sync.WaitGroup
			start := time.Now()
			for i, r := range tt.ranks {
				size := tt.size
				if tt.sizes != nil {
					size = tt.sizes[i]
				}
				var p []byte
				if r == 0 {
					p = payload
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					got[i], errs[i] = RendezvousBroadcast(addr, r, size, p, 500*time.Millisecond)
				}()
			}
			wg.Wait()
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("rendezvous took %v, bound 5s", d)
			}
			for i, r := range tt.ranks {
				if tt.want == nil {
					if errs[i] != nil {
						t.Fatalf("rank %d: %v", r, errs[i])
					}
					if !bytes.Equal(got[i], payload) {
						t.Fatalf("rank %d got % x, expected rank 0's payload", r, got[i])
					}
					continue
				}
				if w := tt.want[i]; w != "" && (errs[i] == nil || !strings.Contains(errs[i].Error(), w)) {
					t.Errorf("rank %d: error %v, expected one containing %q", r, errs[i], w)
				}
			}
		})
	}
}

func TestTorchrun(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		want    TorchrunEnv
		ok      bool
		errPart string
	}{
		{"unset", map[string]string{}, TorchrunEnv{}, false, ""},
		{"full", map[string]string{"RANK": "3", "WORLD_SIZE": "8", "LOCAL_RANK": "3", "MASTER_ADDR": "node0", "MASTER_PORT": "1234"},
			TorchrunEnv{Rank: 3, WorldSize: 8, LocalRank: 3, MasterAddr: "node0", MasterPort: 1234}, true, ""},
		{"defaults", map[string]string{"RANK": "0", "WORLD_SIZE": "1"},
			TorchrunEnv{Rank: 0, WorldSize: 1, MasterAddr: "127.0.0.1", MasterPort: 29500}, true, ""},
		{"rank without size", map[string]string{"RANK": "1"}, TorchrunEnv{}, false, "WORLD_SIZE is unset"},
		{"rank too big", map[string]string{"RANK": "2", "WORLD_SIZE": "2"}, TorchrunEnv{}, false, "RANK=2 out of range for WORLD_SIZE=2"},
		{"bad port", map[string]string{"RANK": "0", "WORLD_SIZE": "2", "MASTER_PORT": "x"}, TorchrunEnv{}, false, `MASTER_PORT="x"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, k := range []string{"RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"} {
				t.Setenv(k, "")
				if v, ok := tt.env[k]; ok {
					t.Setenv(k, v)
				}
			}
			// t.Setenv cannot unset: an empty RANK and WORLD_SIZE stand for unset here.
			if _, ok := tt.env["RANK"]; !ok {
				unsetenv(t, "RANK")
			}
			if _, ok := tt.env["WORLD_SIZE"]; !ok {
				unsetenv(t, "WORLD_SIZE")
			}
			e, ok, err := Torchrun()
			if tt.errPart != "" {
				if err == nil || !strings.Contains(err.Error(), tt.errPart) {
					t.Fatalf("error %v, expected one containing %q", err, tt.errPart)
				}
				return
			}
			if err != nil || ok != tt.ok || e != tt.want {
				t.Fatalf("Torchrun() = %+v, %v, %v; expected %+v, %v", e, ok, err, tt.want, tt.ok)
			}
		})
	}
}

// unsetenv removes k for the rest of the test (after t.Setenv recorded its
// old value for restoring).
func unsetenv(t *testing.T, k string) {
	t.Helper()
	if err := os.Unsetenv(k); err != nil {
		t.Fatal(err)
	}
}
