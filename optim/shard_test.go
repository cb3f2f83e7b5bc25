package optim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/cpu"
	"github.com/hilbert-ml/hilbert/tensor"
)

// localGroup is a group of ranks in one process: each rank is a goroutine
// and AllGather meets the others through a mutex and a condition variable.
// The sends of consecutive rounds alternate between two slots: a rank can
// enter round k+1 before a slower one has read round k, never k+2.
type localGroup struct {
	size  int
	mu    sync.Mutex
	cond  *sync.Cond
	sends [2][][]float32
	round int // completed all-gathers
	n     int // ranks arrived in this round
	calls int
}

func newLocalGroup(size int) *localGroup {
	g := &localGroup{size: size, sends: [2][][]float32{make([][]float32, size), make([][]float32, size)}}
	g.cond = sync.NewCond(&g.mu)
	return g
}

// localRank is rank r of a localGroup; it implements Gatherer.
type localRank struct {
	g *localGroup
	r int
}

func (l localRank) Rank() int { return l.r }
func (l localRank) Size() int { return l.g.size }
func (l localRank) AllGather(send, recv device.Buffer) error {
	g := l.g
	if recv.Len() != g.size*send.Len() {
		return fmt.Errorf("recv %d, send %d", recv.Len(), send.Len())
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	round := g.round
	g.sends[round%2][l.r] = slices.Clone(cpu.Float32s(send))
	g.n++
	if g.n == g.size {
		g.n, g.round = 0, g.round+1
		g.calls++
		g.cond.Broadcast()
	}
	for g.round == round {
		g.cond.Wait()
	}
	x := cpu.Float32s(recv)
	for q, s := range g.sends[round%2] {
		if len(s) != send.Len() {
			return fmt.Errorf("rank %d sent %d floats, rank %d %d", q, len(s), l.r, send.Len())
		}
		copy(x[q*len(s):], s)
	}
	return nil
}

// blockShapes are the Muon matrices of a small transformer: per layer q, k,
// v, o (d x d), gate and up (4d x d) and down (d x 4d).
func blockShapes(layers, d int) [][2]int {
	var s [][2]int
	for range layers {
		s = append(s, [2]int{d, d}, [2]int{d, d}, [2]int{d, d}, [2]int{d, d}, [2]int{4 * d, d}, [2]int{4 * d, d}, [2]int{d, 4 * d})
	}
	return s
}

// muonReplica builds Muon over fresh copies of the same matrices.
func muonReplica(t testing.TB, shapes [][2]int, cfg MuonConfig) (*Muon, []*tensor.Tensor) {
	t.Helper()
	rng := rand.New(rand.NewPCG(5, 6))
	var ps []*tensor.Tensor
	for i, sh := range shapes {
		ps = append(ps, param(t, fmt.Sprintf("blocks.%d.w", i), randn(rng, sh[0]*sh[1], 0.02), sh[0], sh[1]))
	}
	o, err := NewMuon(cfg, ps)
	if err != nil {
		t.Fatal(err)
	}
	return o, ps
}

// muonGrads sets the gradients of step k (the same on every replica).
func muonGrads(t testing.TB, ps []*tensor.Tensor, k int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(7, uint64(k)))
	for _, p := range ps {
		setGrad(t, p, randn(rng, p.Len(), 1))
	}
}

// TestMuonSharded steps Muon unsharded and sharded over 1, 2 and 3 ranks of
// one process (a parameter without a gradient included): every rank's
// parameters after three steps are bit-identical to the unsharded ones,
// since each matrix is orthogonalised by one rank with the same code; each
// rank owns a share of the matrices, and one all-gather runs per step.
func TestMuonSharded(t *testing.T) {
	shapes := append(blockShapes(2, 16), [2]int{3, 5}, [2]int{7, 2})
	cfg := PaperMuon(0.02)
	cfg.KeepStep = true
	const steps = 3
	ref, refPs := muonReplica(t, shapes, cfg)
	for k := range steps {
		muonGrads(t, refPs, k)
		refPs[len(refPs)-1].SetGrad(nil) // no gradient: skipped
		if err := ref.Step(1); err != nil {
			t.Fatal(err)
		}
	}
	for _, size := range []int{1, 2, 3} {
		t.Run(fmt.Sprintf("%d ranks", size), func(t *testing.T) {
			group := newLocalGroup(size)
			errs := make([]error, size)
			params := make([][]*tensor.Tensor, size)
			owned := make([]int, size)
			var wg sync.WaitGroup
			for r := range size {
				o, ps := muonReplica(t, shapes, cfg)
				params[r] = ps
				if err := o.SetSharding(localRank{group, r}); err != nil {
					t.Fatal(err)
				}
				if size > 1 {
					for _, q := range o.shard.owner {
						if q == r {
							owned[r]++
						}
					}
				} else if o.shard != nil {
					t.Fatalf("one rank: sharded, expected unsharded steps")
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					for k := range steps {
						muonGrads(t, ps, k)
						ps[len(ps)-1].SetGrad(nil)
						if err := o.Step(1); err != nil {
							errs[r] = err
							return
						}
					}
				}()
			}
			wg.Wait()
			for r, err := range errs {
				if err != nil {
					t.Fatalf("rank %d: %v", r, err)
				}
			}
			if size > 1 {
				if group.calls != steps {
					t.Errorf("%d all-gathers in %d steps, expected one per step", group.calls, steps)
				}
				for r, n := range owned {
					if n == 0 || n == len(shapes) {
						t.Errorf("rank %d owns %d of %d matrices", r, n, len(shapes))
					}
				}
			}
			for r := range size {
				for i, p := range params[r] {
					if !slices.Equal(p.Float32s(), refPs[i].Float32s()) {
						a, b := p.Float32s(), refPs[i].Float32s()
						md := 0.0
						for j := range a {
							md = math.Max(md, math.Abs(float64(a[j]-b[j])))
						}
						t.Errorf("rank %d: %s differs from the unsharded step by %g", r, p.Name, md)
					}
				}
			}
		})
	}
}

// TestMuonShardedFailure makes one rank's direction non-finite: every rank's
// step fails, the owner's naming the error, the other's naming the owner.
func TestMuonShardedFailure(t *testing.T) {
	shapes := blockShapes(1, 8)
	group := newLocalGroup(2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for r := range 2 {
		o, ps := muonReplica(t, shapes, PaperMuon(0.02))
		if err := o.SetSharding(localRank{group, r}); err != nil {
			t.Fatal(err)
		}
		muonGrads(t, ps, 0)
		g := ps[0].Grad().Float32s()
		g[3] = float32(math.Inf(1))
		ps[0].Grad().SetFloat32(g)
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = o.Step(1)
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "blocks.0.w") || !strings.Contains(err.Error(), "on rank") {
			t.Errorf("rank %d: error %v, expected one naming blocks.0.w and its rank", r, err)
		}
	}
}

// TestSetSharding steps the paper's recipe (Muon blocks, AdamW embedding,
// RowNorm head) on 2 in-process ranks with Set.SetSharding: every parameter
// matches the unsharded set bit for bit, and only Muon is sharded.
func TestSetSharding(t *testing.T) {
	build := func() (*Set, []*tensor.Tensor) {
		ps := toyModel(t, rand.New(rand.NewPCG(21, 22)), 11, 8)
		set, err := NewSet(PaperRecipe(PaperOptions{Head: HeadRowNorm}), ps)
		if err != nil {
			t.Fatal(err)
		}
		return set, ps
	}
	ref, refPs := build()
	for range 2 {
		if err := ref.Step(1); err != nil {
			t.Fatal(err)
		}
	}
	group := newLocalGroup(2)
	errs := make([]error, 2)
	params := make([][]*tensor.Tensor, 2)
	var wg sync.WaitGroup
	for r := range 2 {
		set, ps := build()
		params[r] = ps
		if err := set.SetSharding(localRank{group, r}); err != nil {
			t.Fatal(err)
		}
		if set.Group("blocks").(*Muon).shard == nil {
			t.Fatal("SetSharding left the Muon group unsharded")
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 2 {
				if err := set.Step(1); err != nil {
					errs[r] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	for r := range 2 {
		if errs[r] != nil {
			t.Fatalf("rank %d: %v", r, errs[r])
		}
		for i, p := range params[r] {
			if !slices.Equal(p.Float32s(), refPs[i].Float32s()) {
				t.Errorf("rank %d: %s differs from the unsharded set", r, p.Name)
			}
		}
	}
	if group.calls != 2 {
		t.Errorf("%d all-gathers in 2 steps, expected 2", group.calls)
	}
}
