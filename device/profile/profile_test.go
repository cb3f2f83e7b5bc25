package profile_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/device/profile"
)

func alloc(t *testing.T, d device.Device, n int) device.Buffer {
	t.Helper()
	b, err := d.Alloc(device.Float32, n)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRecordsCallsByOpAndShape(t *testing.T) {
	p := profile.Wrap(cpu.New())
	a, b, c := alloc(t, p, 64*32), alloc(t, p, 32*16), alloc(t, p, 64*16)
	gemm := device.GemmArgs{M: 64, N: 16, K: 32, Alpha: 1, A: a, LDA: 32, B: b, LDB: 16, C: c, LDC: 16}

	p.Gemm(gemm) // not recording: not counted
	p.Record(true)
	p.Gemm(gemm)
	p.Gemm(gemm)
	gemm.TransB, gemm.LDB = true, 32
	p.Gemm(gemm)
	p.Fill(c, 1)
	p.RMSNorm(c, alloc(t, p, 64), c, 64, 16, 1e-6)
	p.Record(false)
	p.Fill(c, 2)

	got := map[string]profile.Op{}
	for _, o := range p.Ops() {
		got[o.Name+"|"+o.Detail] = o
	}
	want := []struct {
		key   string
		calls int
		flops float64
	}{
		{"Gemm|64x16x32 NN float32", 2, 2 * 2 * 64 * 16 * 32},
		{"Gemm|64x16x32 NT float32", 1, 2 * 64 * 16 * 32},
		{"Fill|", 1, 0},
		{"RMSNorm|64 x 16", 1, 0},
		{"Alloc|float32", 1, 0},
	}
	if len(got) != len(want) {
		t.Errorf("recorded %v, want %d kinds", got, len(want))
	}
	for _, w := range want {
		o, ok := got[w.key]
		if !ok {
			t.Errorf("no record for %q in %v", w.key, got)
			continue
		}
		if o.Calls != w.calls || o.Flops != w.flops || o.Time <= 0 {
			t.Errorf("%s: calls %d flops %g time %v, want calls %d flops %g and a positive time", w.key, o.Calls, o.Flops, o.Time, w.calls, w.flops)
		}
	}
	ops := p.Ops()
	for i := 1; i < len(ops); i++ {
		if ops[i].Time > ops[i-1].Time {
			t.Fatalf("Ops not sorted by time: %v", ops)
		}
	}
	p.Reset()
	if len(p.Ops()) != 0 {
		t.Error("Reset kept records")
	}
}

// TestTransparent: results through the wrapper equal the wrapped device's.
func TestTransparent(t *testing.T) {
	raw := cpu.New()
	p := profile.Wrap(cpu.New())
	p.Record(true)
	x := []float32{3, -1, 2, 0.5, -4, 1}
	run := func(d interface {
		device.Device
		device.Fused
	}) []float32 {
		in, out, rstd := alloc(t, d, 6), alloc(t, d, 6), alloc(t, d, 2)
		d.CopyFromHost(in, x)
		d.RMSNorm(out, rstd, in, 2, 3, 1e-6)
		d.SwiGLU(out, out, in)
		d.Axpby(out, out, 2, 0)
		r := make([]float32, 6)
		d.CopyToHost(r, out)
		return r
	}
	a, b := run(raw), run(p)
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("through the wrapper [%d] = %v, direct %v", i, b[i], a[i])
		}
	}
	if p.Name() != raw.Name() {
		t.Errorf("Name %q, want the wrapped device's %q", p.Name(), raw.Name())
	}
}

func TestWriteTable(t *testing.T) {
	p := profile.Wrap(cpu.New())
	b := alloc(t, p, 1000)
	p.Record(true)
	for range 3 {
		p.Fill(b, 1)
	}
	p.Axpby(b, b, 2, 0)
	p.Transpose(b, b, 1, 1, 1000, 1)
	var all, top bytes.Buffer
	if err := p.WriteTable(&all, 0); err != nil {
		t.Fatal(err)
	}
	if err := p.WriteTable(&top, 1); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"Fill", "Axpby", "Transpose", "total", "calls"} {
		if !strings.Contains(all.String(), w) {
			t.Errorf("table lacks %q:\n%s", w, all.String())
		}
	}
	if lines := strings.Count(top.String(), "\n"); lines != 4 || !strings.Contains(top.String(), "(2 more)") {
		t.Errorf("top-1 table has %d lines, want header, 1 op, the rest, total:\n%s", lines, top.String())
	}
}

// kernelNamer is the CPU backend that names its attention kernel, as the
// CUDA backend does (profile.AttentionKerneler).
type kernelNamer struct{ *cpu.Device }

func (kernelNamer) AttentionKernel(s device.AttentionShape) string {
	if s.BFloat16Operands {
		return "mma.sync bf16"
	}
	return "simt f32"
}

// TestAttentionRows checks the attention rows of a profile: their FLOPs
// against the closed form (causal pairs T (T + 1) / 2 per head, 4 D flops a
// pair forward, 10 D backward, counted here by brute force over the
// pairs), and the kernel name in the detail where the device gives one.
func TestAttentionRows(t *testing.T) {
	for _, c := range []struct {
		name   string
		dev    device.Device
		shape  device.AttentionShape
		detail string
	}{
		{"cpu", cpu.New(), device.AttentionShape{Batch: 2, Seq: 48, Heads: 3, HeadDim: 16}, "B2 T48 H3 D16"},
		{"named simt", kernelNamer{cpu.New()}, device.AttentionShape{Batch: 1, Seq: 33, Heads: 2, HeadDim: 64}, "B1 T33 H2 D64 simt f32"},
		{"named tc", kernelNamer{cpu.New()}, device.AttentionShape{Batch: 1, Seq: 64, Heads: 1, HeadDim: 64, BFloat16Operands: true}, "B1 T64 H1 D64 mma.sync bf16"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := profile.Wrap(c.dev)
			s := c.shape
			n := s.Batch * s.Seq * s.Heads * s.HeadDim
			q, k, v, o, dout := alloc(t, p, n), alloc(t, p, n), alloc(t, p, n), alloc(t, p, n), alloc(t, p, n)
			dq, dk, dv, lse := alloc(t, p, n), alloc(t, p, n), alloc(t, p, n), alloc(t, p, s.Batch*s.Heads*s.Seq)
			p.Record(true)
			for range 2 {
				p.Attention(o, lse, q, k, v, s, 0.25)
				p.AttentionBackward(dq, dk, dv, dout, q, k, v, o, lse, s, 0.25)
			}
			p.Record(false)
			pairs := 0
			for i := 0; i < s.Seq; i++ {
				for j := 0; j <= i; j++ {
					pairs++
				}
			}
			if got := profile.CausalPairs(s.Seq); got != float64(pairs) {
				t.Errorf("CausalPairs(%d) = %v, want %d", s.Seq, got, pairs)
			}
			heads := float64(s.Batch * s.Heads * pairs * s.HeadDim)
			want := map[string]float64{"Attention": 2 * 4 * heads, "AttentionBackward": 2 * 10 * heads}
			seen := 0
			for _, op := range p.Ops() {
				w, ok := want[op.Name]
				if !ok {
					continue
				}
				seen++
				if op.Detail != c.detail || op.Calls != 2 || op.Flops != w || op.GFlops() <= 0 {
					t.Errorf("%s: detail %q, calls %d, flops %g (%g GFLOP/s); want %q, 2, %g and a rate",
						op.Name, op.Detail, op.Calls, op.Flops, op.GFlops(), c.detail, w)
				}
			}
			if seen != 2 {
				t.Errorf("%d attention rows in %v, want forward and backward", seen, p.Ops())
			}
			var table strings.Builder
			if err := p.WriteTable(&table, 0); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(table.String(), c.detail) {
				t.Errorf("table lacks %q:\n%s", c.detail, table.String())
			}
		})
	}
}
