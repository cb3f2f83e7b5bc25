package device_test

import (
	"strings"
	"testing"

	"github.com/hilbert-ml/hilbert/device"
)

func TestAttentionShapeKeys(t *testing.T) {
	for _, c := range []struct {
		s       device.AttentionShape
		keys    int
		visible []int // of each query
	}{
		{device.AttentionShape{Seq: 3}, 3, []int{1, 2, 3}},
		{device.AttentionShape{Seq: 3, KVSeq: 3}, 3, []int{1, 2, 3}},
		{device.AttentionShape{Seq: 3, KVSeq: 7}, 7, []int{5, 6, 7}},
		{device.AttentionShape{Seq: 1, KVSeq: 9}, 9, []int{9}},
		{device.AttentionShape{Seq: 4, KVSeq: 2, Unmasked: true}, 2, []int{2, 2, 2, 2}},
		{device.AttentionShape{Seq: 2, Unmasked: true}, 2, []int{2, 2}},
	} {
		if got := c.s.Keys(); got != c.keys {
			t.Errorf("%+v: Keys() = %d, want %d", c.s, got, c.keys)
		}
		var sum float64
		for q, want := range c.visible {
			if got := c.s.Visible(q); got != want {
				t.Errorf("%+v: Visible(%d) = %d, want %d", c.s, q, got, want)
			}
			sum += float64(want)
		}
		if got := c.s.Pairs(); got != sum {
			t.Errorf("%+v: Pairs() = %g, want %g", c.s, got, sum)
		}
		if err := c.s.Check(); err != nil {
			t.Errorf("%+v: Check: %v", c.s, err)
		}
	}
}

func TestAttentionShapeCheck(t *testing.T) {
	for _, c := range []struct {
		s    device.AttentionShape
		want string
	}{
		{device.AttentionShape{Seq: 4, KVSeq: 3}, "at least as many keys"},
		{device.AttentionShape{Seq: 2, KVSeq: -1, Unmasked: true}, "negative"},
		{device.AttentionShape{Batch: -1, Seq: 2}, "negative"},
	} {
		err := c.s.Check()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: Check() = %v, want an error containing %q", c.s, err, c.want)
		}
	}
}
