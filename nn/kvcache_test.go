package nn

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/hilbert-ml/hilbert/autograd"
	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/tensor"
)

// TestKVCacheAppend: appended keys and values come back as the
// concatenation of what went in along the positions, in one batch row and
// in three, through the buffers' growth (room doubles past 1, 3, 7, 13
// positions here); the views of a batch row hold that row.
func TestKVCacheAppend(t *testing.T) {
	dev := cpu.New()
	for _, b := range []int{1, 3} {
		t.Run(fmt.Sprintf("B=%d", b), func(t *testing.T) {
			g := autograd.New(dev)
			g.SetNoGrad(true)
			cache := NewKVCache(2)
			defer cache.Release()
			var ks, vs []*tensor.Tensor // what went in, kept
			for i, n := range []int{1, 2, 4, 1, 5, 1} {
				k, v := randInput(t, uint64(2*i+1), b, n, 2, 3), randInput(t, uint64(2*i+2), b, n, 2, 3)
				ks, vs = append(ks, k), append(vs, v)
				ka, va := cache.Append(g, 1, k, v)
				if err := g.Err(); err != nil {
					t.Fatal(err)
				}
				want := func(xs []*tensor.Tensor) []float32 {
					h := autograd.New(dev)
					return h.Concat(1, xs...).Float32s()
				}
				total := cache.Len(1)
				if !slices.Equal(ka.Shape(), tensor.Shape{b, total, 2, 3}) || !slices.Equal(ka.Float32s(), want(ks)) || !slices.Equal(va.Float32s(), want(vs)) {
					t.Fatalf("append %d (%d positions): keys %v, values %v differ from the concatenation", i, n, ka.Shape(), va.Shape())
				}
				for r := range b {
					kr, _ := cache.row(1, r)
					if got, all := kr.Float32s(), ka.Float32s(); !slices.Equal(got, all[r*total*6:(r+1)*total*6]) {
						t.Fatalf("append %d: row %d's view differs from its keys", i, r)
					}
				}
				g.Reset()
			}
			if cache.Len(1) != 14 || cache.Len(0) != 0 {
				t.Fatalf("lengths %d, %d; want 0 and 14", cache.Len(0), cache.Len(1))
			}
			bad := randInput(t, 99, b, 1, 3, 3)
			if ka, _ := cache.Append(g, 1, bad, bad); ka != nil || g.Err() == nil || !strings.Contains(g.Err().Error(), "do not join layer 1's cached") {
				t.Fatalf("keys of 3 heads on a cache of 2: error %v", g.Err())
			}
		})
	}
}
