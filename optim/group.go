package optim

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"

	"github.com/hilbert-ml/hilbert/tensor"
)

// Config is an optimizer's hyper-parameters, able to build the optimizer
// over a list of parameters. AdamWConfig, MuonConfig, RowNormConfig,
// SGDConfig and LionConfig implement it.
type Config interface {
	New(params []*tensor.Tensor) (Optimizer, error)
}

// Match reports whether a parameter, by its name, belongs to a group.
type Match func(name string) bool

// Prefix matches names that start with any of the prefixes.
func Prefix(prefixes ...string) Match {
	return func(name string) bool {
		return slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(name, p) })
	}
}

// Exact matches names equal to any of names.
func Exact(names ...string) Match {
	return func(name string) bool { return slices.Contains(names, name) }
}

// GroupSpec is one entry of a Recipe: the parameters that Match claims are
// updated by one optimizer built from Config.
type GroupSpec struct {
	// Name labels the group in errors and logs ("blocks", "embed", "head").
	Name string
	// Match claims parameters by name.
	Match Match
	// Config builds the group's optimizer.
	Config Config
	// Required makes a group that claims no parameter an error.
	Required bool
}

// Recipe maps every trainable parameter to exactly one optimizer. Groups
// are stepped in order.
type Recipe struct {
	Groups []GroupSpec
}

// Group is a built group: its spec's name and the optimizer over the
// parameters it claimed.
type Group struct {
	Name      string
	Optimizer Optimizer
}

// Set is the optimizer of a whole model: one group per recipe entry, each
// with its own optimizer, all stepped with the same schedule multiplier.
// It is what a training loop holds.
type Set struct {
	groups []Group
	params []*tensor.Tensor
	owner  map[*tensor.Tensor]Optimizer
}

// NewSet assigns every parameter of params to the one group of r that
// claims it and builds each group's optimizer. It refuses, naming the
// parameter: a parameter no group claims, one claimed by two groups, an
// unnamed parameter, two parameters with one name, the same tensor or
// buffer listed twice (a tied head), and a required group left empty.
func NewSet(r Recipe, params []*tensor.Tensor) (*Set, error) {
	if len(r.Groups) == 0 {
		return nil, fmt.Errorf("optim: recipe has no groups")
	}
	names := map[string]int{}
	for i, p := range params {
		if p == nil {
			return nil, fmt.Errorf("optim: parameter %d is nil", i)
		}
		if p.Name == "" {
			return nil, fmt.Errorf("optim: parameter %d (%v) has no name; groups match parameters by name", i, p.Shape())
		}
		if j, dup := names[p.Name]; dup {
			return nil, fmt.Errorf("optim: parameters %d and %d are both named %s", j, i, p.Name)
		}
		names[p.Name] = i
	}
	if err := checkShared(params); err != nil {
		return nil, err
	}
	members := make([][]*tensor.Tensor, len(r.Groups))
	for _, p := range params {
		claimed := -1
		for gi, g := range r.Groups {
			if g.Match == nil || !g.Match(p.Name) {
				continue
			}
			if claimed >= 0 {
				return nil, fmt.Errorf("optim: parameter %s is claimed by groups %q and %q; every parameter belongs to exactly one group", p.Name, r.Groups[claimed].Name, g.Name)
			}
			claimed = gi
		}
		if claimed < 0 {
			return nil, fmt.Errorf("optim: parameter %s belongs to no group of the recipe; every trainable parameter belongs to exactly one group", p.Name)
		}
		members[claimed] = append(members[claimed], p)
	}
	s := &Set{params: params, owner: map[*tensor.Tensor]Optimizer{}}
	for gi, g := range r.Groups {
		if len(members[gi]) == 0 {
			if g.Required {
				return nil, fmt.Errorf("optim: group %q claims no parameter (a tied or missing parameter?)", g.Name)
			}
			continue
		}
		if g.Config == nil {
			return nil, fmt.Errorf("optim: group %q has no optimizer config", g.Name)
		}
		opt, err := g.Config.New(members[gi])
		if err != nil {
			return nil, fmt.Errorf("optim: group %q: %w", g.Name, err)
		}
		s.groups = append(s.groups, Group{Name: g.Name, Optimizer: opt})
		for _, p := range members[gi] {
			s.owner[p] = opt
		}
	}
	return s, nil
}

// checkShared refuses a tensor listed twice or two parameters sharing one
// device buffer (a tied head: the head and the embedding one tensor, or
// one a reshaped view of the other).
func checkShared(params []*tensor.Tensor) error {
	seenT := map[*tensor.Tensor]string{}
	seenB := map[any]string{}
	for _, p := range params {
		if other, ok := seenT[p]; ok {
			return fmt.Errorf("optim: parameters %s and %s are the same tensor (tied weights are not supported)", other, p.Name)
		}
		seenT[p] = p.Name
		b := p.Buffer()
		if b == nil || !reflect.TypeOf(b).Comparable() {
			continue
		}
		if other, ok := seenB[b]; ok {
			return fmt.Errorf("optim: parameters %s and %s share one buffer (tied weights are not supported)", other, p.Name)
		}
		seenB[b] = p.Name
	}
	return nil
}

// Step applies one update of every group, in recipe order, with the same
// schedule multiplier (lr_t = each group's peak LR * scale).
func (s *Set) Step(scale float64) error {
	for _, g := range s.groups {
		if err := g.Optimizer.Step(scale); err != nil {
			return fmt.Errorf("optim: group %q: %w", g.Name, err)
		}
	}
	return nil
}

// ZeroGrad sets every parameter's gradient to zero (those that have one).
func (s *Set) ZeroGrad() { tensor.ZeroGrad(s.params) }

// Params returns every parameter of the set, in the order given to NewSet.
func (s *Set) Params() []*tensor.Tensor { return s.params }

// Groups returns the built groups in step order.
func (s *Set) Groups() []Group { return s.groups }

// Group returns the optimizer of the named group, or nil.
func (s *Set) Group(name string) Optimizer {
	for _, g := range s.groups {
		if g.Name == name {
			return g.Optimizer
		}
	}
	return nil
}

// PeakLR returns the peak learning rate of the named group (the rate at
// a schedule multiplier of 1): NaN for a group the set does not have, or
// whose optimizer does not report one (every optimizer of this package
// does, through a PeakLR() float64 method).
func (s *Set) PeakLR(group string) float64 {
	if o, ok := s.Group(group).(interface{ PeakLR() float64 }); ok {
		return o.PeakLR()
	}
	return math.NaN()
}

// Optimizer returns the optimizer that updates p, or nil.
func (s *Set) Optimizer(p *tensor.Tensor) Optimizer { return s.owner[p] }

// LastStep returns the step last applied to p excluding weight decay (S_t),
// or nil when its optimizer keeps none (see Optimizer.LastStep).
func (s *Set) LastStep(p *tensor.Tensor) *tensor.Tensor {
	if o := s.owner[p]; o != nil {
		return o.LastStep(p)
	}
	return nil
}
