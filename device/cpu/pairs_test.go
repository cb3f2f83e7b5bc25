package cpu_test

import (
	"math"
	"testing"

	"github.com/hilbert-ml/hilbert/device/cpu"
)

// pairMaxRef is the naive PairDistanceMax: one row at a time, every
// counted column in order, in float32 like the kernel's formula.
func pairMaxRef(best []float32, arg []int32, g, na, nb []float32, rows, cols, r0, c0 int) {
	for i := range rows {
		for j := range cols {
			if c0+j <= r0+i {
				continue
			}
			x := na[i] + nb[j] - 2*g[i*cols+j]
			if x > best[i] {
				best[i], arg[i] = x, int32(c0+j)
			}
		}
	}
}

// A row block of a Gram matrix scanned as several column tiles (the
// diagonal tile, tiles above it, a tile below it that counts nothing),
// against the naive loop: the running maxima and their columns agree
// exactly (same float32 formula).
func TestPairDistanceMax(t *testing.T) {
	r := newRand(41)
	for _, sh := range []struct{ rows, cols, r0 int }{
		{1, 1, 0}, {7, 5, 0}, {37, 64, 10}, {300, 97, 250}, {1025, 33, 0},
	} {
		rows, r0 := sh.rows, sh.r0
		best := make([]float32, rows)
		for i := range best {
			best[i] = float32(math.Inf(-1))
		}
		arg := make([]int32, rows)
		wantB, wantA := append([]float32(nil), best...), append([]int32(nil), arg...)
		bb, ab := buf(best), ibuf(t, arg)
		na := randSlice(r, rows, 2)
		for _, c0 := range []int{r0 - sh.cols, r0, r0 + 3, r0 + rows + 11} {
			cols := sh.cols
			g, nb := randSlice(r, rows*cols, 1), randSlice(r, cols, 2)
			dev.PairDistanceMax(bb, ab, buf(g), buf(na), buf(nb), rows, cols, r0, c0)
			pairMaxRef(wantB, wantA, g, na, nb, rows, cols, r0, c0)
		}
		gotB, gotA := cpu.Float32s(bb), cpu.Int32s(ab)
		for i := range rows {
			if math.Float32bits(gotB[i]) != math.Float32bits(wantB[i]) || gotA[i] != wantA[i] {
				t.Fatalf("%dx%d at row %d: row %d: best %v at %d, want %v at %d", rows, sh.cols, r0, i, gotB[i], gotA[i], wantB[i], wantA[i])
			}
		}
	}
}

// Ties keep the smallest column (and an equal value in a later call does
// not replace it); NaN never wins; a row with no counted column keeps its
// values.
func TestPairDistanceMaxTiesAndNaN(t *testing.T) {
	nan := float32(math.NaN())
	best := buf([]float32{float32(math.Inf(-1)), float32(math.Inf(-1)), 5})
	arg := ibuf(t, []int32{-1, -1, 7})
	// Row 0 (global row 0): columns 1..3 count; values 1-2g.
	g := buf([]float32{
		9, -1, nan, -1,
		nan, nan, nan, nan,
		0, 0, 0, 0,
	})
	na := buf([]float32{1, 1, 1})
	nb := buf([]float32{0, 0, 0, 0})
	dev.PairDistanceMax(best, arg, g, na, nb, 3, 4, 0, 0)
	// Row 0: x = 3 at columns 1 and 3 (NaN at 2): column 1. Row 1: only
	// NaN. Row 2: x = 1 at column 3 < best 5: unchanged.
	want := []struct {
		b float32
		a int32
	}{{3, 1}, {float32(math.Inf(-1)), -1}, {5, 7}}
	for i, w := range want {
		if b, a := cpu.Float32s(best)[i], cpu.Int32s(arg)[i]; b != w.b || a != w.a {
			t.Errorf("row %d: best %v at %d, want %v at %d", i, b, a, w.b, w.a)
		}
	}
	// A second tile with the same maximum for row 0 does not replace it.
	dev.PairDistanceMax(best.Slice(0, 1), arg.Slice(0, 1), buf([]float32{-1, -1}), buf([]float32{1}), buf([]float32{0, 0}), 1, 2, 0, 4)
	if b, a := cpu.Float32s(best)[0], cpu.Int32s(arg)[0]; b != 3 || a != 1 {
		t.Errorf("tie across calls: best %v at %d, want 3 at 1", b, a)
	}
}
