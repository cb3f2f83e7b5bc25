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

// TestLayerNormBackwardRowMatchesLoop: the row of LayerNormBackward
// written out per case of the gain gives the one loop with the gain
// tested inside (the code it replaced) bit for bit.
func TestLayerNormBackwardRowMatchesLoop(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	normal := func() []float32 { // finite: a NaN would make every output NaN
		v := make([]float32, 777)
		for i := range v {
			v[i] = float32(r.NormFloat64())
		}
		return v
	}
	x, dy, w := normal(), normal(), normal()
	mu, rs := float32(0.3), float32(1.7)
	for _, wv := range [][]float32{nil, w} {
		want := make([]float32, len(x))
		var sg, sgx float64
		for i, v := range x {
			g := dy[i]
			if wv != nil {
				g *= wv[i]
			}
			sg += float64(g)
			sgx += float64(g) * float64((v-mu)*rs)
		}
		c1, c2 := float32(sg/float64(len(x))), float32(sgx/float64(len(x)))
		for i, v := range x {
			g := dy[i]
			if wv != nil {
				g *= wv[i]
			}
			want[i] = rs * (g - c1 - (v-mu)*rs*c2)
		}
		got := make([]float32, len(x))
		layerNormBackwardRow(got, x, dy, wv, mu, rs)
		if i, ok := sameBits(got, want); !ok {
			t.Errorf("gain %v: [%d] = %v, one loop %v", wv != nil, i, got[i], want[i])
		}
	}
}
