package autograd

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/tensor"
)

// attentionGolden is a case of ops_golden.json's "attention" (from
// scripts/ops_golden.py): PyTorch's float64 softmax(q k^T scale + mask) v
// for q [B, Tq, H, D] and k, v [B, Tk, H, D], and the gradients of
// sum(out * r).
type attentionGolden struct {
	Name   string       `json:"name"`
	Causal bool         `json:"causal"`
	Scale  float32      `json:"scale"`
	Q      goldenTensor `json:"q"`
	K      goldenTensor `json:"k"`
	V      goldenTensor `json:"v"`
	R      goldenTensor `json:"r"`
	Out    goldenTensor `json:"out"`
	DQ     goldenTensor `json:"dq"`
	DK     goldenTensor `json:"dk"`
	DV     goldenTensor `json:"dv"`
}

func loadAttentionGolden(t *testing.T) []attentionGolden {
	t.Helper()
	raw, err := os.ReadFile("testdata/ops_golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		Attention []attentionGolden `json:"attention"`
	}
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatalf("testdata/ops_golden.json: %v", err)
	}
	if len(g.Attention) == 0 {
		t.Fatal("testdata/ops_golden.json has no attention cases (scripts/ops_golden.py writes them)")
	}
	return g.Attention
}

// tensorOf makes a CPU tensor of a golden one in dtype dt.
func (gt goldenTensor) tensorOf(t *testing.T, dt device.DType, grad bool) *tensor.Tensor {
	t.Helper()
	x := gt.tensor64(t, false)
	if dt == device.Float32 {
		f := make([]float32, len(gt.Data))
		for i, v := range gt.Data {
			f[i] = float32(v)
		}
		var err error
		if x, err = tensor.FromFloat32(cpu.New(), f, gt.Shape...); err != nil {
			t.Fatal(err)
		}
	}
	x.SetRequiresGrad(grad)
	return x
}

// TestAttentionKVGolden compares Attention (causal, keys at least as many
// as the queries: the queries are the last positions) and CrossAttention
// (unmasked) and their gradients with PyTorch's formula: in float64 (the
// composition from the Core) to 1e-12, and in float32 (the CPU's fused
// kernel, on inputs rounded to float32) to float32 accuracy.
func TestAttentionKVGolden(t *testing.T) {
	for _, c := range loadAttentionGolden(t) {
		for _, dt := range []device.DType{device.Float64, device.Float32} {
			t.Run(fmt.Sprintf("%s/%v", c.Name, dt), func(t *testing.T) {
				tol := 1e-12
				if dt == device.Float32 {
					tol = 2e-5
				}
				q, k, v := c.Q.tensorOf(t, dt, true), c.K.tensorOf(t, dt, true), c.V.tensorOf(t, dt, true)
				g := New(cpu.New())
				defer g.Reset()
				att := g.CrossAttention
				if c.Causal {
					att = g.Attention
				}
				out := att(q, k, v, float64(c.Scale))
				loss := g.Sum(g.Mul(out, c.R.tensorOf(t, dt, false)))
				if err := g.Err(); err != nil {
					t.Fatal(err)
				}
				closeTo(t, "out", out, c.Out, tol)
				if err := g.Backward(loss); err != nil {
					t.Fatal(err)
				}
				closeTo(t, "dq", q.Grad(), c.DQ, tol)
				closeTo(t, "dk", k.Grad(), c.DK, tol)
				closeTo(t, "dv", v.Grad(), c.DV, tol)
			})
		}
	}
}

// TestAttentionKVGradCheck checks the gradients of Attention over a longer
// key sequence and of CrossAttention by finite differences in float64,
// alone and inside a small composition (a projection of the output).
func TestAttentionKVGradCheck(t *testing.T) {
	x := func(seed uint64, shape ...int) *tensor.Tensor { return input64(t, seed, shape, 1, 0, 0) }
	qkv := func(seed uint64, b, tq, tk, h, d int) func(t *testing.T) []*tensor.Tensor {
		return func(t *testing.T) []*tensor.Tensor {
			return []*tensor.Tensor{x(seed, b, tq, h, d), x(seed+1, b, tk, h, d), x(seed+2, b, tk, h, d)}
		}
	}
	causal := func(g *Graph, in []*tensor.Tensor) *tensor.Tensor { return g.Attention(in[0], in[1], in[2], 0.7) }
	cross := func(g *Graph, in []*tensor.Tensor) *tensor.Tensor { return g.CrossAttention(in[0], in[1], in[2], 0.7) }
	runChecks64(t, []check64{
		{"causal prefix", qkv(400, 2, 3, 7, 2, 3), causal},
		{"causal one new token", qkv(410, 1, 1, 5, 2, 4), causal},
		{"cross more keys", qkv(420, 2, 3, 6, 2, 3), cross},
		{"cross fewer keys", qkv(430, 1, 5, 2, 2, 3), cross},
		{"cross self", qkv(440, 1, 4, 4, 1, 5), cross},
		{"cross then projection", func(t *testing.T) []*tensor.Tensor {
			return append(qkv(450, 1, 3, 5, 2, 2)(t), x(453, 3, 4))
		}, func(g *Graph, in []*tensor.Tensor) *tensor.Tensor {
			a := g.Reshape(g.CrossAttention(in[0], in[1], in[2], 0.5), 3, 4)
			return g.MatMul(a, in[3], false, true)
		}},
	})
}

// TestAttentionPrefixIsTail checks what prefix caching relies on: causal
// attention of the last Tq queries over all Tk keys equals the last Tq rows
// of causal self-attention over the whole sequence, forward and (through
// the same loss on those rows) backward, on the CPU's float32 kernel and
// the float64 composition; and that CrossAttention with the keys of the
// queries' own sequence equals a softmax over all of them (Attention of one
// query, which sees every key).
func TestAttentionPrefixIsTail(t *testing.T) {
	const B, Tk, Tq, H, D = 2, 9, 4, 2, 8
	for _, dt := range []device.DType{device.Float32, device.Float64} {
		t.Run(dt.String(), func(t *testing.T) {
			mk := func(seed uint64, shape ...int) *tensor.Tensor {
				gt := goldenTensor{Shape: shape, Data: input64(t, seed, shape, 1, 0, 0).Float64s()}
				return gt.tensorOf(t, dt, true)
			}
			qAll, k, v := mk(500, B, Tk, H, D), mk(501, B, Tk, H, D), mk(502, B, Tk, H, D)
			g := New(cpu.New())
			defer g.Reset()
			full := g.Attention(qAll, k, v, 0.35)
			tail := g.Slice(full, 1, Tk-Tq, Tk)
			qTail := g.Slice(qAll, 1, Tk-Tq, Tk)
			part := g.Attention(qTail, k, v, 0.35)
			if err := g.Err(); err != nil {
				t.Fatal(err)
			}
			tol := 1e-14
			if dt == device.Float32 {
				tol = 2e-6
			}
			want := goldenTensor{Shape: tail.Shape(), Data: tail.Float64s()}
			closeTo(t, "prefix attention vs the tail of full attention", part, want, tol)
			// Gradients of the same loss on the tail rows reach k and v
			// equally by both routes.
			r := mk(503, B, Tq, H, D)
			if err := g.Backward(g.Sum(g.Mul(tail, r))); err != nil {
				t.Fatal(err)
			}
			wantDk := goldenTensor{Shape: k.Shape(), Data: k.Grad().Float64s()}
			wantDv := goldenTensor{Shape: v.Shape(), Data: v.Grad().Float64s()}
			g.Reset()
			k.SetGrad(nil)
			v.SetGrad(nil)
			part = g.Attention(g.Slice(qAll, 1, Tk-Tq, Tk), k, v, 0.35)
			if err := g.Backward(g.Sum(g.Mul(part, r))); err != nil {
				t.Fatal(err)
			}
			closeTo(t, "dk", k.Grad(), wantDk, tol)
			closeTo(t, "dv", v.Grad(), wantDv, tol)
			// One query sees every key causally: CrossAttention of it is
			// the same.
			g.Reset()
			q1 := g.Slice(qAll, 1, Tk-1, Tk)
			a, c := g.Attention(q1, k, v, 0.35), g.CrossAttention(q1, k, v, 0.35)
			if err := g.Err(); err != nil {
				t.Fatal(err)
			}
			closeTo(t, "CrossAttention of the last query", c, goldenTensor{Shape: a.Shape(), Data: a.Float64s()}, tol)
		})
	}
}

// TestAttentionKVErrors: shapes Attention and CrossAttention refuse, each
// with an error naming the op and the shapes.
func TestAttentionKVErrors(t *testing.T) {
	x := func(shape ...int) *tensor.Tensor { return input64(t, 1, shape, 1, 0, 0) }
	for _, c := range []struct {
		name string
		f    func(g *Graph) *tensor.Tensor
		want []string
	}{
		{"causal with fewer keys", func(g *Graph) *tensor.Tensor { return g.Attention(x(1, 5, 2, 4), x(1, 3, 2, 4), x(1, 3, 2, 4), 1) },
			[]string{"Attention", "[1 5 2 4]", "[1 3 2 4]", "at least as many keys", "CrossAttention"}},
		{"no keys", func(g *Graph) *tensor.Tensor {
			return g.CrossAttention(x(1, 2, 2, 4), x(1, 0, 2, 4), x(1, 0, 2, 4), 1)
		}, []string{"CrossAttention", "no keys", "2 queries"}},
		{"k and v differ", func(g *Graph) *tensor.Tensor {
			return g.CrossAttention(x(1, 2, 2, 4), x(1, 3, 2, 4), x(1, 4, 2, 4), 1)
		}, []string{"CrossAttention", "[1 3 2 4]", "[1 4 2 4]"}},
		{"heads do not divide", func(g *Graph) *tensor.Tensor { return g.Attention(x(1, 2, 3, 4), x(1, 3, 2, 4), x(1, 3, 2, 4), 1) },
			[]string{"Attention", "[1 2 3 4]", "[1 3 2 4]", "kvHeads dividing heads"}},
		{"batch differs", func(g *Graph) *tensor.Tensor {
			return g.CrossAttention(x(2, 2, 2, 4), x(1, 3, 2, 4), x(1, 3, 2, 4), 1)
		}, []string{"CrossAttention", "[2 2 2 4]"}},
		{"rank", func(g *Graph) *tensor.Tensor { return g.CrossAttention(x(2, 2, 8), x(2, 3, 8), x(2, 3, 8), 1) },
			[]string{"CrossAttention", "[2 2 8]"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := New(cpu.New())
			if out := c.f(g); out != nil {
				t.Fatalf("got a result, want an error")
			}
			err := g.Err()
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

// TestAttentionGrouped: attention over keys and values with fewer heads
// than the queries (grouped-query attention) equals attention over the
// same keys and values repeated to every head, forward and gradients, in
// float32 (the CPU's grouped kernel) and float64 (the composition, which
// repeats them): causal self-attention over two query blocks of the CPU
// kernel, queries after a cached prefix, and unmasked cross-attention.
func TestAttentionGrouped(t *testing.T) {
	for _, dt := range []device.DType{device.Float32, device.Float64} {
		for _, c := range []struct {
			name              string
			tq, tk, heads, kv int
			cross             bool
		}{
			{"causal", 70, 70, 6, 2, false},
			{"prefix", 5, 12, 6, 3, false},
			{"cross", 7, 11, 4, 1, true},
		} {
			t.Run(fmt.Sprintf("%v/%s", dt, c.name), func(t *testing.T) {
				q := input64(t, 1, []int{2, c.tq, c.heads, 8}, 1, 0, 0)
				k := input64(t, 2, []int{2, c.tk, c.kv, 8}, 1, 0, 0)
				v := input64(t, 3, []int{2, c.tk, c.kv, 8}, 1, 0, 0)
				r := input64(t, 4, []int{2, c.tq, c.heads, 8}, 1, 0, 0)
				run := func(repeat bool) [4][]float64 {
					tensor.ZeroGrad([]*tensor.Tensor{q, k, v})
					g := New(cpu.New())
					heads := func(x *tensor.Tensor) *tensor.Tensor {
						x = g.Cast(x, dt)
						if !repeat {
							return x
						}
						b, n := x.Dim(0), x.Dim(1)
						x = g.BroadcastTo(g.Reshape(x, b, n, c.kv, 1, 8), b, n, c.kv, c.heads/c.kv, 8)
						return g.Reshape(x, b, n, c.heads, 8)
					}
					qq, kk, vv := g.Cast(q, dt), heads(k), heads(v)
					var out *tensor.Tensor
					if c.cross {
						out = g.CrossAttention(qq, kk, vv, 0.35)
					} else {
						out = g.Attention(qq, kk, vv, 0.35)
					}
					o := g.Cast(out, device.Float64)
					vals := o.Float64s()
					if err := g.Backward(g.Sum(g.Mul(o, r))); err != nil {
						t.Fatal(err)
					}
					return [4][]float64{vals, q.Grad().Float64s(), k.Grad().Float64s(), v.Grad().Float64s()}
				}
				tol := 1e-12
				if dt == device.Float32 {
					tol = 2e-5
				}
				want, got := run(true), run(false)
				for i, what := range []string{"out", "dq", "dk", "dv"} {
					scale, worst := 1.0, 0.0
					for j, w := range want[i] {
						scale = max(scale, math.Abs(w))
						worst = max(worst, math.Abs(got[i][j]-w))
					}
					if worst > tol*scale {
						t.Errorf("%s: grouped differs from repeated by %.3g (scale %.3g)", what, worst, scale)
					}
				}
			})
		}
	}
}
