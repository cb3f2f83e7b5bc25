package autograd

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/tensor"
)

// TestLinearCrossEntropyMatchesUnfused checks the fused, row-blocked head
// and loss against the straightforward composition CrossEntropy(h W^T):
// loss and both gradients, for block sizes that do and do not divide the
// rows. Both paths round differently in float32 (blocked products, one
// exponential per logit), so they agree to a few ulps of the values.
func TestLinearCrossEntropyMatchesUnfused(t *testing.T) {
	dev := cpu.New()
	rng := rand.New(rand.NewPCG(5, 6))
	const rows, d, vocab = 37, 16, 1001
	hData := make([]float32, rows*d)
	wData := make([]float32, vocab*d)
	for i := range hData {
		hData[i] = float32(rng.NormFloat64())
	}
	for i := range wData {
		wData[i] = float32(0.5 * rng.NormFloat64())
	}
	ids := make([]int32, rows)
	for i := range ids {
		ids[i] = int32(rng.IntN(vocab))
	}
	targets, _ := tensor.FromInt32(dev, ids, rows)
	run := func(fused bool, block int) (loss float32, dh, dw []float32) {
		h, _ := tensor.FromFloat32(dev, hData, rows, d)
		w, _ := tensor.FromFloat32(dev, wData, vocab, d)
		h.SetRequiresGrad(true)
		w.SetRequiresGrad(true)
		g := New(dev)
		var l *tensor.Tensor
		if fused {
			l = g.LinearCrossEntropy(h, w, targets, block)
		} else {
			l = g.CrossEntropy(g.MatMul(h, w, false, true), targets)
		}
		if err := g.Backward(l); err != nil {
			t.Fatal(err)
		}
		return l.Item(), h.Grad().Float32s(), w.Grad().Float32s()
	}
	refLoss, refDh, refDw := run(false, 0)
	for _, block := range []int{0, 1, 5, 37, 100} {
		loss, dh, dw := run(true, block)
		if math.Abs(float64(loss-refLoss)) > 1e-5*math.Abs(float64(refLoss)) {
			t.Errorf("block %d: loss %v, unfused %v", block, loss, refLoss)
		}
		for name, pair := range map[string][2][]float32{"dh": {dh, refDh}, "dW": {dw, refDw}} {
			var worst, scale float64
			for i := range pair[0] {
				worst = math.Max(worst, math.Abs(float64(pair[0][i]-pair[1][i])))
				scale = math.Max(scale, math.Abs(float64(pair[1][i])))
			}
			if worst > 1e-5*scale {
				t.Errorf("block %d: %s differs by %.3g (largest gradient %.3g)", block, name, worst, scale)
			}
		}
	}
}
