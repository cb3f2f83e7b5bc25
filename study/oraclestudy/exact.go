package oraclestudy

import (
	"errors"
	"fmt"

	"github.com/hilbert-ml/hilbert/optim/geometry/oracle"
	"github.com/hilbert-ml/hilbert/train"
)

// exactSteps replaces the trainer's RowNorm head step by the exact
// diameter-constrained step of the same budget: RowNorm's step -lr RN(B)
// has row diameter at most 2 lr; the exact step S_* = -2 lr Phi*(B), Phi*
// a maximising potential of T(B) (scale-free, so B's bias correction does
// not matter), has diameter exactly 2 lr and decreases <B, S> by 2 lr T(B)
// >= lr sum ||b_i||. It is applied after the trainer's update, as
// U += S_* - S_RN, so the trainer's logged D(S_t) and Hilbert RMS are
// those of RowNorm's step, and a validation at update t sees the weights
// before the replacement of update t.
type exactSteps struct {
	n, iterations int
	solveS        float64
	worstGap      float64
	b             []float64
}

// replace applies the exact step of learning rate lr in place of the
// update's RowNorm step.
func (e *exactSteps) replace(t *train.Trainer, lr float64, opt oracle.Options) error {
	head := t.Head()
	o := t.Optimizer().Optimizer(head)
	if o == nil || o.Kind() != "rownorm" {
		return errors.New("the head's optimizer is not RowNorm")
	}
	var ema []float32
	for _, st := range o.State() {
		if st.Name == "rownorm.b."+head.Name && st.Tensor != nil {
			ema = st.Tensor.Float32s()
		}
	}
	last := t.Optimizer().LastStep(head)
	if ema == nil || last == nil {
		return errors.New("no RowNorm EMA or last step")
	}
	v, d := head.Dim(0), head.Dim(1)
	if e.b == nil {
		e.b = make([]float64, v*d)
	}
	for i, x := range ema {
		e.b[i] = float64(x)
	}
	res, err := oracle.Solve(e.b, v, d, opt)
	if err != nil {
		return err
	}
	e.n++
	e.iterations += res.Iterations
	e.solveS += res.Elapsed.Seconds()
	e.worstGap = max(e.worstGap, res.Gap)
	step := res.Step(2 * lr)
	w := head.Float32s()
	for i, s := range last.Float32s() {
		w[i] += float32(step[i]) - s
	}
	head.SetFloat32(w)
	return nil
}

// String is the summary's sentence on the solves, "" before the first.
func (e *exactSteps) String() string {
	if e.n == 0 {
		return ""
	}
	return fmt.Sprintf("Exact head steps: %d solves of T(B) on RowNorm's EMA B, worst relative gap %.1e, %.0f iterations on average, %.0f s of solving in all.",
		e.n, e.worstGap, float64(e.iterations)/float64(e.n), e.solveS)
}
