package nn

import (
	"fmt"
	"math"
	"testing"

	"github.com/hilbert-ml/hilbert/autograd"
	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/tensor"
)

func maxDiff(a, b []float32) float64 {
	d := 0.0
	for i := range a {
		d = max(d, math.Abs(float64(a[i]-b[i])))
	}
	return d
}

func randInput(t *testing.T, seed uint64, shape ...int) *tensor.Tensor {
	t.Helper()
	x := NewInit(cpu.New(), seed, 1).Normal(shape...)
	if x == nil {
		t.Fatal("init failed")
	}
	return x
}

// TestSelfAttentionFusedMatchesComposed: the fused causal path and the
// composed one (matrix products, additive mask, softmax) agree in the
// output and in every gradient, with and without QK-norm, RoPE and biases.
func TestSelfAttentionFusedMatchesComposed(t *testing.T) {
	dev := cpu.New()
	rope, err := NewRoPE(dev, 16, 8, 10000)
	if err != nil {
		t.Fatal(err)
	}
	for _, opt := range []AttentionOptions{
		{Heads: 2, Causal: true},
		{Heads: 2, Causal: true, Bias: true},
		{Heads: 4, Causal: true, QKNorm: true, RoPE: rope},
	} {
		t.Run(fmt.Sprintf("heads=%d,bias=%v,qknorm=%v,rope=%v", opt.Heads, opt.Bias, opt.QKNorm, opt.RoPE != nil), func(t *testing.T) {
			in := NewInit(dev, 5, 0.3)
			a := NewSelfAttention(in, 32, opt)
			if in.Err() != nil {
				t.Fatal(in.Err())
			}
			x := randInput(t, 11, 2, 7, 32)
			run := func(composed bool) ([]float32, [][]float32) {
				ps := append(Parameters(&a), x)
				autograd.ZeroGrad(ps)
				g := autograd.New(dev)
				defer g.Reset()
				var y *tensor.Tensor
				if composed {
					b, tt := x.Dim(0), x.Dim(1)
					h := func(l *Linear, rot bool) *tensor.Tensor {
						y := g.Reshape(l.Forward(g, x), b, tt, a.Heads, a.HeadDim)
						if rot && a.QKNorm != nil {
							y = a.QKNorm.Forward(g, y)
						}
						if rot && a.RoPE != nil {
							y = a.RoPE.Forward(g, y)
						}
						return y
					}
					o := composedAttention(g, h(&a.Q, true), h(&a.K, true), h(&a.V, false), 1/math.Sqrt(float64(a.HeadDim)), true, 0)
					y = a.Out.Forward(g, g.Reshape(o, b, tt, 32))
				} else {
					y = a.Forward(g, x)
				}
				if err := g.Err(); err != nil {
					t.Fatal(err)
				}
				out := append([]float32(nil), y.Float32s()...)
				w := randInput(t, 12, y.Shape()...)
				loss := g.Sum(g.Mul(y, w))
				if err := g.Backward(loss); err != nil {
					t.Fatal(err)
				}
				w.Release()
				var grads [][]float32
				for _, p := range ps {
					grads = append(grads, append([]float32(nil), p.Grad().Float32s()...))
				}
				return out, grads
			}
			yf, gf := run(false)
			yc, gc := run(true)
			if d := maxDiff(yf, yc); d > 1e-5 {
				t.Errorf("outputs differ by %g", d)
			}
			for i := range gf {
				if d := maxDiff(gf[i], gc[i]); d > 1e-4 {
					t.Errorf("gradient %d differs by %g", i, d)
				}
			}
		})
	}
}

// TestSelfAttentionCached: running a sequence one position at a time
// through a KV cache (and as a prefix then single steps) gives the output
// of one whole-sequence Forward.
func TestSelfAttentionCached(t *testing.T) {
	dev := cpu.New()
	rope, err := NewRoPE(dev, 16, 8, 10000)
	if err != nil {
		t.Fatal(err)
	}
	in := NewInit(dev, 5, 0.3)
	a := NewSelfAttention(in, 32, AttentionOptions{Heads: 4, Causal: true, Bias: true, QKNorm: true, RoPE: rope})
	x := randInput(t, 13, 2, 9, 32)
	g := autograd.New(dev)
	g.SetNoGrad(true)
	full := append([]float32(nil), a.Forward(g, x).Float32s()...)
	g.Reset()
	for _, prefix := range []int{1, 4} {
		cache := NewKVCache(1)
		got := make([]float32, len(full))
		for p := 0; p < 9; {
			n := 1
			if p == 0 {
				n = prefix
			}
			xs := g.Slice(x, 1, p, p+n)
			y := a.ForwardCached(g, xs, cache, 0)
			if err := g.Err(); err != nil {
				t.Fatal(err)
			}
			ys := y.Float32s()
			for b := range 2 {
				copy(got[(b*9+p)*32:(b*9+p+n)*32], ys[b*n*32:(b+1)*n*32])
			}
			g.Reset()
			p += n
		}
		if cache.Len(0) != 9 {
			t.Errorf("cache holds %d positions, want 9", cache.Len(0))
		}
		cache.Release()
		if d := maxDiff(full, got); d > 1e-5 {
			t.Errorf("prefix %d: cached outputs differ from Forward by %g", prefix, d)
		}
	}
	g.SetNoGrad(false)
	if a.ForwardCached(g, x, NewKVCache(1), 0); g.Err() == nil {
		t.Error("a KV cache on a recording graph was accepted")
	}
}
