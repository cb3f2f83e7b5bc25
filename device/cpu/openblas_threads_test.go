package cpu

import (
	"runtime"
	"testing"
)

// TestOpenBLASThreadsOnEveryOSThread checks that a GEMM on OpenBLAS runs
// with the framework's thread count whichever OS thread calls it. The
// OpenMP build takes the count from the calling thread's OpenMP setting,
// which openblas_set_num_threads changes only on the thread it runs on:
// without setting it again per call, a goroutine on a fresh OS thread ran
// on every core under -threads 1.
func TestOpenBLASThreadsOnEveryOSThread(t *testing.T) {
	lib, err := loadBLAS()
	if err != nil {
		t.Skipf("OpenBLAS not loaded: %v", err)
	}
	if lib.getThreads == nil || lib.setThreads == nil {
		t.Skip("this OpenBLAS does not export openblas_get_num_threads and openblas_set_num_threads")
	}
	if runtime.NumCPU() < 2 {
		t.Skip("one CPU: every thread count is 1")
	}
	defer SetThreads(Threads())
	SetThreads(1)
	const n = 256
	a, b, c := make([]float32, n*n), make([]float32, n*n), make([]float32, n*n)
	for i := range a {
		a[i], b[i] = float32(i%7), float32(i%5)
	}
	for i := range 4 {
		got := make(chan int32)
		go func() {
			// Never unlocked: the goroutine's OS thread ends with it, so
			// each round runs on a thread that OpenBLAS has not seen.
			runtime.LockOSThread()
			blasMu.Lock()
			lib.gemm(false, false, n, n, n, 1, a, n, b, n, 0, c, n)
			got <- lib.getThreads()
			blasMu.Unlock()
		}()
		if th := <-got; th != 1 {
			t.Fatalf("round %d: OpenBLAS ran a GEMM on a new OS thread with %d threads under SetThreads(1)", i, th)
		}
	}
}
