package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/cpu"
)

// suitePairDistanceMax scans row blocks of a Gram matrix as several
// column tiles (diagonal, above, below) on CUDA and on the CPU backend with
// the same inputs: the running maxima agree to float32 rounding (the GPU
// may fuse the multiply-add) and their columns exactly (no near-ties in
// random data).
func suitePairDistanceMax(t *testing.T, g *Device) {
	c0dev := cpu.New()
	rng := rand.New(rand.NewPCG(13, 14))
	for _, sh := range []struct{ rows, cols, r0 int }{{1, 1, 0}, {37, 64, 10}, {300, 1000, 250}, {1024, 1024, 0}, {5, 3000, 0}} {
		rows, cols, r0 := sh.rows, sh.cols, sh.r0
		t.Run(fmt.Sprintf("%dx%d@%d", rows, cols, r0), func(t *testing.T) {
			inf := make([]float32, rows)
			for i := range inf {
				inf[i] = float32(math.Inf(-1))
			}
			type side struct {
				d         fullDevice
				best, arg device.Buffer
			}
			var sides []side
			for _, d := range []fullDevice{c0dev, g} {
				best, _ := d.Alloc(device.Float32, rows)
				arg, _ := d.Alloc(device.Int32, rows)
				d.CopyFromHost(best, inf)
				sides = append(sides, side{d, best, arg})
			}
			na := randn(rng, rows, 1)
			for _, c0 := range []int{r0 - cols, r0, r0 + 3, r0 + rows + 11} {
				gram, nb := randn(rng, rows*cols, 1), randn(rng, cols, 1)
				for _, s := range sides {
					up := func(x []float32) device.Buffer {
						b, _ := s.d.Alloc(device.Float32, len(x))
						s.d.CopyFromHost(b, x)
						return b
					}
					s.d.PairDistanceMax(s.best, s.arg, up(gram), up(na), up(nb), rows, cols, r0, c0)
				}
			}
			if err := g.Synchronize(); err != nil {
				t.Fatal(err)
			}
			var bests [2][]float32
			var args [2][]int32
			for k, s := range sides {
				bests[k], args[k] = make([]float32, rows), make([]int32, rows)
				s.d.CopyToHost(bests[k], s.best)
				s.d.CopyInt32ToHost(args[k], s.arg)
			}
			for i := range rows {
				w, x := float64(bests[0][i]), float64(bests[1][i])
				if args[0][i] != args[1][i] || !(math.Abs(x-w) <= 1e-6*(1+math.Abs(w)) || w == x) {
					t.Fatalf("row %d: GPU best %v at column %d, CPU %v at %d", i, x, args[1][i], w, args[0][i])
				}
			}
		})
	}
}

// TestStubPairDistanceMaxLaunch checks the launch of PairDistanceMax on the
// stub libraries: one block of pairThreads per row and every argument in
// its slot.
func TestStubPairDistanceMaxLaunch(t *testing.T) {
	d, s := newStubDevice(t)
	f32 := func(n int) device.Buffer {
		b, _ := d.Alloc(device.Float32, n)
		return b
	}
	best, gram, na, nb := f32(300), f32(300*1000), f32(300), f32(1000)
	arg, _ := d.Alloc(device.Int32, 300)
	s.setNParams(9)
	defer s.setNParams(0)
	d.PairDistanceMax(best.Slice(100, 200), arg.Slice(100, 200), gram, na, nb.Slice(24, 976), 200, 976, 5000, 4096)
	if s.launchName() != "h_pair_distance_max_f32" {
		t.Fatalf("launched %q", s.launchName())
	}
	var dims [9]int64
	s.launchDims(&dims)
	if dims[0] != 200 || dims[1] != 1 || dims[3] != pairThreads || dims[4] != 1 {
		t.Errorf("launch dims %v", dims)
	}
	var params [32]uint64
	s.launchParams(&params)
	ptr := func(b device.Buffer) uint64 { return b.(*Buffer).ptr }
	want := []uint64{ptr(best) + 400, ptr(arg) + 400, ptr(gram), ptr(na), ptr(nb) + 96, 200, 976, 5000, 4096}
	for i, w := range want {
		if params[i] != w {
			t.Errorf("param %d = %#x, want %#x", i, params[i], w)
		}
	}
	// An int32 best is refused with the op's name, not launched.
	d.PairDistanceMax(arg, arg, gram, na, nb, 1, 1, 0, 1)
	if err := d.Synchronize(); err == nil || !strings.Contains(err.Error(), "PairDistanceMax") {
		t.Errorf("int32 best: Synchronize = %v", err)
	}
}
