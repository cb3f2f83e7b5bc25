package nn

import "testing"

// TestEvaluate: Evaluate turns every dropout off and its restore puts
// each back in its own mode, shared modules counted once.
func TestEvaluate(t *testing.T) {
	shared := &Dropout{P: 0.1}
	m := &struct {
		A, B  Dropout
		List  []Dropout
		Share *Dropout
		Again *Dropout
	}{B: Dropout{Eval: true}, List: []Dropout{{}, {Eval: true}}, Share: shared, Again: shared}
	before := []bool{m.A.Training(), m.B.Training(), m.List[0].Training(), m.List[1].Training(), shared.Training()}
	restore := Evaluate(m)
	for i, d := range []*Dropout{&m.A, &m.B, &m.List[0], &m.List[1], shared} {
		if d.Training() {
			t.Errorf("dropout %d in training mode under Evaluate", i)
		}
	}
	restore()
	for i, d := range []*Dropout{&m.A, &m.B, &m.List[0], &m.List[1], shared} {
		if d.Training() != before[i] {
			t.Errorf("dropout %d: training %v after restore, want %v", i, d.Training(), before[i])
		}
	}
}
