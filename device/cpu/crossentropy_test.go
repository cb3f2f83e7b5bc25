package cpu_test

import (
	"fmt"
	"math"
	"testing"
)

// refLogSumExp returns log(sum(exp(z))) in float64.
func refLogSumExp(z []float32) float64 {
	m := math.Inf(-1)
	for _, v := range z {
		m = math.Max(m, float64(v))
	}
	var s float64
	for _, v := range z {
		s += math.Exp(float64(v) - m)
	}
	return m + math.Log(s)
}

func TestCrossEntropy(t *testing.T) {
	for _, tc := range []struct {
		rows, vocab int
		scale       float32 // logit magnitude
		shift       float32 // added to every logit (stability)
	}{
		{1, 1, 1, 0},
		{5, 7, 3, 0},
		{3, 50257, 4, 0},
		{2, 50257, 1, 1e4},
		{17, 33, 30, -1e3},
		{64, 1000, 2, 0}, // rows split across goroutines
	} {
		name := fmt.Sprintf("%dx%d/scale%g/shift%g", tc.rows, tc.vocab, tc.scale, tc.shift)
		r := newRand(uint64(tc.rows*tc.vocab) + 1)
		logits := randSlice(r, tc.rows*tc.vocab, tc.scale)
		for i := range logits {
			logits[i] += tc.shift
		}
		targets := make([]int32, tc.rows)
		for i := range targets {
			targets[i] = int32(r.IntN(tc.vocab))
		}
		if tc.rows > 1 {
			targets[0], targets[1] = 0, int32(tc.vocab-1) // both ends of the row
		}
		dloss := randSlice(r, tc.rows, 2)
		Z, T := buf(logits), ibuf(t, targets)
		loss, lse := buf(randSlice(r, tc.rows, 9)), buf(randSlice(r, tc.rows, 9))
		dev.CrossEntropy(loss, lse, Z, T, tc.rows, tc.vocab)

		wantLoss, wantLse := make([]float64, tc.rows), make([]float64, tc.rows)
		wantGrad := make([]float64, tc.rows*tc.vocab)
		for i := 0; i < tc.rows; i++ {
			z := logits[i*tc.vocab : (i+1)*tc.vocab]
			wantLse[i] = refLogSumExp(z)
			wantLoss[i] = wantLse[i] - float64(z[targets[i]])
			for j, v := range z {
				wantGrad[i*tc.vocab+j] = float64(dloss[i]) * math.Exp(float64(v)-wantLse[i])
			}
			wantGrad[i*tc.vocab+int(targets[i])] -= float64(dloss[i])
		}
		// lse and loss are computed in float64 from float32 logits and
		// rounded once: within u of the value (2u for the loss, whose
		// rounding is relative to lse when the two nearly cancel).
		checkClose(t, name+" lse", host(lse), wantLse, 2*u32, 0)
		checkCloseTol(t, name+" loss", host(loss), wantLoss, func(i int) float64 {
			return 2*u32*math.Abs(wantLoss[i]) + 2*u32*math.Abs(wantLse[i])
		})

		// The backward reads lse as stored (float32): its rounding error
		// of u*|lse| shifts every exponent, so the probabilities carry a
		// relative error of a few u times |lse| + |z - lse| (large for the
		// shifted rows, where it is inherent in a float32 lse), plus u of
		// dloss where the one-hot term is subtracted.
		gotLse := host(lse)
		for _, alias := range []bool{false, true} {
			dz := buf(randSlice(r, tc.rows*tc.vocab, 9))
			logitsIn := Z
			if alias {
				dz = buf(logits)
				logitsIn = dz
			}
			dev.CrossEntropyBackward(dz, buf(dloss), logitsIn, lse, T, tc.rows, tc.vocab)
			checkCloseTol(t, fmt.Sprintf("%s dlogits alias=%v", name, alias), host(dz), wantGrad, func(i int) float64 {
				row := i / tc.vocab
				l := float64(gotLse[row])
				arg := math.Abs(float64(logits[i]) - l)
				return math.Abs(wantGrad[i])*4*u32*(math.Abs(l)+arg+1) + 2*u32*math.Abs(float64(dloss[row]))
			})
		}
		checkEqual(t, name+" logits unchanged", host(Z), logits)
	}
}

// TestCrossEntropyWithGrad checks the fused training path against the
// float64 reference: loss and lse as CrossEntropy, and the logits replaced
// by gradScale * (softmax - onehot).
func TestCrossEntropyWithGrad(t *testing.T) {
	for _, tc := range []struct{ rows, vocab int }{{1, 1}, {5, 7}, {3, 50257}, {64, 1000}} {
		name := fmt.Sprintf("%dx%d", tc.rows, tc.vocab)
		r := newRand(uint64(tc.rows*tc.vocab) + 9)
		logits := randSlice(r, tc.rows*tc.vocab, 4)
		targets := make([]int32, tc.rows)
		for i := range targets {
			targets[i] = int32(r.IntN(tc.vocab))
		}
		const gradScale = 1.0 / 3
		Z := buf(logits)
		loss, lse := buf(randSlice(r, tc.rows, 9)), buf(randSlice(r, tc.rows, 9))
		dev.CrossEntropyWithGrad(loss, lse, Z, ibuf(t, targets), tc.rows, tc.vocab, gradScale)
		wantLoss, wantLse := make([]float64, tc.rows), make([]float64, tc.rows)
		wantGrad := make([]float64, len(logits))
		for i := 0; i < tc.rows; i++ {
			z := logits[i*tc.vocab : (i+1)*tc.vocab]
			wantLse[i] = refLogSumExp(z)
			wantLoss[i] = wantLse[i] - float64(z[targets[i]])
			for j, v := range z {
				wantGrad[i*tc.vocab+j] = gradScale * math.Exp(float64(v)-wantLse[i])
			}
			wantGrad[i*tc.vocab+int(targets[i])] -= gradScale
		}
		// Same bounds as TestCrossEntropy (|lse| <= ~20 here).
		checkClose(t, name+" lse", host(lse), wantLse, 2*u32, 0)
		checkCloseTol(t, name+" loss", host(loss), wantLoss, func(i int) float64 {
			return 2*u32*math.Abs(wantLoss[i]) + 2*u32*math.Abs(wantLse[i])
		})
		checkCloseTol(t, name+" grad", host(Z), wantGrad, func(i int) float64 {
			return math.Abs(wantGrad[i])*4*u32*(math.Abs(wantLse[i/tc.vocab])+math.Abs(float64(logits[i])-wantLse[i/tc.vocab])+1) + 2*u32*gradScale
		})
	}
}
