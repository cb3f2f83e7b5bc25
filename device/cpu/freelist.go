package cpu

// freeList keeps idle values (scratch buffers) for reuse across calls.
// Unlike a sync.Pool it is not emptied by the garbage collector, and any
// goroutine gets any idle value: a sync.Pool's per-P private slot is
// invisible to goroutines on other Ps, so under load a warm step would
// still allocate fresh buffers now and then. It holds at most its
// capacity; values put beyond that are dropped.
type freeList[T any] struct{ idle chan *T }

// newFreeList returns a free list that keeps up to n idle values.
func newFreeList[T any](n int) freeList[T] { return freeList[T]{idle: make(chan *T, n)} }

// get returns an idle value, or a new zero one when none is idle.
func (f freeList[T]) get() *T {
	select {
	case v := <-f.idle:
		return v
	default:
		return new(T)
	}
}

// put returns v to the list.
func (f freeList[T]) put(v *T) {
	select {
	case f.idle <- v:
	default:
	}
}
