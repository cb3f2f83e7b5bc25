package autograd_test

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/hilbert-ml/hilbert/autograd"
	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/device/cuda"
	"github.com/hilbert-ml/hilbert/internal/cudaemu"
	"github.com/hilbert-ml/hilbert/tensor"
)

// TestCoreOpsOnEmulatedCUDA runs a block written only in core ops (a
// LayerNorm with gain and bias by broadcasting, exact GELU, a softmax, a
// max over an axis) forward and backward on the CPU and on the CUDA
// backend (its emulator), and compares the loss and the gradients.
func TestCoreOpsOnEmulatedCUDA(t *testing.T) {
	cudaemu.Setenv(t)
	gpu, err := cuda.New(0)
	if err != nil {
		t.Fatalf("New on the CUDA emulator: %v", err)
	}
	defer gpu.Close()
	rng := rand.New(rand.NewPCG(3, 4))
	host := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return v
	}
	xs, ws, bs := host(4*6), host(6), host(6)
	run := func(dev device.Device) (float32, [][]float32) {
		x, _ := tensor.FromFloat32(dev, xs, 4, 6)
		w, _ := tensor.FromFloat32(dev, ws, 6)
		b, _ := tensor.FromFloat32(dev, bs, 6)
		for _, p := range []*tensor.Tensor{x, w, b} {
			p.SetRequiresGrad(true)
		}
		g := autograd.New(dev)
		c := g.Sub(x, g.MeanAxis(x, -1, true))
		v := g.MeanAxis(g.Mul(c, c), -1, true)
		n := g.Mul(c, g.Unary(device.Rsqrt, g.Add(v, g.Constant(1e-5, device.Float32))))
		h := g.GELU(g.Add(g.Mul(n, w), b))
		s := g.Softmax(h, -1)
		loss := g.Add(g.Sum(g.Mul(s, h)), g.Sum(g.MaxAxis(h, 0, false)))
		if err := g.Backward(loss); err != nil {
			t.Fatalf("%s: %v", dev.Name(), err)
		}
		return loss.Item(), [][]float32{x.Grad().Float32s(), w.Grad().Float32s(), b.Grad().Float32s()}
	}
	lc, gc := run(cpu.New())
	lg, gg := run(gpu)
	t.Logf("loss on the CPU %v, on %s %v", lc, gpu.Describe(), lg)
	if math.Abs(float64(lc-lg)) > 1e-4*math.Abs(float64(lc)) {
		t.Errorf("loss: cpu %v, cuda %v", lc, lg)
	}
	for i := range gc {
		for j := range gc[i] {
			if d := math.Abs(float64(gc[i][j] - gg[i][j])); d > 1e-4+1e-3*math.Abs(float64(gc[i][j])) {
				t.Errorf("gradient %d element %d: cpu %v, cuda %v", i, j, gc[i][j], gg[i][j])
			}
		}
	}
	if err := gpu.Synchronize(); err != nil {
		t.Fatal(err)
	}
}

// TestInt32ArithmeticOnEmulatedCUDA: a backend without int32 arithmetic
// (CUDA) reports the op and the dtype as the error of Synchronize.
func TestInt32ArithmeticOnEmulatedCUDA(t *testing.T) {
	cudaemu.Setenv(t)
	gpu, err := cuda.New(0)
	if err != nil {
		t.Fatalf("New on the CUDA emulator: %v", err)
	}
	defer gpu.Close()
	a, _ := tensor.FromInt32(gpu, []int32{1, 2}, 2)
	g := autograd.New(gpu)
	g.Add(a, a)
	if err := g.Err(); err != nil {
		t.Fatal(err)
	}
	err = gpu.Synchronize()
	if err == nil || !strings.Contains(err.Error(), "BinaryStrided") || !strings.Contains(err.Error(), "int32") {
		t.Fatalf("Synchronize after an int32 Add: %v, want an error naming BinaryStrided and int32", err)
	}
}
