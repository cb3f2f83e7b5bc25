package dist

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hilbert-ml/hilbert/device/cpu"
)

// benchSizes are gradient sizes of the paper's models, in float32s.
var benchSizes = []struct {
	name string
	n    int
}{
	{"1M floats", 1 << 20},
	{"head 50257x128", 50257 * 128},
	{"d128 2-layer model, 13M", 13_000_000},
}

// benchAllReduce times in-place sum all-reduces of benchSizes and prints, on
// rank 0, the algorithm bandwidth (bytes of the buffer / time) and the bus
// bandwidth (x 2(p-1)/p, the bytes each rank moves in a ring all-reduce),
// beside a same-run reference: a memcpy of the same buffer. Times are the
// median (and best) of 10, each after a barrier.
func benchAllReduce(c *MPIComm, w io.Writer) error {
	for _, s := range benchSizes {
		x := make([]float32, s.n)
		y := make([]float32, s.n)
		buf := cpu.NewFloat32(x)
		if err := c.AllReduce(buf, Sum); err != nil { // warm-up
			return err
		}
		const reps = 10
		times := make([]time.Duration, reps)
		copies := make([]time.Duration, reps)
		for i := range times {
			if err := c.Barrier(); err != nil {
				return err
			}
			start := time.Now()
			if err := c.AllReduce(buf, Sum); err != nil {
				return err
			}
			times[i] = time.Since(start)
			start = time.Now()
			copy(y, x)
			copies[i] = time.Since(start)
		}
		slices.Sort(times)
		slices.Sort(copies)
		d, best, dc := times[reps/2], times[0], copies[reps/2]
		if c.Rank() == 0 {
			bytes := float64(4 * s.n)
			p := float64(c.Size())
			alg := bytes / d.Seconds() / 1e9
			fmt.Fprintf(w, "all-reduce %-26s %5.1f MB  median %7.2f ms (best %7.2f)  alg %5.2f GB/s (best %5.2f)  bus %5.2f GB/s  memcpy %5.2f GB/s  all-reduce/memcpy time %.1fx\n",
				s.name, bytes/1e6, d.Seconds()*1e3, best.Seconds()*1e3, alg, bytes/best.Seconds()/1e9, alg*2*(p-1)/p, bytes/dc.Seconds()/1e9, d.Seconds()/dc.Seconds())
		}
	}
	return nil
}

// TestMPIAllReduceBandwidth prints the MPI all-reduce bandwidth of 2 ranks
// for the paper's gradient sizes; it runs only with HILBERT_DIST_BENCH=1.
func TestMPIAllReduceBandwidth(t *testing.T) {
	if os.Getenv("HILBERT_DIST_BENCH") != "1" {
		t.Skip("set HILBERT_DIST_BENCH=1 to measure the MPI all-reduce bandwidth")
	}
	out, err, _ := mpirun(t, 2, "bench", 5*time.Minute)
	if err != nil {
		t.Fatalf("mpirun: %v\n%s", err, out)
	}
	if !strings.Contains(out, "ok rank 0 of 2") {
		t.Fatalf("benchmark did not finish:\n%s", out)
	}
	t.Log("\n" + out)
}
