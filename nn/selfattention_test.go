package nn

import (
	"fmt"
	"math"
	"testing"

	"github.com/hilbert-ml/hilbert/autograd"
	"github.com/hilbert-ml/hilbert/device"
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
	rope, err := NewRoPE(dev, device.Float32, 16, 8, 10000)
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
				tensor.ZeroGrad(ps)
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
					o := composedAttention(g, h(&a.Q, true), h(&a.K, true), h(&a.V, false), 1/math.Sqrt(float64(a.HeadDim)), true, 0, nil)
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
	rope, err := NewRoPE(dev, device.Float32, 16, 8, 10000)
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

// TestSelfAttentionMasks: an additive causal mask on non-causal attention
// equals causal attention, and a key-padding mask makes a padded sequence's
// real positions equal those of the unpadded sequence run alone.
func TestSelfAttentionMasks(t *testing.T) {
	dev := cpu.New()
	in := NewInit(dev, 8, 0.3)
	a := NewSelfAttention(in, 16, AttentionOptions{Heads: 2, Bias: true})
	x := randInput(t, 21, 2, 6, 16)
	g := autograd.New(dev)
	g.SetNoGrad(true)
	defer g.Reset()

	causal := make([]float32, 36)
	for i := range 6 {
		for j := i + 1; j < 6; j++ {
			causal[i*6+j] = float32(math.Inf(-1))
		}
	}
	mask, _ := tensor.FromFloat32(dev, causal, 6, 6)
	masked := append([]float32(nil), a.ForwardMasked(g, x, mask).Float32s()...)
	a.Causal = true
	want := a.Forward(g, x).Float32s()
	a.Causal = false
	if d := maxDiff(masked, want); d > 1e-5 {
		t.Errorf("additive causal mask differs from causal attention by %g", d)
	}

	pad, err := PaddingMask(dev, device.Float32, []int{4, 6}, 6)
	if err != nil {
		t.Fatal(err)
	}
	padded := a.ForwardMasked(g, x, pad).Float32s()
	alone := a.Forward(g, g.Slice(g.Slice(x, 0, 0, 1), 1, 0, 4)).Float32s()
	if d := maxDiff(padded[:4*16], alone); d > 1e-5 {
		t.Errorf("padded sequence's first 4 positions differ from the sequence alone by %g", d)
	}
	full := a.Forward(g, g.Slice(x, 0, 1, 2)).Float32s()
	if d := maxDiff(padded[6*16:], full); d > 1e-5 {
		t.Errorf("the unpadded sequence differs by %g", d)
	}
	if _, err := PaddingMask(dev, device.Float32, []int{7}, 6); err == nil {
		t.Error("a length past the padded size was accepted")
	}
	if a.ForwardMasked(g, x, nil); g.Err() == nil {
		t.Error("a nil mask was accepted")
	}
}
