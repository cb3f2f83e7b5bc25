package train

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/hilbert-ml/hilbert/autograd"
	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/dist"
	"github.com/hilbert-ml/hilbert/optim"
	"github.com/hilbert-ml/hilbert/tensor"
)

// Model is anything a Loop can train: its parameters, and the scalar loss
// of one micro-batch of type B recorded on a graph. The loop averages the
// losses of the micro-batches of an update, so Loss should be a mean over
// the micro-batch's examples.
type Model[B any] interface {
	Parameters() []*tensor.Tensor
	Loss(g *autograd.Graph, batch B) (*tensor.Tensor, error)
}

// Source is a stream of micro-batches of type B that can be resumed:
// Cursor returns the position of the next micro-batch Next would return,
// as bytes a checkpoint keeps, and Seek goes back to such a position, so a
// resumed run sees exactly the batches it would have seen.
type Source[B any] interface {
	Next() (B, error)
	Cursor() ([]byte, error)
	Seek(cursor []byte) error
}

// Schedule gives the learning-rate multiplier of update step (0-based);
// optim.Cosine is one.
type Schedule interface {
	Scale(step int) float64
}

// LoopConfig tunes a Loop. The zero value is one micro-batch per update,
// no clipping and a constant learning rate.
type LoopConfig struct {
	// Accumulate is the number of micro-batches whose gradients make one
	// update (gradient accumulation); 0 means 1. Over several ranks it is
	// the number of the whole update, and must be a multiple of the ranks.
	Accumulate int
	// ClipNorm clips the global gradient norm to this value before every
	// step (optim.ClipGradNorm); 0 means no clipping.
	ClipNorm float64
	// Schedule multiplies every group's learning rate; nil means 1.
	Schedule Schedule
	// Autocast is the graph's autocast dtype (device.BFloat16, say); the
	// zero value keeps float32.
	Autocast device.DType
	// Comm, when it has more than one rank, makes the loop data-parallel:
	// each rank takes its share of every update's micro-batches from the
	// same Source stream and the gradients are averaged over the ranks
	// before the identical step on every rank. Nil means one process.
	Comm dist.Communicator
}

// Update is the record of one optimizer update.
type Update struct {
	// Step is the number of updates done, this one included.
	Step int
	// Loss is the mean training loss of the update's micro-batches (over
	// every rank).
	Loss float64
	// GradNorm is the global gradient norm before clipping.
	GradNorm float64
	// LRScale is the schedule's multiplier the step ran at.
	LRScale float64
	// Duration is the wall time of the update.
	Duration time.Duration
	// Comm is the part of Duration spent in collectives (averaging the
	// gradients and the loss over the ranks); zero with one rank.
	Comm time.Duration
}

// Loop trains any Model on any Source with an optimizer recipe the caller
// built (an *optim.Set): the training loop of the paper's job, as a
// library. Each update zeroes the gradients, runs forward and backward on
// Accumulate micro-batches (their losses scaled by 1/Accumulate), clips
// the global gradient norm, and steps the optimizer at the schedule's
// multiplier. Save and Load checkpoint it (parameters, optimizer state,
// update count, data cursor).
type Loop[B any] struct {
	dev   device.Device
	model Model[B]
	data  Source[B]
	opt   *optim.Set
	cfg   LoopConfig
	g     *autograd.Graph
	step  int
	comm  *gradComm // nil with one rank
}

// NewLoop returns a loop at update 0. The optimizer set must hold the
// model's parameters (optim.NewSet(recipe, model.Parameters())).
func NewLoop[B any](dev device.Device, model Model[B], data Source[B], opt *optim.Set, cfg LoopConfig) (*Loop[B], error) {
	switch {
	case dev == nil:
		return nil, errors.New("train: NewLoop: no device")
	case model == nil:
		return nil, errors.New("train: NewLoop: no model")
	case data == nil:
		return nil, errors.New("train: NewLoop: no data source")
	case opt == nil:
		return nil, errors.New("train: NewLoop: no optimizer set (optim.NewSet)")
	case cfg.Accumulate < 0:
		return nil, fmt.Errorf("train: NewLoop: Accumulate is %d; want >= 1 (0 means 1)", cfg.Accumulate)
	case cfg.ClipNorm < 0 || math.IsNaN(cfg.ClipNorm):
		return nil, fmt.Errorf("train: NewLoop: ClipNorm is %v; want >= 0 (0 means no clipping)", cfg.ClipNorm)
	}
	cfg.Accumulate = cmp.Or(cfg.Accumulate, 1)
	owned := map[*tensor.Tensor]bool{}
	for _, p := range opt.Params() {
		owned[p] = true
	}
	for _, p := range model.Parameters() {
		if !owned[p] {
			return nil, fmt.Errorf("train: NewLoop: parameter %q of the model is in no group of the optimizer set", p.Name)
		}
	}
	l := &Loop[B]{dev: dev, model: model, data: data, opt: opt, cfg: cfg, g: autograd.New(dev)}
	l.g.SetAutocast(cfg.Autocast)
	if c := cfg.Comm; c != nil && c.Size() > 1 {
		if cfg.Accumulate%c.Size() != 0 {
			return nil, fmt.Errorf("train: NewLoop: %d micro-batches per update do not split over %d ranks (ranks x micro-batches per rank must equal Accumulate)", cfg.Accumulate, c.Size())
		}
		gc, err := newGradComm(dev, c, opt.Params())
		if err != nil {
			return nil, err
		}
		// Every rank starts from rank 0's weights and orthogonalises its
		// share of the Muon matrices (the results are all-gathered).
		if err := dist.BroadcastTensors(c, opt.Params(), 0); err != nil {
			return nil, fmt.Errorf("train: data-parallel: initial weights: %w", err)
		}
		if err := opt.SetSharding(c); err != nil {
			return nil, fmt.Errorf("train: data-parallel: %w", err)
		}
		l.comm = gc
		l.data = &shardedSource[B]{inner: data, rank: c.Rank(), ranks: c.Size()}
	}
	return l, nil
}

// Graph returns the loop's autograd graph (to record a validation pass on
// it, say; Reset it afterwards).
func (l *Loop[B]) Graph() *autograd.Graph { return l.g }

// Step returns the number of updates done.
func (l *Loop[B]) Step() int { return l.step }

// Optimizer returns the optimizer set.
func (l *Loop[B]) Optimizer() *optim.Set { return l.opt }

// Model returns the model.
func (l *Loop[B]) Model() Model[B] { return l.model }

// Update runs one optimizer update. A loss that is not finite stops it
// before the step, with an error; the parameters are then as they were.
func (l *Loop[B]) Update() (Update, error) {
	start := time.Now()
	u := Update{Step: l.step + 1}
	accum := l.cfg.Accumulate
	if l.comm != nil {
		accum /= l.comm.c.Size()
	}
	l.opt.ZeroGrad()
	var lossSum float64
	for range accum {
		batch, err := l.data.Next()
		if err != nil {
			return u, fmt.Errorf("train: update %d: data: %w", u.Step, err)
		}
		l.g.Reset()
		loss, err := l.model.Loss(l.g, batch)
		if err == nil {
			err = l.g.Err()
		}
		if err != nil {
			return u, fmt.Errorf("train: update %d: %w", u.Step, err)
		}
		if loss == nil || loss.Len() != 1 {
			return u, fmt.Errorf("train: update %d: the model's loss is not a scalar", u.Step)
		}
		scaled := l.g.Scale(loss, 1/float64(accum))
		if err := l.g.Err(); err != nil {
			return u, fmt.Errorf("train: update %d: %w", u.Step, err)
		}
		lossSum += loss.Item64()
		if err := l.g.Backward(scaled); err != nil {
			return u, fmt.Errorf("train: update %d: %w", u.Step, err)
		}
	}
	l.g.Reset()
	if l.comm != nil {
		commStart := time.Now()
		if err := l.comm.average(); err != nil {
			return u, fmt.Errorf("train: update %d: %w", u.Step, err)
		}
		// Every rank sees the same mean loss and the same averaged
		// gradients, so every rank takes the same decisions below.
		var err error
		if lossSum, err = l.comm.reduce(lossSum); err != nil {
			return u, fmt.Errorf("train: update %d: %w", u.Step, err)
		}
		lossSum /= float64(l.comm.c.Size())
		u.Comm = time.Since(commStart)
	}
	u.Loss = lossSum / float64(accum)
	if math.IsNaN(u.Loss) || math.IsInf(u.Loss, 0) {
		return u, fmt.Errorf("train: update %d: loss is %v; stopped before the step", u.Step, u.Loss)
	}
	clip := l.cfg.ClipNorm
	if clip == 0 {
		clip = math.Inf(1) // the norm is still computed and checked
	}
	norm, err := optim.ClipGradNorm(l.opt.Params(), clip)
	if err != nil {
		return u, fmt.Errorf("train: update %d: gradient norm: %w; stopped before the step", u.Step, err)
	}
	u.GradNorm = norm
	u.LRScale = 1
	if l.cfg.Schedule != nil {
		u.LRScale = l.cfg.Schedule.Scale(l.step)
	}
	if err := l.opt.Step(u.LRScale); err != nil {
		return u, fmt.Errorf("train: update %d: %w", u.Step, err)
	}
	if err := l.dev.Synchronize(); err != nil {
		return u, fmt.Errorf("train: update %d: device: %w", u.Step, err)
	}
	l.step++
	u.Duration = time.Since(start)
	return u, nil
}

// Run runs updates until Step reaches updates, calling hook (when not
// nil) after each; a hook error stops the run with it. A cancelled context
// stops it between updates with ctx.Err().
func (l *Loop[B]) Run(ctx context.Context, updates int, hook func(Update) error) error {
	for l.step < updates {
		if err := ctx.Err(); err != nil {
			return err
		}
		u, err := l.Update()
		if err != nil {
			return err
		}
		if hook != nil {
			if err := hook(u); err != nil {
				return err
			}
		}
	}
	return nil
}
