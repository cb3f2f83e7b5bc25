package oracle

import (
	"math"
	"sync"
	"time"
)

// Restart criteria (PDLP's, on the certified gap): a restart when the gap
// fell to sufficientRestart of the gap at the last restart, or to
// necessaryRestart of it and rose since the previous check, or when the
// restart period reached artificialRestart of all iterations (0.36 in
// PDLP; 0.2 measured better here, on head gradients with many tiny rows).
const (
	sufficientRestart = 0.2
	necessaryRestart  = 0.8
	artificialRestart = 0.2
)

// solver is one PDHG solve on g (v x m, largest row norm 1).
type solver struct {
	v, m, p int
	g       []float64
	x, xn   []float64 // potentials: current and next
	xbar    []float64 // 2 xn - x
	kt      []float64 // K^T (flow of the active pairs)
	y       []float64 // p x m flow; a pair's row is meaningful only when act
	act     []bool
	opt     Options
	threads int
	blocks  [][2]int
	accs    [][]float64 // per-worker K^T accumulators
	counts  []int

	omega          float64
	iter, restarts int
	active         int
	sample         []int     // pairs whose flow the primal-weight update tracks
	ys, xs         []float64 // flow of the sample and potentials at the last restart
	margin         float64   // certificate: pairs within 1 - margin are checked after a repair
	ref, delta     []float64 // pass: xbar at the epoch start, and ||xbar_i - ref_i||
	slack          []float64 // pass: per inactive pair, see pass
	newEpoch       bool
	checks         []int
	weight         []float64 // repair: ||g_i||
}

func newSolver(g []float64, v, m int, opt Options) *solver {
	s := &solver{v: v, m: m, p: pairs(v), g: g, opt: opt}
	s.threads = max(1, min(opt.Threads, v))
	s.blocks = rowBlocks(v, 8*s.threads)
	s.x = make([]float64, v*m)
	s.xn = make([]float64, v*m)
	s.xbar = make([]float64, v*m)
	s.kt = make([]float64, v*m)
	s.y = make([]float64, s.p*m)
	s.act = make([]bool, s.p)
	s.accs = make([][]float64, s.threads)
	for w := range s.accs {
		s.accs[w] = make([]float64, v*m)
	}
	s.counts = make([]int, s.threads)
	s.checks = make([]int, s.threads)
	s.ref = make([]float64, v*m)
	s.delta = make([]float64, v)
	s.slack = make([]float64, s.p)
	s.newEpoch = true
	// The sample: every pair when there are few, else a fixed
	// pseudo-random subset.
	const maxSample = 16384
	if s.p <= maxSample {
		s.sample = make([]int, s.p)
		for i := range s.sample {
			s.sample[i] = i
		}
	} else {
		s.sample = make([]int, maxSample)
		state := uint64(0x9e3779b97f4a7c15)
		for i := range s.sample {
			state = state*6364136223846793005 + 1442695040888963407
			s.sample[i] = int((state >> 11) % uint64(s.p))
		}
	}
	s.ys = make([]float64, len(s.sample)*m)
	s.xs = make([]float64, v*m)
	return s
}

// warmStart sets RowNorm's certificate pair: phi_i = g_i / (2 ||g_i||)
// (centred) and the uniform flow y_ij = (g_i - g_j) / V.
func (s *solver) warmStart() {
	v, m := s.v, s.m
	for i := 0; i < v; i++ {
		gi := s.g[i*m : (i+1)*m]
		if n := norm(gi); n > 0 {
			for c, e := range gi {
				s.x[i*m+c] = e / (2 * n)
			}
		}
	}
	centreInPlace(s.x, v, m)
	inv := 1 / float64(v)
	forBlocks(s.blocks, s.threads, func(_, lo, hi int) {
		for i := lo; i < hi; i++ {
			gi := s.g[i*m : (i+1)*m]
			p := pairIndex(i, i+1, v)
			for j := i + 1; j < v; j++ {
				setScaledDiff(s.y[p*m:(p+1)*m], gi, s.g[j*m:(j+1)*m], inv)
				s.act[p] = true
				p++
			}
		}
	})
	s.kt = s.divergence()
}

// run iterates until the certified gap reaches the tolerance, the
// iteration or time limit; it returns the best feasible potential (v x m,
// largest pair distance <= 1). The flow is left in s.y / s.act.
func (s *solver) run(start time.Time) []float64 {
	opt := s.opt
	s.warmStart()
	s.margin = 0.05
	lo, up, best := s.certificate()
	bestLo := lo
	errRestart, prevErr, periodStart := relGap(lo, up), math.Inf(1), 0
	s.snapshot()
	if s.omega = opt.Omega; s.omega <= 0 {
		s.omega = 6 * norm(s.g) / float64(s.v)
	}
	omega0 := s.omega
	eta := 0.99 / math.Sqrt(float64(s.v))
	if relGap(bestLo, up) <= opt.Tol {
		s.report(bestLo, up, false, start)
		return best
	}
	for s.iter < opt.MaxIter {
		tau, sigma := eta/s.omega, eta*s.omega
		for i := range s.x {
			xn := s.x[i] + tau*(s.g[i]-s.kt[i])
			s.xbar[i] = 2*xn - s.x[i]
			s.xn[i] = xn
		}
		s.pass(sigma)
		s.x, s.xn = s.xn, s.x
		s.iter++
		timeUp := opt.TimeLimit > 0 && time.Since(start) >= opt.TimeLimit
		if s.iter%opt.CheckEvery != 0 && s.iter < opt.MaxIter && !timeUp {
			continue
		}
		var phi []float64
		lo, up, phi = s.certificate()
		if lo > bestLo {
			bestLo, best = lo, phi
		}
		err := max(0, relGap(lo, up))
		restart := err <= sufficientRestart*errRestart || (err <= necessaryRestart*errRestart && err > prevErr) ||
			float64(s.iter-periodStart) >= artificialRestart*float64(s.iter)
		if restart {
			dx, dy := s.moved()
			if dx > 0 && dy > 0 {
				s.omega = math.Exp(0.5*math.Log(dy/dx) + 0.5*math.Log(s.omega))
				s.omega = min(max(s.omega, omega0*1e-4), omega0*1e4)
			}
			s.snapshot()
			s.restarts++
			errRestart, prevErr, periodStart = err, math.Inf(1), s.iter
		} else {
			prevErr = err
		}
		s.report(bestLo, up, restart, start)
		if relGap(bestLo, up) <= opt.Tol || timeUp {
			break
		}
	}
	return best
}

func (s *solver) report(lo, up float64, restart bool, start time.Time) {
	if s.opt.Progress == nil {
		return
	}
	s.opt.Progress(Progress{Iter: s.iter, Lower: lo, Upper: up, Gap: relGap(lo, up), Omega: s.omega,
		Active: s.active, Restart: restart, Elapsed: time.Since(start)})
}

func relGap(lo, up float64) float64 {
	if up <= 0 {
		return 0
	}
	return (up - lo) / up
}

// snapshot records the potentials and the sampled flow at a restart.
func (s *solver) snapshot() {
	copy(s.xs, s.x)
	m := s.m
	for k, p := range s.sample {
		dst := s.ys[k*m : (k+1)*m]
		if s.act[p] {
			copy(dst, s.y[p*m:(p+1)*m])
		} else {
			clear(dst)
		}
	}
}

// moved returns ||x - xs|| and the sampled estimate of ||Y - Ys||.
func (s *solver) moved() (dx, dy float64) {
	for i, e := range s.x {
		d := e - s.xs[i]
		dx += d * d
	}
	m := s.m
	for k, p := range s.sample {
		old := s.ys[k*m : (k+1)*m]
		if s.act[p] {
			y := s.y[p*m : (p+1)*m]
			for c := range old {
				d := y[c] - old[c]
				dy += d * d
			}
		} else {
			dy += dot(old, old)
		}
	}
	dy *= float64(s.p) / float64(len(s.sample))
	return math.Sqrt(dx), math.Sqrt(dy)
}

// pass is the dual update Y = shrink_sigma(Y + sigma K xbar) over every
// pair, with K^T Y accumulated into s.kt. A pair with no flow and
// ||xbar_i - xbar_j|| <= 1 keeps none, and its flow row is not touched.
//
// Whether ||xbar_i - xbar_j|| <= 1 still holds is known without computing
// it while the rows have moved little: each inactive pair keeps a slack
// s_ij such that the pair is within distance 1 while delta_i + delta_j <
// s_ij, delta_i = ||xbar_i - ref_i|| the distance of row i from its
// position at the start of the epoch (ref). An exact check at distance
// d_ij sets s_ij = 1 - d_ij - delta_i - delta_j (the triangle inequality
// through ref). A new epoch starts when too many pairs needed exact checks.
func (s *solver) pass(sigma float64) {
	v, m := s.v, s.m
	fresh := s.newEpoch
	if fresh {
		copy(s.ref, s.xbar)
		clear(s.delta)
		for p := range s.slack {
			s.slack[p] = -1
		}
		s.newEpoch = false
	} else {
		for i := 0; i < v; i++ {
			s.delta[i] = math.Sqrt(sqDiff(s.xbar[i*m:(i+1)*m], s.ref[i*m:(i+1)*m]))
		}
	}
	forBlocks(s.blocks, s.threads, func(w, lo, hi int) {
		acc := s.accs[w]
		cnt, checks := 0, 0
		for i := lo; i < hi; i++ {
			a := s.xbar[i*m : (i+1)*m]
			ai := acc[i*m : (i+1)*m]
			di := s.delta[i]
			p := pairIndex(i, i+1, v)
			for j := i + 1; j < v; j++ {
				if !s.act[p] {
					if di+s.delta[j] < s.slack[p] {
						p++
						continue
					}
					checks++
					b := s.xbar[j*m : (j+1)*m]
					n2 := sqDiff(a, b)
					if n2 > 1 {
						// z = sigma (a - b), ||z|| = sigma sqrt(n2) > sigma.
						setScaledDiffAccum(s.y[p*m:(p+1)*m], a, b, sigma*(1-1/math.Sqrt(n2)), ai, acc[j*m:(j+1)*m])
						s.act[p] = true
						cnt++
					} else {
						s.slack[p] = 1 - math.Sqrt(n2) - di - s.delta[j]
					}
				} else {
					y := s.y[p*m : (p+1)*m]
					n2 := addScaledDiff(y, a, s.xbar[j*m:(j+1)*m], sigma)
					if n2 > sigma*sigma {
						scaleAccum(y, 1-sigma/math.Sqrt(n2), ai, acc[j*m:(j+1)*m])
						cnt++
					} else {
						s.act[p] = false
						s.slack[p] = -1 // checked exactly next time
					}
				}
				p++
			}
		}
		s.counts[w] += cnt
		s.checks[w] += checks
	})
	var checks int
	for w := range s.checks {
		checks += s.checks[w]
		s.checks[w] = 0
	}
	// Exact checks cost a pair's d multiply-adds; an epoch restart costs
	// one check of every inactive pair once.
	if !fresh && checks > s.p/16 {
		s.newEpoch = true
	}
	s.gather()
}

// gather sums the workers' accumulators into s.kt and zeroes them.
func (s *solver) gather() {
	v, m := s.v, s.m
	s.active = 0
	for w := range s.counts {
		s.active += s.counts[w]
		s.counts[w] = 0
	}
	rows := rowBlocksEven(v, s.threads)
	var wg sync.WaitGroup
	for _, r := range rows {
		wg.Add(1)
		go func(lo, hi int) {
			defer wg.Done()
			kt := s.kt[lo*m : hi*m]
			clear(kt)
			for _, acc := range s.accs {
				a := acc[lo*m : hi*m]
				for k, e := range a {
					kt[k] += e
				}
				clear(a)
			}
		}(r[0], r[1])
	}
	wg.Wait()
}

// divergence returns K^T Y of the active pairs, summed afresh (v x m).
func (s *solver) divergence() []float64 {
	v, m := s.v, s.m
	forBlocks(s.blocks, s.threads, func(w, lo, hi int) {
		acc := s.accs[w]
		for i := lo; i < hi; i++ {
			ai := acc[i*m : (i+1)*m]
			p := pairIndex(i, i+1, v)
			for j := i + 1; j < v; j++ {
				if s.act[p] {
					scaleAccum(s.y[p*m:(p+1)*m], 1, ai, acc[j*m:(j+1)*m])
				}
				p++
			}
		}
	})
	kt, active := s.kt, s.active
	s.kt = make([]float64, v*m)
	s.gather()
	out := s.kt
	s.kt, s.active = kt, active
	return out
}

// zeroInactive writes zeros into the flow rows of inactive pairs.
func (s *solver) zeroInactive() {
	m := s.m
	for p, a := range s.act {
		if !a {
			clear(s.y[p*m : (p+1)*m])
		}
	}
}
