package optim

import (
	"fmt"
	"math"
)

// Cosine is the paper's learning-rate schedule: a linear warmup over the
// first Warmup updates, then a cosine from 1 down to Final at the last
// update. Step s is 0-based:
//
//	s < W:  scale = s / W            (the first update runs at LR 0)
//	else:   progress = min(1, (s - W) / (T - W - 1))
//	        scale = Final + (1 - Final) * 0.5 * (1 + cos(pi * progress))
//	        (Final when T - W == 1)
//
// The same multiplier applies to every parameter group.
type Cosine struct {
	// Total is T, the number of updates.
	Total int
	// Warmup is W, the number of warmup updates (0 <= W < T).
	Warmup int
	// Final is the multiplier at the last update (0.1 in the paper).
	Final float64
}

// NewCosine returns the paper's schedule for T updates with W warmup
// updates, decaying to 10% of the peak.
func NewCosine(total, warmup int) (Cosine, error) {
	c := Cosine{Total: total, Warmup: warmup, Final: 0.1}
	return c, c.Validate()
}

// Validate reports a schedule whose fields are out of range.
func (c Cosine) Validate() error {
	if c.Total < 1 || c.Warmup < 0 || c.Warmup >= c.Total {
		return fmt.Errorf("optim: schedule: want 0 <= warmup < total, have warmup %d, total %d", c.Warmup, c.Total)
	}
	if !(c.Final >= 0 && c.Final <= 1) {
		return fmt.Errorf("optim: schedule: final multiplier %v outside [0, 1]", c.Final)
	}
	return nil
}

// Scale returns the learning-rate multiplier of 0-based update step.
// Steps past the end keep the final value.
func (c Cosine) Scale(step int) float64 {
	if step < c.Warmup {
		return float64(step) / float64(c.Warmup)
	}
	span := c.Total - c.Warmup - 1
	if span <= 0 {
		return c.Final
	}
	progress := min(1, float64(step-c.Warmup)/float64(span))
	return c.Final + (1-c.Final)*0.5*(1+math.Cos(math.Pi*progress))
}

// PaperHorizon returns the paper's number of updates T and warmup W for a
// model of params parameters trained on 20 tokens per parameter with
// tokensPerUpdate tokens per update (524,288 in the paper):
// T = params*20 / tokensPerUpdate (floor), W = floor(0.1 T).
func PaperHorizon(params, tokensPerUpdate int64) (total, warmup int) {
	t := params * 20 / tokensPerUpdate
	return int(t), int(t / 10)
}
