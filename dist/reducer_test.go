package dist

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hilbert-ml/hilbert/autograd"
	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/tensor"
)

// toyModel is a small network whose parameters span the bucket layouts: an
// embedding larger than a bucket (reduced in place), a matrix used twice,
// and small biases packed together.
type toyModel struct {
	dev    device.Device
	params []*tensor.Tensor
	emb, w *tensor.Tensor
	biases []*tensor.Tensor
	head   *tensor.Tensor
}

const toyVocab, toyDim, toyRows = 50, 16, 6

func newToyModel(tb testing.TB) *toyModel {
	dev := cpu.New()
	rng := rand.New(rand.NewPCG(3, 4)) // the same weights on every rank
	param := func(shape ...int) *tensor.Tensor {
		p, err := tensor.RandN(dev, rng, 0, 0.3, shape...)
		if err != nil {
			tb.Fatal(err)
		}
		p.SetRequiresGrad(true)
		return p
	}
	m := &toyModel{dev: dev}
	m.emb, m.w = param(toyVocab, toyDim), param(toyDim, toyDim)
	for range 4 {
		m.biases = append(m.biases, param(toyRows, toyDim))
	}
	m.head = param(toyVocab, toyDim)
	m.params = append([]*tensor.Tensor{m.emb, m.w}, m.biases...)
	m.params = append(m.params, m.head)
	return m
}

// batch returns the token ids and targets of micro-batch k of rank r.
func (m *toyModel) batch(tb testing.TB, r, k int) (ids, targets *tensor.Tensor) {
	rng := rand.New(rand.NewPCG(uint64(r), uint64(k)))
	x, y := make([]int32, toyRows), make([]int32, toyRows)
	for i := range x {
		x[i], y[i] = int32(rng.IntN(toyVocab)), int32(rng.IntN(toyVocab))
	}
	ids, err := tensor.FromInt32(m.dev, x, toyRows)
	if err != nil {
		tb.Fatal(err)
	}
	targets, _ = tensor.FromInt32(m.dev, y, toyRows)
	return ids, targets
}

// backward accumulates the gradients of rank r's micro-batch k.
func (m *toyModel) backward(g *autograd.Graph, ids, targets *tensor.Tensor) error {
	g.Reset()
	h := g.Embedding(m.emb, ids)
	for _, b := range m.biases {
		h = g.Add(g.Tanh(g.MatMul(h, m.w, false, true)), b)
	}
	return g.Backward(g.CrossEntropy(g.MatMul(h, m.head, false, true), targets))
}

// grads returns copies of the parameters' gradients.
func (m *toyModel) grads() [][]float32 {
	out := make([][]float32, len(m.params))
	for i, p := range m.params {
		out[i] = slices.Clone(p.Grad().Float32s())
	}
	return out
}

// rankGrads returns the gradients rank r accumulates over micro micro-batches,
// computed here with the same code.
func (m *toyModel) rankGrads(tb testing.TB, r, micro int) [][]float32 {
	for _, p := range m.params {
		p.SetGrad(nil)
	}
	g := autograd.New(m.dev)
	for k := range micro {
		ids, targets := m.batch(tb, r, k)
		if err := m.backward(g, ids, targets); err != nil {
			tb.Fatal(err)
		}
	}
	return m.grads()
}

// fakeComm is a communicator of size ranks in one process whose other
// ranks all hold factor times this rank's buffer: a sum leaves
// 1 + (size-1) factor times the buffer, an average that over size. It records the lengths of the
// all-reduces in order.
type fakeComm struct {
	size   int
	factor float32
	lens   []int
}

func (f *fakeComm) Rank() int { return 0 }
func (f *fakeComm) Size() int { return f.size }
func (f *fakeComm) AllReduce(buf device.Buffer, op Op) error {
	f.lens = append(f.lens, buf.Len())
	x := cpu.Float32s(buf)
	s := 1 + float32(f.size-1)*f.factor
	if op == Average {
		s /= float32(f.size)
	}
	for i := range x {
		x[i] *= s
	}
	return nil
}
func (f *fakeComm) Broadcast(device.Buffer, int) error       { return nil }
func (f *fakeComm) AllGather(send, recv device.Buffer) error { return nil }
func (f *fakeComm) Barrier() error                           { return nil }
func (f *fakeComm) Close() error                             { return nil }

// TestReducerSingle checks that with one rank the reducer has no buckets and
// leaves the gradients bit-identical, with and without the hook.
func TestReducerSingle(t *testing.T) {
	m := newToyModel(t)
	want := m.rankGrads(t, 0, 1)
	r, err := NewReducer(Single(), m.params, ReducerOptions{BucketBytes: 1024})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.Buckets() != 0 {
		t.Errorf("one rank: %d buckets, expected 0", r.Buckets())
	}
	for _, hook := range []bool{true, false} {
		for _, p := range m.params {
			p.SetGrad(nil)
		}
		g := autograd.New(m.dev)
		if hook {
			g.OnGradReady(r.Ready)
		}
		ids, targets := m.batch(t, 0, 0)
		if err := m.backward(g, ids, targets); err != nil {
			t.Fatal(err)
		}
		if err := r.Wait(); err != nil {
			t.Fatal(err)
		}
		for i, gr := range m.grads() {
			if !slices.Equal(gr, want[i]) {
				t.Errorf("hook %v: parameter %d's gradient changed", hook, i)
			}
		}
	}
}

// TestReducerBuckets checks the bucket layout, the fixed start order and
// that every gradient gets its own averaged values back, on a fake
// two-rank communicator whose other rank holds 3 times this rank's
// gradients (average: 2 times).
func TestReducerBuckets(t *testing.T) {
	m := newToyModel(t)
	want := m.rankGrads(t, 0, 1)
	// Parameters in reverse order: head 800 floats (alone: over 256), four
	// biases of 96 (three fill a bucket of 288 >= 256, the fourth goes with
	// w's 256), emb 800.
	wantLens := []int{800, 288, 96 + 256, 800}
	for _, hook := range []bool{true, false} {
		t.Run(fmt.Sprintf("hook %v", hook), func(t *testing.T) {
			f := &fakeComm{size: 2, factor: 3}
			r, err := NewReducer(f, m.params, ReducerOptions{BucketBytes: 1024})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if r.Buckets() != len(wantLens) {
				t.Fatalf("%d buckets, expected %d", r.Buckets(), len(wantLens))
			}
			for _, p := range m.params {
				p.SetGrad(nil)
			}
			g := autograd.New(m.dev)
			if hook {
				g.OnGradReady(r.Ready)
			}
			ids, targets := m.batch(t, 0, 0)
			if err := m.backward(g, ids, targets); err != nil {
				t.Fatal(err)
			}
			if hook && r.next != r.Buckets() {
				t.Errorf("after Backward with the hook %d of %d buckets started, expected all", r.next, r.Buckets())
			}
			if !hook && r.next != 0 {
				t.Errorf("without the hook %d buckets started before Wait", r.next)
			}
			if err := r.Wait(); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(f.lens, wantLens) {
				t.Errorf("all-reduce lengths %v, expected %v", f.lens, wantLens)
			}
			for i, gr := range m.grads() {
				for j, v := range gr {
					if v != 2*want[i][j] {
						t.Fatalf("parameter %d element %d: %v, expected 2 x %v", i, j, v, want[i][j])
					}
				}
			}
			// Reporting a gradient twice in one step is misuse, named at Wait.
			r.Ready(m.w)
			r.Ready(m.w)
			if err := r.Wait(); err == nil || !strings.Contains(err.Error(), "reported ready twice") {
				t.Errorf("Ready twice: Wait returned %v, expected the misuse named", err)
			}
		})
	}
}

// TestNewReducerErrors checks that bad input is an error naming the problem.
func TestNewReducerErrors(t *testing.T) {
	dev := cpu.New()
	p, _ := tensor.New(dev, 4)
	d64, _ := tensor.NewOf(dev, device.Float64, 4)
	tests := []struct {
		name   string
		c      Communicator
		params []*tensor.Tensor
		opts   ReducerOptions
		want   string
	}{
		{"nil communicator", nil, []*tensor.Tensor{p}, ReducerOptions{}, "nil communicator"},
		{"negative bucket", Single(), []*tensor.Tensor{p}, ReducerOptions{BucketBytes: -1}, "negative bucket"},
		{"nil parameter", Single(), []*tensor.Tensor{p, nil}, ReducerOptions{}, "parameter 1 is nil"},
		{"float64", Single(), []*tensor.Tensor{d64}, ReducerOptions{}, "float32"},
		{"twice", Single(), []*tensor.Tensor{p, p}, ReducerOptions{}, "parameter 1 [4] is parameter 0 again"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewReducer(tt.c, tt.params, tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, expected one containing %q", err, tt.want)
			}
		})
	}
}

// checkReducer is the body of the "reducer" worker: every rank computes the
// gradients of every rank's data itself (the reference), then its own with
// the reducer, three ways: the hook overlapping the backward pass, Wait
// alone after it, and two accumulated micro-batches with the hook on the
// second only. The averages must equal the mean of the per-rank gradients
// to float32 summation tolerance: the sum over ranks is rounded once to
// float32 (the per-rank gradients are bit-identical to the reference, being
// the same code on the same data), so |got - mean| <= 2^-24 p |mean| plus
// the division's rounding; 1e-6 relative is stated.
func checkReducer(c Communicator) error {
	tb := &workerTB{}
	m := newToyModel(tb)
	// BroadcastTensors: rank-dependent values become the last rank's.
	root := c.Size() - 1
	x, _ := tensor.FromFloat32(m.dev, []float32{float32(c.Rank()), 1, 2}, 3)
	y, _ := tensor.FromFloat32(m.dev, []float32{float32(10 * c.Rank())}, 1)
	if err := BroadcastTensors(c, []*tensor.Tensor{x, y}, root); err != nil {
		return err
	}
	if got := append(x.Float32s(), y.Float32s()...); !slices.Equal(got, []float32{float32(root), 1, 2, float32(10 * root)}) {
		return fmt.Errorf("BroadcastTensors from rank %d: %v", root, got)
	}
	for _, tc := range []struct {
		name  string
		hook  bool
		micro int
	}{{"hook", true, 1}, {"wait only", false, 1}, {"accumulate 2, hook on the last", true, 2}} {
		want := make([][]float64, len(m.params))
		for q := range c.Size() {
			for i, gr := range m.rankGrads(tb, q, tc.micro) {
				if want[i] == nil {
					want[i] = make([]float64, len(gr))
				}
				for j, v := range gr {
					want[i][j] += float64(v) / float64(c.Size())
				}
			}
		}
		r, err := NewReducer(c, m.params, ReducerOptions{BucketBytes: 1024})
		if err != nil {
			return err
		}
		for _, p := range m.params {
			p.SetGrad(nil)
		}
		g := autograd.New(m.dev)
		for k := range tc.micro {
			if tc.hook && k == tc.micro-1 {
				g.OnGradReady(r.Ready)
			}
			ids, targets := m.batch(tb, c.Rank(), k)
			if err := m.backward(g, ids, targets); err != nil {
				return err
			}
		}
		if err := r.Wait(); err != nil {
			return err
		}
		r.Close()
		for i, gr := range m.grads() {
			for j, v := range gr {
				if w := want[i][j]; math.Abs(float64(v)-w) > 1e-6*math.Abs(w)+1e-12 {
					return fmt.Errorf("%s: parameter %d element %d: averaged %v, mean of the ranks' gradients %v", tc.name, i, j, v, w)
				}
			}
		}
	}
	return nil
}

// workerTB is the testing.TB of code shared with a worker process: Fatal
// panics (the worker exits non-zero with the message).
type workerTB struct{ testing.TB }

func (w *workerTB) Helper()           {}
func (w *workerTB) Fatal(args ...any) { panic(fmt.Sprint(args...)) }

// TestMPIReducer runs checkReducer on 2 ranks.
func TestMPIReducer(t *testing.T) {
	out, err, _ := mpirun(t, 2, "reducer", 2*time.Minute)
	if err != nil {
		t.Fatalf("mpirun: %v\n%s", err, out)
	}
	for r := range 2 {
		if want := fmt.Sprintf("ok rank %d of 2", r); !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestBroadcastTensorsErrors checks that bad tensors are errors naming them.
func TestBroadcastTensorsErrors(t *testing.T) {
	d64, _ := tensor.NewOf(cpu.New(), device.Float64, 2)
	d64.Name = "w"
	for _, tt := range []struct {
		name string
		ts   []*tensor.Tensor
		want string
	}{
		{"nil", []*tensor.Tensor{nil}, "tensor 0 is nil"},
		{"float64", []*tensor.Tensor{d64}, "tensor 0 w [2] is float64"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := BroadcastTensors(&fakeComm{size: 2}, tt.ts, 0)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, expected one containing %q", err, tt.want)
			}
		})
	}
	if err := BroadcastTensors(Single(), []*tensor.Tensor{nil}, 0); err != nil {
		t.Errorf("one rank: %v, expected nothing done", err)
	}
}

// TestReducerBadGradient checks that a gradient of the wrong shape is an
// error naming the parameter at Wait, not a crash.
func TestReducerBadGradient(t *testing.T) {
	dev := cpu.New()
	a, _ := tensor.New(dev, 4)
	b, _ := tensor.New(dev, 4)
	short, _ := tensor.New(dev, 3)
	for _, tt := range []struct {
		name   string
		bucket int
	}{{"packed", 1 << 20}, {"lone", 4}} {
		t.Run(tt.name, func(t *testing.T) {
			a.SetGrad(short)
			b.SetGrad(nil)
			r, err := NewReducer(&fakeComm{size: 2, factor: 1}, []*tensor.Tensor{a, b}, ReducerOptions{BucketBytes: tt.bucket})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if err := r.Wait(); err == nil || !strings.Contains(err.Error(), "gradient of parameter 0 [4] is float32 [3]") {
				t.Errorf("Wait: %v, expected an error naming parameter 0's gradient", err)
			}
		})
	}
}
