package device

import (
	"math"
	"testing"
)

// TestPhiloxKnownAnswers checks Philox4x32 against the three philox4x32 10
// lines of Random123's kat_vectors.
func TestPhiloxKnownAnswers(t *testing.T) {
	cases := []struct {
		ctr  [4]uint32
		key  [2]uint32
		want [4]uint32
	}{
		{[4]uint32{}, [2]uint32{}, [4]uint32{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
		{[4]uint32{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, [2]uint32{0xffffffff, 0xffffffff},
			[4]uint32{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
		{[4]uint32{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, [2]uint32{0xa4093822, 0x299f31d0},
			[4]uint32{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
	}
	for _, c := range cases {
		if got := Philox4x32(c.ctr, c.key); got != c.want {
			t.Errorf("Philox4x32(%08x, %08x) = %08x, want %08x", c.ctr, c.key, got, c.want)
		}
	}
}

// TestFillRandomOffsets: a fill split at any point equals the whole fill,
// and the per-element functions agree with it.
func TestFillRandomOffsets(t *testing.T) {
	for _, dist := range []Distribution{Uniform, Normal, Bernoulli} {
		whole := make([]float32, 37)
		FillRandom(whole, dist, 12345, 3, 0.25, 2)
		for cut := range len(whole) {
			a, b := make([]float32, cut), make([]float32, len(whole)-cut)
			FillRandom(a, dist, 12345, 3, 0.25, 2)
			FillRandom(b, dist, 12345, 3+uint64(cut), 0.25, 2)
			for i, v := range append(a, b...) {
				if math.Float32bits(v) != math.Float32bits(whole[i]) {
					t.Fatalf("%v: split at %d differs at %d: %v vs %v", dist, cut, i, v, whole[i])
				}
			}
		}
		for i, v := range whole {
			e := uint64(3 + i)
			var want float32
			switch dist {
			case Uniform:
				want = UniformValue(12345, e, 0.25, 2)
			case Normal:
				want = float32(NormalValue64(12345, e, 0.25, 2))
			case Bernoulli:
				want = BernoulliValue(12345, e, 0.25)
			}
			if v != want {
				t.Fatalf("%v element %d: %v, per-element function %v", dist, i, v, want)
			}
		}
	}
}

func TestNewPlanMergesAxes(t *testing.T) {
	d := DimsOf(2, 3, 4)
	// Contiguous operands merge to one axis.
	p := NewPlan(d, d.RowMajor(), d.RowMajor())
	if p.Rank != 1 || p.N[0] != 24 || p.Layouts[1].Strides[0] != 1 {
		t.Fatalf("contiguous plan %+v", p)
	}
	// A broadcast row [4] over [2 3 4]: rows of 6, inner 4.
	row, ok := Broadcast(nil, []int{4}, d)
	if !ok {
		t.Fatal("broadcast refused")
	}
	p = NewPlan(d, d.RowMajor(), row.Layout)
	if p.Rank != 2 || p.N[0] != 6 || p.N[1] != 4 || p.Layouts[1].Strides != [MaxDims]int{0, 1} {
		t.Fatalf("row plan %+v", p)
	}
	if rows, inner := p.Inner(); rows != 6 || inner != 4 {
		t.Fatalf("Inner = %d, %d", rows, inner)
	}
	// Size-1 axes drop; an empty axis empties the plan.
	p = NewPlan(DimsOf(1, 5, 1), DimsOf(1, 5, 1).RowMajor())
	if p.Rank != 1 || p.N[0] != 5 {
		t.Fatalf("size-1 axes kept: %+v", p)
	}
	if p = NewPlan(DimsOf(3, 0, 2), DimsOf(3, 0, 2).RowMajor()); p.Numel() != 0 {
		t.Fatalf("empty plan has %d elements", p.Numel())
	}
	if p = NewPlan(DimsOf()); p.Rank != 1 || p.Numel() != 1 {
		t.Fatalf("scalar plan %+v", p)
	}
	// A transposed operand keeps two axes, and RowOffsets walks it.
	tr := Layout{Strides: [MaxDims]int{1, 3}}
	p = NewPlan(DimsOf(3, 2), DimsOf(3, 2).RowMajor(), tr)
	if p.Rank != 2 {
		t.Fatalf("transpose merged: %+v", p)
	}
	if off := p.RowOffsets(2); off[0] != 4 || off[1] != 2 {
		t.Fatalf("RowOffsets(2) = %v", off)
	}
	if _, ok := Broadcast(nil, []int{3}, DimsOf(2, 4)); ok {
		t.Fatal("[3] broadcast to [2 4]")
	}
	if s, ok := BroadcastShapes([]int{3, 1}, []int{2, 1, 4}); !ok || len(s) != 3 || s[0] != 2 || s[1] != 3 || s[2] != 4 {
		t.Fatalf("BroadcastShapes = %v %v", s, ok)
	}
}
