package optim

import (
	"fmt"

	"github.com/hilbert-ml/hilbert/tensor"
)

// rule is one optimizer's maths: the update of one parameter and the
// state it keeps. Everything else an optimizer does (its parameter list,
// step counters, the scheduled learning rate, skipping parameters without
// a gradient, LastStep, state names for checkpoints) is perParam's, so an
// optimizer is the file of its rule.
type rule interface {
	// spec says what the rule keeps and which parameters it takes.
	spec() ruleSpec
	// update applies one step to u.P.
	update(u *paramUpdate) error
}

// ruleSpec is what perParam knows of a rule besides its update.
type ruleSpec struct {
	// kind names the rule: the first word of every state name.
	kind string
	// peak is the peak learning rate (lr_t = peak * the schedule's scale).
	peak float64
	// keepStep says whether the last applied step is kept (LastStep).
	keepStep bool
	// slots names the state tensors kept per parameter, each zeroed at
	// the parameter's shape and dtype ("m", "v").
	slots []string
	// counted says whether the step counter t is state ("<kind>.t.<name>").
	counted bool
	// matrix refuses parameters that are not matrices (matrixRule).
	matrix bool
}

// paramUpdate is one parameter's step as a rule sees it.
type paramUpdate struct {
	P, G  *tensor.Tensor   // the parameter and its gradient (same shape and dtype)
	Slots []*tensor.Tensor // the state tensors, in the order of rule.slots
	// Step receives the applied step excluding decoupled weight decay when
	// the step is kept (rule.keepStep), else it is nil.
	Step *tensor.Tensor
	// T is the step count, this step included (1 on the first).
	T int64
	// LR is the scheduled learning rate.
	LR float64
	// Rows and Cols view P as a matrix: its leading dimension against the
	// rest (Rows = Len, Cols = 1 for a vector).
	Rows, Cols int
}

// perParam is an Optimizer from a rule.
type perParam struct {
	rule  rule
	spec  ruleSpec
	state []*paramState
	index map[*tensor.Tensor]*paramState
}

// paramState is what an optimizer keeps per parameter: its step counter,
// its rule's state tensors and, when asked, the last applied step.
type paramState struct {
	p          *tensor.Tensor
	t          int64
	slots      []*tensor.Tensor
	step       *tensor.Tensor // nil unless keepStep
	done       bool           // a step has been applied since construction
	rows, cols int
}

// newPerParam returns an optimizer over params running r, with zeroed
// state, once validate has accepted the rule's configuration; wrap gives
// the exported optimizer that holds it.
func newPerParam[O any](validate func() error, r rule, params []*tensor.Tensor, wrap func(*perParam) *O) (*O, error) {
	if err := validate(); err != nil {
		return nil, err
	}
	spec := r.spec()
	kind := spec.kind
	if err := checkParams(kind, params); err != nil {
		return nil, err
	}
	o := &perParam{rule: r, spec: spec, index: map[*tensor.Tensor]*paramState{}}
	for _, p := range params {
		if spec.matrix {
			if err := matrixRule(kind, p); err != nil {
				return nil, err
			}
		}
		st := &paramState{p: p, rows: p.Len(), cols: 1}
		if p.Rank() >= 2 {
			if st.rows = p.Dim(0); st.rows > 0 {
				st.cols = p.Len() / st.rows
			}
		}
		names := spec.slots
		if spec.keepStep {
			names = append(names[:len(names):len(names)], "step")
		}
		for _, name := range names {
			s, err := tensor.NewOf(p.Device(), p.DType(), p.Shape()...)
			if err != nil {
				return nil, fmt.Errorf("optim: %s: state of %s: %w", kind, p.Name, err)
			}
			if name == "step" {
				s.Name = p.Name
				st.step = s
				continue
			}
			st.slots = append(st.slots, s)
		}
		o.state = append(o.state, st)
		o.index[p] = st
	}
	return wrap(o), nil
}

// Kind names the rule.
func (o *perParam) Kind() string { return o.spec.kind }

// PeakLR returns the peak learning rate (lr_t = PeakLR * the schedule's
// scale).
func (o *perParam) PeakLR() float64 { return o.spec.peak }

// Params returns the parameters in order.
func (o *perParam) Params() []*tensor.Tensor {
	ps := make([]*tensor.Tensor, len(o.state))
	for i, st := range o.state {
		ps[i] = st.p
	}
	return ps
}

// Step applies one update at learning rate peak*scale to every parameter
// that has a gradient.
func (o *perParam) Step(scale float64) error {
	lr, err := lrOf(o.spec.kind, o.spec.peak, scale)
	if err != nil {
		return err
	}
	for _, st := range o.state {
		g, err := o.grad(st)
		if err != nil {
			return err
		}
		if g == nil {
			continue
		}
		st.t++
		if err := o.apply(st, g, lr); err != nil {
			return err
		}
	}
	return nil
}

// grad returns st's gradient (nil: none, skip it; a zero-sized parameter
// has nothing to update either).
func (o *perParam) grad(st *paramState) (*tensor.Tensor, error) {
	g, err := gradOf(o.spec.kind, st.p)
	if err != nil || g == nil || st.p.Len() == 0 {
		return nil, err
	}
	return g, nil
}

// apply runs the rule on st with gradient g at learning rate lr (st.t
// already counts this step) and marks the parameter changed.
func (o *perParam) apply(st *paramState, g *tensor.Tensor, lr float64) error {
	if err := o.rule.update(st.update(g, lr)); err != nil {
		return fmt.Errorf("optim: %s: %s: %w", o.spec.kind, st.p.Name, err)
	}
	st.changed()
	return nil
}

// update returns st's step with gradient g at learning rate lr as a rule
// sees it.
func (st *paramState) update(g *tensor.Tensor, lr float64) *paramUpdate {
	return &paramUpdate{P: st.p, G: g, Slots: st.slots, Step: st.step, T: st.t, LR: lr, Rows: st.rows, Cols: st.cols}
}

// changed records that a step was applied to st's parameter in place: a
// graph that saved it for its backward pass now refuses to run it, and
// LastStep returns the step.
func (st *paramState) changed() {
	st.p.MarkModified()
	st.done = true
}

// LastStep returns the step last applied to p excluding decoupled weight
// decay, or nil (see Optimizer).
func (o *perParam) LastStep(p *tensor.Tensor) *tensor.Tensor {
	if st := o.index[p]; st != nil && st.done {
		return st.step
	}
	return nil
}

// State returns every parameter's state tensors, "<kind>.<slot>.<name>",
// then its step counter "<kind>.t.<name>" when the rule counts steps.
func (o *perParam) State() []StateEntry {
	kind, slots := o.spec.kind, o.spec.slots
	var es []StateEntry
	for _, st := range o.state {
		for i, s := range st.slots {
			es = append(es, StateEntry{Name: kind + "." + slots[i] + "." + st.p.Name, Tensor: s})
		}
		if o.spec.counted {
			es = append(es, StateEntry{Name: kind + ".t." + st.p.Name, Counter: &st.t})
		}
	}
	return es
}

// matrixRule refuses p unless it is a matrix (rank >= 2, rows
// the leading dimension).
func matrixRule(kind string, p *tensor.Tensor) error {
	_, _, err := matrixShape(kind, p)
	return err
}
