package autograd_test

import (
	"testing"

	"github.com/hilbert-ml/hilbert/autograd"
	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/tensor"
)

// TestKeepSurvivesReset keeps a graph output and a Reshape view of one
// across Reset, lets the graph reuse the pool, and checks that the kept
// values are intact and that Release of each returns its buffer.
func TestKeepSurvivesReset(t *testing.T) {
	dev := cpu.New()
	tensor.DrainPool()
	x, err := tensor.FromFloat32(dev, []float32{1, 2, 3, 4, 5, 6}, 2, 3)
	if err != nil {
		t.Fatal(err)
	}
	for _, view := range []bool{false, true} {
		g := autograd.New(dev)
		y := g.Scale(x, 2)
		kept := y
		if view {
			kept = g.Reshape(y, 3, 2)
		}
		g.Keep(kept)
		g.Reset()
		// The graph's next allocations of the same size come from the pool.
		for range 3 {
			z := g.Scale(x, -7)
			if z == nil {
				t.Fatal(g.Err())
			}
		}
		got := kept.Float32s()
		for i, w := range []float32{2, 4, 6, 8, 10, 12} {
			if got[i] != w {
				t.Fatalf("view=%v: kept[%d] = %v after Reset and reuse, want %v", view, i, got[i], w)
			}
		}
		g.Reset()
		before := tensor.PoolBytes()
		kept.Release()
		if tensor.PoolBytes() != before+6*4 {
			t.Errorf("view=%v: Release of the kept tensor returned %d bytes to the pool, want 24", view, tensor.PoolBytes()-before)
		}
	}
}
