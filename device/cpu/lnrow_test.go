package cpu

import (
	"math/rand/v2"
	"testing"
)

// TestLayerNormRowMatchesPasses: the one-pass row gives the three passes'
// (normalise, times the gain, plus the bias) float32 results bit for bit,
// with and without a gain and a bias.
func TestLayerNormRowMatchesPasses(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	x, w, b := elemsimdInputs(r, 777), elemsimdInputs(r, 777), elemsimdInputs(r, 777)
	mu, rs := float32(0.3), float32(1.7)
	for _, tc := range []struct {
		name string
		w, b []float32
	}{{"gain and bias", w, b}, {"gain", w, nil}, {"bias", nil, b}, {"neither", nil, nil}} {
		want := make([]float32, len(x))
		for i, v := range x {
			want[i] = (v - mu) * rs
		}
		for i := range tc.w {
			want[i] *= tc.w[i]
		}
		for i := range tc.b {
			want[i] += tc.b[i]
		}
		got := make([]float32, len(x))
		layerNormRow(got, x, tc.w, tc.b, mu, rs)
		if i, ok := sameBits(got, want); !ok {
			t.Errorf("%s: [%d] = %v, three passes %v", tc.name, i, got[i], want[i])
		}
	}
}
