package train

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/models"
	"github.com/hilbert-ml/hilbert/optim"
	"github.com/hilbert-ml/hilbert/tensor"
)

// tinyLoop is a gpt2-tiny model at vocab 64 trained with AdamW on a
// repeating token pattern (learnable: the next token is a function of the
// current one), micro-batches of micro sequences of 16 tokens.
func tinyLoop(t *testing.T, micro, accum int, seed uint64) (*Loop[Tokens], *Windows) {
	t.Helper()
	dev := cpu.New()
	cfg, err := models.GPT2Preset("gpt2-tiny")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Vocab, cfg.Context = 64, 16
	model, err := models.NewGPT2(dev, cfg, seed)
	if err != nil {
		t.Fatal(err)
	}
	tokens := make([]int32, 4000)
	for i := range tokens {
		tokens[i] = int32((i*7 + i/13) % 64)
	}
	data, err := NewWindows(tokens, micro, 16, 3)
	if err != nil {
		t.Fatal(err)
	}
	opt, err := optim.NewSet(optim.Recipe{Groups: []optim.GroupSpec{
		{Name: "all", Match: func(string) bool { return true }, Config: optim.PaperAdamW(3e-3), Required: true},
	}}, model.Parameters())
	if err != nil {
		t.Fatal(err)
	}
	sched, err := optim.NewCosine(40, 4)
	if err != nil {
		t.Fatal(err)
	}
	l, err := NewLoop(dev, LM(dev, model), Source[Tokens](data), opt, LoopConfig{Accumulate: accum, ClipNorm: 1, Schedule: sched})
	if err != nil {
		t.Fatal(err)
	}
	return l, data
}

func paramValues(ps []*tensor.Tensor) [][]float32 {
	out := make([][]float32, len(ps))
	for i, p := range ps {
		out[i] = p.Float32s()
	}
	return out
}

func TestLoopLearns(t *testing.T) {
	l, _ := tinyLoop(t, 4, 2, 1)
	var first, last Update
	if err := l.Run(context.Background(), 30, func(u Update) error {
		if u.Step == 1 {
			first = u
		}
		last = u
		if math.IsNaN(u.GradNorm) || u.GradNorm <= 0 {
			t.Errorf("update %d: gradient norm %v", u.Step, u.GradNorm)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if l.Step() != 30 || last.Step != 30 {
		t.Fatalf("Step() = %d, last update %d; want 30", l.Step(), last.Step)
	}
	if !(last.Loss < first.Loss-1) {
		t.Errorf("loss went from %.4f to %.4f in 30 updates; want a fall of more than 1 nat", first.Loss, last.Loss)
	}
}

// TestLoopResume checks that Save and Load continue a run bit for bit:
// 10 updates, a checkpoint, 10 more equal 20 uninterrupted updates, and a
// fresh loop loaded from the checkpoint reaches the same weights.
func TestLoopResume(t *testing.T) {
	root := filepath.Join(t.TempDir(), "ck")
	whole, _ := tinyLoop(t, 4, 2, 5)
	if err := whole.Run(context.Background(), 20, nil); err != nil {
		t.Fatal(err)
	}
	want := paramValues(whole.Model().Parameters())

	first, _ := tinyLoop(t, 4, 2, 5)
	if err := first.Run(context.Background(), 10, nil); err != nil {
		t.Fatal(err)
	}
	if err := first.Save(root); err != nil {
		t.Fatal(err)
	}
	second, _ := tinyLoop(t, 4, 2, 99) // other initial weights: all must come from the checkpoint
	if err := second.Load(root); err != nil {
		t.Fatal(err)
	}
	if second.Step() != 10 {
		t.Fatalf("loaded Step() = %d, want 10", second.Step())
	}
	if err := second.Run(context.Background(), 20, nil); err != nil {
		t.Fatal(err)
	}
	got := paramValues(second.Model().Parameters())
	for i := range want {
		for j := range want[i] {
			if math.Float32bits(got[i][j]) != math.Float32bits(want[i][j]) {
				t.Fatalf("parameter %d element %d: resumed %v, uninterrupted %v", i, j, got[i][j], want[i][j])
			}
		}
	}
}

// TestLoopAccumulation checks that 2 micro-batches of 4 sequences make
// the update one micro-batch of 8 would (the same windows in the same
// order): the same first gradients, to float32 summation tolerance, and
// the same losses and norms over three updates. (Weights are not
// compared: AdamW's normalised step turns a rounding difference of a
// near-zero gradient into any step in [-lr, lr].)
func TestLoopAccumulation(t *testing.T) {
	a, _ := tinyLoop(t, 8, 1, 2)
	b, _ := tinyLoop(t, 4, 2, 2)
	for step := range 3 {
		ua, err := a.Update()
		if err != nil {
			t.Fatal(err)
		}
		ub, err := b.Update()
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(ua.Loss-ub.Loss) > 1e-5 || math.Abs(ua.GradNorm-ub.GradNorm) > 1e-4*ua.GradNorm {
			t.Errorf("update %d: micro 8: loss %v norm %v; 2 x micro 4: loss %v norm %v", ua.Step, ua.Loss, ua.GradNorm, ub.Loss, ub.GradNorm)
		}
		if step > 0 {
			continue
		}
		pa, pb := a.Model().Parameters(), b.Model().Parameters()
		for i := range pa {
			ga, gb := pa[i].Grad().Float32s(), pb[i].Grad().Float32s()
			scale := 0.0
			for _, v := range ga {
				scale = math.Max(scale, math.Abs(float64(v)))
			}
			for j := range ga {
				if d := math.Abs(float64(ga[j] - gb[j])); d > 1e-4*scale+1e-9 {
					t.Fatalf("gradient of %s element %d: micro 8 %v, 2 x micro 4 %v (largest %v)", pa[i].Name, j, ga[j], gb[j], scale)
				}
			}
		}
	}
}

func TestLoopErrors(t *testing.T) {
	l, data := tinyLoop(t, 4, 1, 1)
	dev := cpu.New()
	other, err := optim.NewSet(optim.Recipe{Groups: []optim.GroupSpec{
		{Name: "one", Match: func(n string) bool { return n == l.Model().Parameters()[0].Name }, Config: optim.PaperAdamW(1e-3), Required: true},
	}}, l.Model().Parameters()[:1])
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		err  func() error
		want string
	}{
		{"parameter in no group", func() error {
			_, err := NewLoop(dev, l.Model(), Source[Tokens](data), other, LoopConfig{})
			return err
		}, "in no group"},
		{"negative accumulate", func() error {
			_, err := NewLoop(dev, l.Model(), Source[Tokens](data), l.Optimizer(), LoopConfig{Accumulate: -1})
			return err
		}, "Accumulate is -1"},
		{"load without checkpoint", func() error { return l.Load(t.TempDir()) }, "no checkpoint"},
		{"seek other data", func() error {
			w, _ := NewWindows(make([]int32, 100), 2, 16, 0)
			c, _ := data.Cursor()
			return w.Seek(c)
		}, "this source has 100 tokens"},
		{"windows too short", func() error { _, err := NewWindows(make([]int32, 16), 1, 16, 0); return err }, "no window"},
	}
	for _, c := range cases {
		err := c.err()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v; want one containing %q", c.name, err, c.want)
		}
	}
	if err := l.Load(t.TempDir()); !errors.Is(err, ErrNoCheckpoint) {
		t.Errorf("Load of an empty folder: %v; want ErrNoCheckpoint", err)
	}
}

// TestWindowsOrder checks that an epoch visits every window once and that
// a Seek replays the same micro-batches.
func TestWindowsOrder(t *testing.T) {
	tokens := make([]int32, 16*10+1)
	for i := range tokens {
		tokens[i] = int32(i)
	}
	w, err := NewWindows(tokens, 2, 16, 9)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int32]bool{}
	for range 5 {
		b, _ := w.Next()
		for r := range b.Batch {
			in, tgt := b.Inputs[r*16:(r+1)*16], b.Targets[r*16:(r+1)*16]
			if in[0]%16 != 0 || seen[in[0]] {
				t.Fatalf("window starting at token %d: not a fresh window boundary", in[0])
			}
			seen[in[0]] = true
			for i := range in {
				if tgt[i] != in[i]+1 {
					t.Fatalf("targets are not the inputs moved by one: %v / %v", in, tgt)
				}
			}
		}
	}
	c, _ := w.Cursor()
	want, _ := w.Next()
	wantIn := append([]int32(nil), want.Inputs...)
	if err := w.Seek(c); err != nil {
		t.Fatal(err)
	}
	got, _ := w.Next()
	for i := range wantIn {
		if got.Inputs[i] != wantIn[i] {
			t.Fatalf("after Seek: %v, want %v", got.Inputs, wantIn)
		}
	}
}
