package optim

import (
	"fmt"
	"math"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/tensor"
)

// NewtonSchulzCoefficients are Muon's quintic iteration coefficients
// (a, b, c): X <- a X + (b A + c A^2) X with A = X X^T. They do not converge
// to an exactly orthogonal matrix; singular values land near 0.7-1.2.
var NewtonSchulzCoefficients = [3]float64{3.4445, -4.7750, 2.0315}

// MuonConfig holds Muon's hyper-parameters. The zero value is not useful
// (zero Newton-Schulz steps); start from PaperMuon.
type MuonConfig struct {
	// LR is the peak learning rate; a step uses LR * the schedule multiplier.
	LR float64
	// Momentum is the buffer's factor: buf = Momentum*buf + g (no dampening).
	Momentum float64
	// Nesterov uses g + Momentum*buf as the direction instead of buf.
	Nesterov bool
	// WeightDecay is decoupled, with the scheduled LR: p *= 1 - lr_t*WeightDecay.
	WeightDecay float64
	// Steps is the number of Newton-Schulz iterations (0: only the
	// Frobenius normalisation).
	Steps int
	// Eps is added to the Frobenius norm before dividing by it.
	Eps float64
	// KeepStep keeps the last applied step per parameter (LastStep).
	KeepStep bool
}

// PaperMuon returns the paper's Muon settings at peak learning rate lr:
// momentum 0.95 with Nesterov, weight decay 0.1, 5 Newton-Schulz steps,
// eps 1e-5.
func PaperMuon(lr float64) MuonConfig {
	return MuonConfig{LR: lr, Momentum: 0.95, Nesterov: true, WeightDecay: 0.1, Steps: 5, Eps: 1e-5}
}

func (c MuonConfig) validate() error {
	switch {
	case !(c.LR >= 0) || math.IsInf(c.LR, 0):
		return fmt.Errorf("optim: muon: learning rate %v", c.LR)
	case !(c.Momentum >= 0 && c.Momentum < 1):
		return fmt.Errorf("optim: muon: momentum %v must lie in [0, 1)", c.Momentum)
	case !(c.WeightDecay >= 0):
		return fmt.Errorf("optim: muon: weight decay %v", c.WeightDecay)
	case c.Steps < 0:
		return fmt.Errorf("optim: muon: %d Newton-Schulz steps", c.Steps)
	case !(c.Eps >= 0):
		return fmt.Errorf("optim: muon: eps %v", c.Eps)
	}
	return nil
}

// New returns a Muon optimizer over params with zeroed momentum.
func (c MuonConfig) New(params []*tensor.Tensor) (Optimizer, error) {
	return NewMuon(c, params)
}

// Muon is momentum orthogonalised by Newton-Schulz, for weight matrices
// stored [out, in]. Per parameter and step:
//
//	buf = m buf + g;  u = g + m buf (Nesterov) or buf
//	X = u / (||u||_F + eps);  5 x: A = X X^T; X = a X + (b A + c A A) X
//	S = -lr_t sqrt(max(1, rows/cols)) X;  p = p (1 - lr_t wd) + S
//
// When rows > cols the iteration runs on X^T, written without a transpose
// as A = X^T X; X = a X + X (b A + c A A). Everything runs in the
// parameter's dtype on its device (Gemm, Reduce, Axpby, Scale): fp32 for
// the paper, float64 on the CPU with the coefficients exact; scratch comes
// from the tensor pool, so float32 steps after the first allocate no
// device memory.
type Muon struct {
	cfg   MuonConfig
	state []*muonState
	index map[*tensor.Tensor]*muonState
	shard *muonShard // nil: every matrix orthogonalised here (see SetSharding)
}

type muonState struct {
	paramState
	rows, cols int
	buf        *tensor.Tensor
}

// NewMuon returns a Muon optimizer over params (rank >= 2; a parameter of
// higher rank is viewed as [Dim(0), rest]) with zeroed momentum.
func NewMuon(c MuonConfig, params []*tensor.Tensor) (*Muon, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	if err := checkParams("muon", params); err != nil {
		return nil, err
	}
	o := &Muon{cfg: c, index: map[*tensor.Tensor]*muonState{}}
	for _, p := range params {
		rows, cols, err := matrixShape("muon", p)
		if err != nil {
			return nil, err
		}
		ps, err := newParamState(p, c.KeepStep)
		if err != nil {
			return nil, fmt.Errorf("optim: muon: state of %s: %w", p.Name, err)
		}
		st := &muonState{paramState: *ps, rows: rows, cols: cols}
		if st.buf, err = tensor.NewOf(p.Device(), p.DType(), p.Shape()...); err != nil {
			return nil, fmt.Errorf("optim: muon: state of %s: %w", p.Name, err)
		}
		o.state = append(o.state, st)
		o.index[p] = st
	}
	return o, nil
}

// Kind returns "muon".
func (o *Muon) Kind() string { return "muon" }

// Config returns the optimizer's hyper-parameters.
func (o *Muon) Config() MuonConfig { return o.cfg }

// Params returns the parameters in order.
func (o *Muon) Params() []*tensor.Tensor {
	ps := make([]*tensor.Tensor, len(o.state))
	for i, st := range o.state {
		ps[i] = st.p
	}
	return ps
}

// Step applies one Muon update at learning rate LR*scale.
func (o *Muon) Step(scale float64) error {
	lr, err := lrOf("muon", o.cfg.LR, scale)
	if err != nil {
		return err
	}
	if o.shard != nil {
		return o.shardedStep(lr)
	}
	for _, st := range o.state {
		g, err := gradOf("muon", st.p)
		if err != nil {
			return err
		}
		if g == nil || st.p.Len() == 0 {
			continue
		}
		if err := o.step(st, g, lr); err != nil {
			return fmt.Errorf("optim: muon: %s: %w", st.p.Name, err)
		}
	}
	return nil
}

func (o *Muon) step(st *muonState, g *tensor.Tensor, lr float64) error {
	x, err := o.direction(st, g)
	if err != nil {
		return err
	}
	defer x.Release()
	if err := orthogonalize(st.p.Device(), x, st.rows, st.cols, o.cfg.Steps, o.cfg.Eps); err != nil {
		return err
	}
	return o.apply(st, x.Buffer(), lr)
}

// direction updates st's momentum with g (buf = m buf + g) and returns, in a pooled tensor
// the caller releases, the direction to orthogonalise: g + m buf
// (Nesterov) or buf.
func (o *Muon) direction(st *muonState, g *tensor.Tensor) (*tensor.Tensor, error) {
	dev := st.p.Device()
	if err := o.momentum(st, g); err != nil {
		return nil, err
	}
	x, err := tensor.NewPooled(dev, st.p.DType(), st.p.Len())
	if err != nil {
		return nil, err
	}
	if o.cfg.Nesterov {
		dev.Copy(x.Buffer(), g.Buffer())
		err = axpby(dev, x.Buffer(), st.buf.Buffer(), o.cfg.Momentum, 1)
	} else {
		dev.Copy(x.Buffer(), st.buf.Buffer())
	}
	if err != nil {
		x.Release()
		return nil, err
	}
	return x, nil
}

// momentum updates st's buffer with g: buf = m buf + g.
func (o *Muon) momentum(st *muonState, g *tensor.Tensor) error {
	return axpby(st.p.Device(), st.buf.Buffer(), g.Buffer(), 1, o.cfg.Momentum)
}

// apply updates st's parameter with the orthogonalised direction out:
// p = p (1 - lr wd) - lr sqrt(max(1, rows/cols)) out.
func (o *Muon) apply(st *muonState, out device.Buffer, lr float64) error {
	dev := st.p.Device()
	shape := math.Sqrt(max(1, float64(st.rows)/float64(st.cols)))
	alpha := -lr * shape
	if err := decayBuf(dev, st.p.Buffer(), 1-lr*o.cfg.WeightDecay); err != nil {
		return err
	}
	if err := axpby(dev, st.p.Buffer(), out, alpha, 1); err != nil {
		return err
	}
	if st.step != nil {
		if err := scaleBuf(dev, st.step.Buffer(), out, alpha); err != nil {
			return err
		}
	}
	// The parameter changed in place: a graph that saved it for its
	// backward pass now refuses to run it.
	st.p.MarkModified()
	st.done = true
	return nil
}

// NewtonSchulz orthogonalises x (rows x cols, the leading dimension
// against the rest) in place the way Muon does: X = X / (||X||_F + eps),
// then steps iterations of X = a X + (b A + c A A) X with A = X X^T (on the
// transpose when rows > cols), in x's dtype on x's device.
func NewtonSchulz(x *tensor.Tensor, steps int, eps float64) error {
	rows, cols, err := matrixShape("NewtonSchulz", x)
	if err != nil {
		return err
	}
	if steps < 0 || !(eps >= 0) {
		return fmt.Errorf("optim: NewtonSchulz: %d steps, eps %v", steps, eps)
	}
	if x.Len() == 0 {
		return nil
	}
	return orthogonalize(x.Device(), x, rows, cols, steps, eps)
}

// orthogonalize normalises x by its Frobenius norm (plus eps) and runs
// the Newton-Schulz iteration on it.
func orthogonalize(dev device.Device, x *tensor.Tensor, rows, cols, steps int, eps float64) error {
	// X = X / (||X||_F + eps), the norm read to the host.
	ss, err := sumSquares(dev, x.Buffer(), rows*cols, cols)
	if err != nil {
		return err
	}
	if math.IsNaN(ss) || math.IsInf(ss, 0) {
		return fmt.Errorf("non-finite update direction (sum of squares %v)", ss)
	}
	if ss > 0 || eps > 0 { // a zero direction with eps 0 stays zero
		if err := scaleBuf(dev, x.Buffer(), x.Buffer(), 1/(math.Sqrt(ss)+eps)); err != nil {
			return err
		}
	}
	return newtonSchulz(dev, x, rows, cols, steps)
}

// newtonSchulz runs steps iterations in place on x (rows x cols, already
// normalised), with pooled scratch.
func newtonSchulz(dev device.Device, x *tensor.Tensor, rows, cols, steps int) error {
	if steps == 0 {
		return nil
	}
	m := min(rows, cols) // A is m x m
	a, b, c := NewtonSchulzCoefficients[0], NewtonSchulzCoefficients[1], NewtonSchulzCoefficients[2]
	dt := x.DType()
	y, err := tensor.NewPooled(dev, dt, rows*cols)
	if err != nil {
		return err
	}
	defer y.Release()
	A, err := tensor.NewPooled(dev, dt, m*m)
	if err != nil {
		return err
	}
	defer A.Release()
	B, err := tensor.NewPooled(dev, dt, m*m)
	if err != nil {
		return err
	}
	defer B.Release()

	cur, next := x, y
	wide := rows <= cols
	for range steps {
		// A = X X^T (rows x rows) or X^T X (cols x cols)
		ga := device.GemmArgs{TransB: true, M: m, N: m, K: cols,
			A: cur.Buffer(), LDA: cols, B: cur.Buffer(), LDB: cols, C: A.Buffer(), LDC: m}
		if !wide {
			ga = device.GemmArgs{TransA: true, M: m, N: m, K: rows,
				A: cur.Buffer(), LDA: cols, B: cur.Buffer(), LDB: cols, C: A.Buffer(), LDC: m}
		}
		if err := gemm(dev, ga, 1, 0); err != nil {
			return err
		}
		// B = b A + c A A
		if err := scaleBuf(dev, B.Buffer(), A.Buffer(), b); err != nil {
			return err
		}
		if err := gemm(dev, device.GemmArgs{M: m, N: m, K: m,
			A: A.Buffer(), LDA: m, B: A.Buffer(), LDB: m, C: B.Buffer(), LDC: m}, c, 1); err != nil {
			return err
		}
		// next = a X + B X (wide) or a X + X B (tall)
		dev.Copy(next.Buffer(), cur.Buffer())
		gn := device.GemmArgs{M: rows, N: cols, K: rows,
			A: B.Buffer(), LDA: m, B: cur.Buffer(), LDB: cols, C: next.Buffer(), LDC: cols}
		if !wide {
			gn = device.GemmArgs{M: rows, N: cols, K: cols,
				A: cur.Buffer(), LDA: cols, B: B.Buffer(), LDB: m, C: next.Buffer(), LDC: cols}
		}
		if err := gemm(dev, gn, 1, a); err != nil {
			return err
		}
		cur, next = next, cur
	}
	if cur != x {
		dev.Copy(x.Buffer(), cur.Buffer())
	}
	return nil
}

// LastStep returns the step last applied to p excluding weight decay, or
// nil (see Optimizer).
func (o *Muon) LastStep(p *tensor.Tensor) *tensor.Tensor {
	if st := o.index[p]; st != nil {
		return st.lastStep()
	}
	return nil
}

// State returns the momentum buffer of every parameter: "muon.buf.<name>".
// Muon has no step counter.
func (o *Muon) State() []StateEntry {
	var es []StateEntry
	for _, st := range o.state {
		es = append(es, StateEntry{Name: "muon.buf." + st.p.Name, Tensor: st.buf})
	}
	return es
}
