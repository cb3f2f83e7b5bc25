package autograd

import (
	"math"
	"testing"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/tensor"
)

// attention64 is causal softmax(scale q k^T) v on the host for q, k, v
// [B, T, H, D].
func attention64(q, k, v []float64, b, t, h, d int, scale float64) []float64 {
	out := make([]float64, len(q))
	at := func(x []float64, bi, ti, hi int) []float64 { o := ((bi*t+ti)*h + hi) * d; return x[o : o+d] }
	for bi := range b {
		for hi := range h {
			for i := range t {
				s := make([]float64, i+1)
				m := math.Inf(-1)
				for j := range s {
					for e, qe := range at(q, bi, i, hi) {
						s[j] += qe * at(k, bi, j, hi)[e]
					}
					s[j] *= scale
					m = max(m, s[j])
				}
				var z float64
				for j := range s {
					s[j] = math.Exp(s[j] - m)
					z += s[j]
				}
				o := at(out, bi, i, hi)
				for j := range s {
					for e, ve := range at(v, bi, j, hi) {
						o[e] += s[j] / z * ve
					}
				}
			}
		}
	}
	return out
}

// TestFloat64Scalars: the scalars a graph is given (Scale's alpha, the
// norms' eps, the attention scale, the cross-entropies' 1/rows, the random
// fills' parameters, the RoPE angles) are float64 and a float64 graph
// applies them exactly, so each op equals its float64 host reference to
// rounding. With the scalars rounded to float32, as they were, each case
// is 1e-10 to 1e-7 off.
func TestFloat64Scalars(t *testing.T) {
	dev := cpu.New()
	x := func(seed uint64, s float64, shape ...int) *tensor.Tensor { return input64(t, seed, shape, s, 0, 0) }
	const seed = 0x5ca1a7
	cases := []struct {
		name string
		run  func(g *Graph) (got *tensor.Tensor, want []float64)
		tol  float64
	}{
		{"Scale by -1/5", func(g *Graph) (*tensor.Tensor, []float64) {
			a := x(1, 1, 7)
			want := a.Float64s()
			for i := range want {
				want[i] *= -1.0 / 5
			}
			return g.Scale(a, -1.0/5), want
		}, 0},
		{"RMSNorm eps 1e-6 of small inputs", func(g *Graph) (*tensor.Tensor, []float64) {
			a := x(2, 1e-3, 3, 5)
			v := a.Float64s()
			want := make([]float64, len(v))
			for r := range 3 {
				var ms float64
				for _, e := range v[r*5 : r*5+5] {
					ms += e * e
				}
				rs := 1 / math.Sqrt(ms/5+1e-6)
				for c := range 5 {
					want[r*5+c] = v[r*5+c] * rs
				}
			}
			return g.RMSNorm(a, nil, 1e-6), want
		}, 1e-14},
		{"Attention scale 1/sqrt(6)", func(g *Graph) (*tensor.Tensor, []float64) {
			q, k, v := x(3, 1, 2, 4, 2, 6), x(4, 1, 2, 4, 2, 6), x(5, 1, 2, 4, 2, 6)
			scale := 1 / math.Sqrt(6)
			return g.Attention(q, k, v, scale), attention64(q.Float64s(), k.Float64s(), v.Float64s(), 2, 4, 2, 6, scale)
		}, 1e-14},
		{"CrossEntropy of 3 rows", func(g *Graph) (*tensor.Tensor, []float64) {
			logits := x(6, 1, 3, 4)
			ids, _ := tensor.FromInt32(dev, []int32{1, 3, 0}, 3)
			return g.CrossEntropy(logits, ids), []float64{crossEntropy64(logits.Float64s(), []int32{1, 3, 0}, 4)}
		}, 1e-15},
		{"LinearCrossEntropy of 3 rows", func(g *Graph) (*tensor.Tensor, []float64) {
			h, w := x(7, 1, 3, 2), x(8, 1, 4, 2)
			hv, wv := h.Float64s(), w.Float64s()
			logits := make([]float64, 12)
			for r := range 3 {
				for c := range 4 {
					logits[r*4+c] = hv[r*2]*wv[c*2] + hv[r*2+1]*wv[c*2+1]
				}
			}
			ids, _ := tensor.FromInt32(dev, []int32{2, 2, 1}, 3)
			return g.LinearCrossEntropy(h, w, ids, 2), []float64{crossEntropy64(logits, []int32{2, 2, 1}, 4)}
		}, 1e-15},
		{"Normal mean 0.1 std 1/3", func(g *Graph) (*tensor.Tensor, []float64) {
			want := make([]float64, 9)
			for i := range want {
				want[i] = device.NormalValue64(seed, uint64(3+i), 0.1, 1.0/3)
			}
			return g.Normal(device.Float64, seed, 3, 0.1, 1.0/3, 9), want
		}, 0},
		{"Uniform on [0.1, 0.7)", func(g *Graph) (*tensor.Tensor, []float64) {
			want := make([]float64, 9)
			for i := range want {
				want[i] = 0.1 + (0.7-0.1)*float64(device.Uniform24(device.RandomWord(seed, uint64(i))))
			}
			return g.Uniform(device.Float64, seed, 0, 0.1, 0.7, 9), want
		}, 0},
		{"Bernoulli 0.3", func(g *Graph) (*tensor.Tensor, []float64) {
			want := make([]float64, 64)
			for i := range want {
				if float64(device.Uniform24(device.RandomWord(seed, uint64(i)))) < 0.3 {
					want[i] = 1
				}
			}
			return g.Bernoulli(device.Float64, seed, 0, 0.3, 64), want
		}, 0},
		{"RoPE tables", func(g *Graph) (*tensor.Tensor, []float64) {
			cos, _, err := RoPETables(dev, device.Float64, 5, 6, 10000)
			if err != nil {
				t.Fatal(err)
			}
			want := make([]float64, 15)
			for p := range 5 {
				for j := range 3 {
					want[p*3+j] = math.Cos(float64(p) * math.Pow(10000, -2*float64(j)/6))
				}
			}
			return cos, want
		}, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := New(dev)
			defer g.Reset()
			got, want := c.run(g)
			if err := g.Err(); err != nil {
				t.Fatal(err)
			}
			if got.DType() != device.Float64 {
				t.Fatalf("result is %v", got.DType())
			}
			v := got.Float64s()
			for i := range want {
				if d := math.Abs(v[i] - want[i]); !(d <= c.tol*max(1, math.Abs(want[i]))) {
					t.Fatalf("element %d = %.17g, float64 reference %.17g (diff %.3g, tolerance %g)", i, v[i], want[i], d, c.tol)
				}
			}
		})
	}
}

// crossEntropy64 is the mean over rows of logsumexp(row) - row[target].
func crossEntropy64(logits []float64, targets []int32, vocab int) float64 {
	var sum float64
	for r, tgt := range targets {
		row := logits[r*vocab : (r+1)*vocab]
		m := math.Inf(-1)
		for _, v := range row {
			m = max(m, v)
		}
		var z float64
		for _, v := range row {
			z += math.Exp(v - m)
		}
		sum += m + math.Log(z) - row[tgt]
	}
	return sum / float64(len(targets))
}

// TestFloat64CrossEntropyGradient: the float64 cross-entropy's gradient
// is (softmax - onehot) / rows with 1/rows exact (3 rows: 1/float32(3) is
// 3e-8 off), for both the plain and the fused-head loss.
func TestFloat64CrossEntropyGradient(t *testing.T) {
	dev := cpu.New()
	logits := input64(t, 9, []int{3, 4}, 1, 0, 0)
	targets := []int32{1, 3, 0}
	ids, _ := tensor.FromInt32(dev, targets, 3)
	g := New(dev)
	if err := g.Backward(g.CrossEntropy(logits, ids)); err != nil {
		t.Fatal(err)
	}
	v, got := logits.Float64s(), logits.Grad().Float64s()
	for r, tgt := range targets {
		row := v[r*4 : r*4+4]
		m := math.Inf(-1)
		for _, e := range row {
			m = max(m, e)
		}
		var z float64
		for _, e := range row {
			z += math.Exp(e - m)
		}
		for c := range 4 {
			want := math.Exp(row[c]-m) / z
			if c == int(tgt) {
				want--
			}
			want /= 3
			if d := math.Abs(got[r*4+c] - want); d > 1e-16 {
				t.Errorf("dlogits[%d][%d] = %.17g, want %.17g (diff %.3g)", r, c, got[r*4+c], want, d)
			}
		}
	}
	g.Reset()

	// The fused head: dh = dlogits W, dW = dlogits^T h, with that dlogits.
	h, w := input64(t, 10, []int{3, 2}, 1, 0, 0), input64(t, 11, []int{4, 2}, 1, 0, 0)
	g2 := New(dev)
	if err := g2.Backward(g2.LinearCrossEntropy(h, w, ids, 2)); err != nil {
		t.Fatal(err)
	}
	hv, wv := h.Float64s(), w.Float64s()
	dl := make([]float64, 12)
	for r, tgt := range targets {
		row := make([]float64, 4)
		m := math.Inf(-1)
		for c := range 4 {
			row[c] = hv[r*2]*wv[c*2] + hv[r*2+1]*wv[c*2+1]
			m = max(m, row[c])
		}
		var z float64
		for _, e := range row {
			z += math.Exp(e - m)
		}
		for c := range 4 {
			dl[r*4+c] = math.Exp(row[c]-m) / z
			if c == int(tgt) {
				dl[r*4+c]--
			}
			dl[r*4+c] /= 3
		}
	}
	dh := h.Grad().Float64s()
	for r := range 3 {
		for e := range 2 {
			var want float64
			for c := range 4 {
				want += dl[r*4+c] * wv[c*2+e]
			}
			if d := math.Abs(dh[r*2+e] - want); d > 1e-15 {
				t.Errorf("dh[%d][%d] = %.17g, want %.17g (diff %.3g)", r, e, dh[r*2+e], want, d)
			}
		}
	}
}
