package cpu

import (
	"runtime"
	"sync/atomic"
	"time"
)

// Helpers: goroutines that work on other callers' GEMMs, so that a
// parallel GEMM starts no goroutine and allocates nothing. A caller with
// work for several workers posts its job on nativeBoard (one job at a time;
// a caller that finds the board taken works alone), wakes sleeping helpers
// and starts new ones up to the workers it wants, and works on the job
// itself. Helpers join a posted job while it has slots left, and between
// jobs poll the board for helperSpin (yielding the processor) before they
// sleep, so that back-to-back GEMMs do not wait for a wake-up. The spin is
// short: a polling helper keeps its processor, and goroutines queued on
// another processor (a parallelFor's) are not stolen by it meanwhile.
var (
	nativeBoard    atomic.Pointer[nativeJob]
	nativeHelpers  atomic.Int32 // helpers started
	nativeSleepers atomic.Int32 // helpers asleep (or about to be)
	nativeWake     = make(chan struct{}, nativeMaxHelpers)
)

const (
	nativeMaxHelpers = 256
	helperSpin       = 50 * time.Microsecond
)

// callHelpers wakes or starts up to n helpers for the job on the board.
func callHelpers(n int) {
	for s := min(int(nativeSleepers.Load()), n); s > 0; s-- {
		select {
		case nativeWake <- struct{}{}:
		default:
		}
	}
	for have := int(nativeHelpers.Load()); have < n; have = int(nativeHelpers.Load()) {
		if have >= nativeMaxHelpers || !nativeHelpers.CompareAndSwap(int32(have), int32(have+1)) {
			break
		}
		go nativeHelper()
	}
}

// nativeHelper works on posted jobs forever.
func nativeHelper() {
	for {
		deadline := time.Now().Add(helperSpin)
		for spins := 0; ; spins++ {
			if j := nativeBoard.Load(); j != nil && j.join() {
				j.work()
				j.leave()
				deadline, spins = time.Now().Add(helperSpin), 0
				continue
			}
			if spins%32 == 31 && time.Now().After(deadline) {
				break
			}
			runtime.Gosched()
		}
		nativeSleepers.Add(1)
		// A job posted after the last look but before the caller counted
		// the sleepers would find none: look once more.
		if j := nativeBoard.Load(); j != nil && j.join() {
			nativeSleepers.Add(-1)
			j.work()
			j.leave()
			continue
		}
		<-nativeWake
		nativeSleepers.Add(-1)
	}
}

// dispatch works on j's tasks (its grid and operands set up) with up to
// workers workers, the caller one of them; then it puts j back for
// reuse.
func (j *nativeJob) dispatch(workers int) {
	workers = min(workers, j.ms*j.nb)
	if workers > 1 {
		j.state.Store(int64(workers-1) * slotUnit)
		if nativeBoard.CompareAndSwap(nil, j) {
			callHelpers(workers - 1)
			j.work()
			nativeBoard.CompareAndSwap(j, nil)
			j.close()
		} else {
			// Another GEMM has the helpers. A helper that still holds this
			// job from its last use may join: close waits for it.
			j.work()
			j.close()
		}
	} else {
		j.work()
	}
	j.state.Store(jobClosed)
	j.a, j.b, j.c, j.a16, j.b16, j.kn, j.kb, j.gk = nil, nil, nil, nil, nil, nil, nil, nil
	select {
	case nativeJobs <- j:
	default:
	}
}
