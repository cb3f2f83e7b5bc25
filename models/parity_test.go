package models

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/hilbert-ml/hilbert/autograd"
	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/safetensors"
	"github.com/hilbert-ml/hilbert/tensor"
)

// Parity with PyTorch. scripts/parity/make_golden.sh runs this test with
// -parity-weights to write the parity model's weights (Hilbert's own init
// and safetensors writer), then scripts/parity/parity.py loads them into
// the PyTorch reference and writes testdata/parity_golden.safetensors: a
// fixed batch, the loss and every parameter's gradient, computed in
// float64. This test rebuilds the same weights, checks they are
// byte-identical to the ones PyTorch used (SHA-256 in the golden
// metadata), loads them through Load, runs forward and backward in float32
// and compares.
//
// Tolerance. The reference is exact to float32 rounding, so the test
// measures Hilbert's float32 error alone. Each gradient is a chain of
// ~20 float32 ops (matrix products of length up to 512, sums over 32
// rows, softmaxes, rsqrt), each adding a relative error of order
// eps32 * sqrt(len) ~ 1e-6..1e-5 of the tensor's scale; errors are
// therefore measured per tensor against its largest |gradient|:
// max|g - g_ref| <= gradTol * max|g_ref|. PyTorch's own float32 run of the
// same model is recorded in the golden metadata (pytorch_f32_grad_max_rel_err,
// about 1e-6 at the last generation); gradTol = 1e-4 leaves two orders of
// magnitude for different summation orders (OpenBLAS blocking, float64
// reductions) while any wrong formula, missing factor or transposed weight
// gives an O(1) error. The loss (a mean of 32 log-sum-exps of magnitude ~5)
// is held to lossTol = 1e-5 relative, about 100 eps32.
const (
	gradTol = 1e-4
	lossTol = 1e-5
)

var parityWeights = flag.String("parity-weights", "", "write the parity model's weights to this file (for scripts/parity/make_golden.sh) and skip the parity test")

const (
	paritySeed   = 7
	parityGolden = "testdata/parity_golden.safetensors"
)

// parityConfig has the paper's architecture (heads of 64, MLP 4d, RoPE
// base 10000) at a size whose golden gradients stay small (2.4 MB). The
// larger init std (0.1) makes logits and attention far from uniform.
func parityConfig() Config {
	return Config{Layers: 2, Dim: 128, HeadDim: 64, MLPHidden: 512, Vocab: 256, Context: 32, RoPEBase: 10000, InitStd: 0.1}
}

func writeParityWeights(t *testing.T, path string) {
	t.Helper()
	cfg := parityConfig()
	m, err := New(cpu.New(), cfg, paritySeed)
	if err != nil {
		t.Fatal(err)
	}
	cj, _ := json.Marshal(cfg)
	if err := m.Save(path, map[string]string{"config": string(cj)}); err != nil {
		t.Fatal(err)
	}
}

// goldenIDs reads the int32 token ids [B, T] named name (inputs or
// targets, of the shape of inputs) from a golden file onto dev.
func goldenIDs(t *testing.T, dev device.Device, golden *safetensors.File, name string) *tensor.Tensor {
	t.Helper()
	in, _ := golden.Info("inputs")
	b, tt := in.Shape[0], in.Shape[1]
	ids := make([]int32, b*tt)
	if err := golden.ReadInt32(name, []int{b, tt}, ids); err != nil {
		t.Fatal(err)
	}
	x, err := tensor.FromInt32(dev, ids, b, tt)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func TestParityPyTorch(t *testing.T) {
	if *parityWeights != "" {
		writeParityWeights(t, *parityWeights)
		t.Skipf("wrote %s", *parityWeights)
	}
	golden, err := safetensors.Open(parityGolden)
	if err != nil {
		t.Fatal(err)
	}
	defer golden.Close()

	weights := filepath.Join(t.TempDir(), "weights.safetensors")
	writeParityWeights(t, weights)
	raw, err := os.ReadFile(weights)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(raw)
	if got, want := hex.EncodeToString(sum[:]), golden.Metadata()["weights_sha256"]; got != want {
		t.Fatalf("the parity weights changed (sha256 %s, golden made from %s): rerun scripts/parity/make_golden.sh", got, want)
	}

	dev := cpu.New()
	cfg := parityConfig()
	m, err := New(dev, cfg, paritySeed+1) // different init, overwritten by Load
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Load(weights); err != nil {
		t.Fatal(err)
	}
	inputs, targets := goldenIDs(t, dev, golden, "inputs"), goldenIDs(t, dev, golden, "targets")

	g := autograd.New(dev)
	loss, _ := m.Forward(g, inputs, targets, ForwardOptions{})
	if err := g.Err(); err != nil {
		t.Fatal(err)
	}
	got := float64(loss.Item())
	if err := g.Backward(loss); err != nil {
		t.Fatal(err)
	}
	wantLoss := make([]float32, 1)
	if err := golden.ReadFloat32("loss", []int{}, wantLoss); err != nil {
		t.Fatal(err)
	}
	lossErr := math.Abs(got-float64(wantLoss[0])) / math.Abs(float64(wantLoss[0]))
	t.Logf("loss %.7f, PyTorch float64 %.7f: rel err %.2g", got, wantLoss[0], lossErr)
	if lossErr > lossTol {
		t.Errorf("loss %.7f, want %.7f (rel err %.2g > %g)", got, wantLoss[0], lossErr, lossTol)
	}

	var worst, worstAbs float64
	for _, p := range m.Parameters() {
		want := make([]float32, p.Len())
		if err := golden.ReadFloat32("grad."+p.Name, p.Shape(), want); err != nil {
			t.Fatal(err)
		}
		have := p.Grad().Float32s()
		var maxRef, maxErr float64
		for i := range want {
			maxRef = max(maxRef, math.Abs(float64(want[i])))
			maxErr = max(maxErr, math.Abs(float64(have[i])-float64(want[i])))
		}
		rel := maxErr / maxRef
		worst, worstAbs = max(worst, rel), max(worstAbs, maxErr)
		if rel > gradTol {
			t.Errorf("grad %s: max abs err %.3g = %.3g of max|grad| %.3g (tolerance %g)", p.Name, maxErr, rel, maxRef, gradTol)
		}
	}
	t.Logf("gradients: max abs err %.3g; worst tensor err/max|grad| %.3g (PyTorch float32: %s)",
		worstAbs, worst, golden.Metadata()["pytorch_f32_grad_max_rel_err"])
}

// TestParityPyTorchFloat64 is TestParityPyTorch for the Transformer built
// with DType float64: the same float32 weights, loaded exactly into float64
// parameters, give the PyTorch float64 loss and gradients to the golden
// file's float32 storage: the loss within 2^-24 relative, each gradient
// within 2e-7 of its largest element (the float32 model: 7e-8 and 1.5e-6).
func TestParityPyTorchFloat64(t *testing.T) {
	golden, err := safetensors.Open(parityGolden)
	if err != nil {
		t.Fatal(err)
	}
	defer golden.Close()
	weights := filepath.Join(t.TempDir(), "weights.safetensors")
	writeParityWeights(t, weights)

	dev := cpu.New()
	cfg := parityConfig()
	cfg.DType = device.Float64
	m, err := New(dev, cfg, paritySeed+1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Load(weights); err != nil {
		t.Fatal(err)
	}
	g := autograd.New(dev)
	loss, _ := m.Forward(g, goldenIDs(t, dev, golden, "inputs"), goldenIDs(t, dev, golden, "targets"), ForwardOptions{})
	if err := g.Err(); err != nil {
		t.Fatal(err)
	}
	if loss.DType() != device.Float64 {
		t.Fatalf("loss is %v", loss.DType())
	}
	got := loss.Float64s()[0]
	if err := g.Backward(loss); err != nil {
		t.Fatal(err)
	}
	want := make([]float64, 1)
	if err := golden.ReadAsFloat64("loss", []int{}, want); err != nil {
		t.Fatal(err)
	}
	const storage = 0x1p-24 // the golden's float32 rounding
	if e := math.Abs(got-want[0]) / math.Abs(want[0]); e > storage {
		t.Errorf("float64 loss %.12g, PyTorch float64 %.12g stored in float32: rel err %.2g > %g", got, want[0], e, storage)
	}
	var worst float64
	for _, p := range m.Parameters() {
		ref := make([]float64, p.Len())
		if err := golden.ReadAsFloat64("grad."+p.Name, p.Shape(), ref); err != nil {
			t.Fatal(err)
		}
		have := p.Grad().Float64s()
		var maxRef, maxErr float64
		for i := range ref {
			maxRef = max(maxRef, math.Abs(ref[i]))
			maxErr = max(maxErr, math.Abs(have[i]-ref[i]))
		}
		worst = max(worst, maxErr/maxRef)
		if maxErr/maxRef > 2e-7 {
			t.Errorf("float64 grad %s: max abs err %.3g = %.3g of max|grad| %.3g", p.Name, maxErr, maxErr/maxRef, maxRef)
		}
	}
	t.Logf("float64: loss rel err %.2g, worst gradient err/max|grad| %.3g", math.Abs(got-want[0])/math.Abs(want[0]), worst)
}
