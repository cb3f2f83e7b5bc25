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
// (zero Newton-Schulz iterations); start from PaperMuon.
type MuonConfig struct {
	// LR is the peak learning rate; a step uses LR * the schedule multiplier.
	LR float64
	// Momentum is the buffer's factor: buf = Momentum*buf + g (no dampening).
	Momentum float64
	// Nesterov uses g + Momentum*buf as the direction instead of buf.
	Nesterov bool
	// WeightDecay is decoupled, with the scheduled LR: p *= 1 - lr_t*WeightDecay.
	WeightDecay float64
	// NSIterations is the number of Newton-Schulz iterations (0: only
	// the Frobenius normalisation). It was Steps; "step" is the update's
	// change S_t (see the words in docs/optimizers.md).
	NSIterations int
	// Eps is added to the Frobenius norm before dividing by it.
	Eps float64
	// KeepStep keeps the last applied step per parameter (LastStep).
	KeepStep bool
}

// PaperMuon returns the paper's Muon settings at peak learning rate lr:
// momentum 0.95 with Nesterov, weight decay 0.1, 5 Newton-Schulz iterations,
// eps 1e-5.
func PaperMuon(lr float64) MuonConfig {
	return MuonConfig{LR: lr, Momentum: 0.95, Nesterov: true, WeightDecay: 0.1, NSIterations: 5, Eps: 1e-5}
}

func (c MuonConfig) validate() error {
	switch {
	case !(c.LR >= 0) || math.IsInf(c.LR, 0):
		return fmt.Errorf("optim: muon: learning rate %v", c.LR)
	case !(c.Momentum >= 0 && c.Momentum < 1):
		return fmt.Errorf("optim: muon: momentum %v must lie in [0, 1)", c.Momentum)
	case !(c.WeightDecay >= 0):
		return fmt.Errorf("optim: muon: weight decay %v", c.WeightDecay)
	case c.NSIterations < 0:
		return fmt.Errorf("optim: muon: %d Newton-Schulz iterations", c.NSIterations)
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
	*perParam
	cfg   MuonConfig
	shard *muonShard // nil: every matrix orthogonalised here (see SetSharding)
}

// NewMuon returns a Muon optimizer over params (rank >= 2; a parameter of
// higher rank is viewed as [Dim(0), rest]) with zeroed momentum.
func NewMuon(c MuonConfig, params []*tensor.Tensor) (*Muon, error) {
	return newPerParam(c.validate, muonRule{c}, params,
		func(pp *perParam) *Muon { return &Muon{perParam: pp, cfg: c} })
}

// Config returns the optimizer's hyper-parameters.
func (o *Muon) Config() MuonConfig { return o.cfg }

// Step applies one Muon update at learning rate LR*scale, its
// orthogonalisations divided among ranks after SetSharding.
func (o *Muon) Step(scale float64) error {
	if o.shard == nil {
		return o.perParam.Step(scale)
	}
	lr, err := lrOf("muon", o.cfg.LR, scale)
	if err != nil {
		return err
	}
	return o.shardedStep(lr)
}

// muonRule is Muon's update; its state is the momentum buffer
// ("muon.buf.<name>"), without a step counter.
type muonRule struct{ cfg MuonConfig }

func (r muonRule) spec() ruleSpec {
	return ruleSpec{kind: "muon", peak: r.cfg.LR, keepStep: r.cfg.KeepStep, slots: []string{"buf"}, matrix: true}
}

func (r muonRule) update(u *paramUpdate) error {
	x, err := r.direction(u)
	if err != nil {
		return err
	}
	defer x.Release()
	if err := orthogonalize(u.P.Device(), x, u.Rows, u.Cols, r.cfg.NSIterations, r.cfg.Eps); err != nil {
		return err
	}
	return r.apply(u, x.Buffer())
}

// direction updates u's momentum with its gradient (buf = m buf + g) and
// returns, in a pooled tensor the caller releases, the direction to
// orthogonalise: g + m buf (Nesterov) or buf.
func (r muonRule) direction(u *paramUpdate) (*tensor.Tensor, error) {
	dev, buf := u.P.Device(), u.Slots[0]
	if err := r.momentum(u); err != nil {
		return nil, err
	}
	x, err := tensor.NewPooled(dev, u.P.DType(), u.P.Len())
	if err != nil {
		return nil, err
	}
	if r.cfg.Nesterov {
		dev.Copy(x.Buffer(), u.G.Buffer())
		err = axpby(dev, x.Buffer(), buf.Buffer(), r.cfg.Momentum, 1)
	} else {
		dev.Copy(x.Buffer(), buf.Buffer())
	}
	if err != nil {
		x.Release()
		return nil, err
	}
	return x, nil
}

// momentum updates u's buffer with its gradient: buf = m buf + g.
func (r muonRule) momentum(u *paramUpdate) error {
	return axpby(u.P.Device(), u.Slots[0].Buffer(), u.G.Buffer(), 1, r.cfg.Momentum)
}

// apply updates u's parameter with the orthogonalised direction out:
// p = p (1 - lr wd) - lr sqrt(max(1, rows/cols)) out.
func (r muonRule) apply(u *paramUpdate, out device.Buffer) error {
	dev, p := u.P.Device(), u.P
	shape := math.Sqrt(max(1, float64(u.Rows)/float64(u.Cols)))
	alpha := -u.LR * shape
	if err := decayBuf(dev, p.Buffer(), 1-u.LR*r.cfg.WeightDecay); err != nil {
		return err
	}
	if err := axpby(dev, p.Buffer(), out, alpha, 1); err != nil {
		return err
	}
	if u.Step != nil {
		return scaleBuf(dev, u.Step.Buffer(), out, alpha)
	}
	return nil
}

// NewtonSchulz orthogonalises x (rows x cols, the leading dimension
// against the rest) in place the way Muon does: X = X / (||X||_F + eps),
// then iterations times X = a X + (b A + c A A) X with A = X X^T (on the
// transpose when rows > cols), in x's dtype on x's device.
func NewtonSchulz(x *tensor.Tensor, iterations int, eps float64) error {
	rows, cols, err := matrixShape("NewtonSchulz", x)
	if err != nil {
		return err
	}
	if iterations < 0 || !(eps >= 0) {
		return fmt.Errorf("optim: NewtonSchulz: %d iterations, eps %v", iterations, eps)
	}
	if x.Len() == 0 {
		return nil
	}
	return orthogonalize(x.Device(), x, rows, cols, iterations, eps)
}

// orthogonalize normalises x by its Frobenius norm (plus eps) and runs
// the Newton-Schulz iteration on it.
func orthogonalize(dev device.Device, x *tensor.Tensor, rows, cols, iterations int, eps float64) error {
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
	return newtonSchulz(dev, x, rows, cols, iterations)
}

// newtonSchulz runs the iterations in place on x (rows x cols, already
// normalised), with pooled scratch.
func newtonSchulz(dev device.Device, x *tensor.Tensor, rows, cols, iterations int) error {
	if iterations == 0 {
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
	for range iterations {
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
