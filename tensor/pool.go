package tensor

import (
	"fmt"
	"sync"

	"github.com/hilbert-ml/hilbert/device"
)

// The pool keeps released buffers per device, dtype and length so that a
// training step that repeats the same shapes allocates nothing after its
// first run.

type poolKey struct {
	dev   device.Device
	dtype device.DType
	n     int
}

var pool struct {
	sync.Mutex
	free map[poolKey][]device.Buffer
	// bytes held in free lists, for diagnostics
	held int64
}

// NewPooled returns a tensor whose buffer comes from (and returns to, on
// Release) the device pool. Its contents are unspecified (not zeroed).
func NewPooled(dev device.Device, dtype device.DType, shape ...int) (*Tensor, error) {
	if err := checkShape("NewPooled", shape); err != nil {
		return nil, err
	}
	n := Shape(shape).Numel()
	key := poolKey{dev, dtype, n}
	pool.Lock()
	list := pool.free[key]
	var buf device.Buffer
	if len(list) > 0 {
		buf = list[len(list)-1]
		pool.free[key] = list[:len(list)-1]
		pool.held -= int64(n * dtype.Size())
	}
	pool.Unlock()
	if buf == nil {
		var err error
		if buf, err = dev.Alloc(dtype, n); err != nil {
			return nil, fmt.Errorf("tensor: pooled %v %v on %s: %w", dtype, Shape(shape), dev.Name(), err)
		}
	}
	t := newTensor(dev, buf, shape)
	t.pooled = true
	return t, nil
}

// Release returns a pooled tensor's buffer to the pool; the tensor (and
// every view of it) must not be used afterwards, and panics saying so if
// it is. Release of a tensor that is not pooled does nothing.
func (t *Tensor) Release() {
	if t == nil || !t.pooled {
		return
	}
	t.pooled = false
	key := poolKey{t.dev, t.buf.DType(), t.buf.Len()}
	pool.Lock()
	if pool.free == nil {
		pool.free = map[poolKey][]device.Buffer{}
	}
	pool.free[key] = append(pool.free[key], t.buf)
	pool.held += int64(key.n * key.dtype.Size())
	pool.Unlock()
	t.buf = nil
	t.root().released = true
}

// Free gives a pooled tensor's buffer back to its device instead of the
// pool, for a buffer whose length will not be asked for again (a growing
// KV cache's: the pool keeps buffers by length, so each such buffer would
// stay in it unused). The tensor (and every view of it) must not be used
// afterwards. Free of a tensor that is not pooled does nothing, as
// Release.
func (t *Tensor) Free() {
	if t == nil || !t.pooled {
		return
	}
	t.pooled = false
	t.dev.Free(t.buf)
	t.buf = nil
	t.root().released = true
}

// Pooled reports whether the tensor's buffer belongs to the pool.
func (t *Tensor) Pooled() bool { return t.pooled }

// PoolBytes returns how many bytes released buffers hold in the pool.
func PoolBytes() int64 {
	pool.Lock()
	defer pool.Unlock()
	return pool.held
}

// DrainPool frees every pooled buffer back to its device.
func DrainPool() {
	pool.Lock()
	defer pool.Unlock()
	for k, list := range pool.free {
		for _, b := range list {
			k.dev.Free(b)
		}
	}
	pool.free = nil
	pool.held = 0
}

// TakeOwnership moves the pool ownership of from's buffer to t, a view of
// the same buffer (as Reshape makes): afterwards t.Release returns the
// buffer to the pool and from.Release does nothing. It reports whether it
// moved anything (false when from is not pooled or t does not share its
// buffer).
func (t *Tensor) TakeOwnership(from *Tensor) bool {
	if t == nil || from == nil || t == from || !from.pooled || t.buf == nil || t.buf != from.buf {
		return false
	}
	t.pooled, from.pooled = true, false
	return true
}

// SwapStorage exchanges the buffers of a and b, two tensors that each hold
// a whole live buffer (no views), of one device, dtype and length, and
// reports whether it did; each keeps its shape, name and pool ownership.
// Autograd uses it to hand a parameter the gradient a backward rule wrote
// into pooled scratch, instead of copying it: the scratch tensor then
// holds the parameter's old buffer and goes back to the pool. Views taken
// of either tensor before do not follow: they keep the old buffer.
func SwapStorage(a, b *Tensor) bool {
	if a == nil || b == nil || a == b || a.base != nil || b.base != nil || a.Released() || b.Released() ||
		a.dev != b.dev || a.buf.DType() != b.buf.DType() || a.buf.Len() != b.buf.Len() {
		return false
	}
	a.buf, b.buf = b.buf, a.buf
	a.version++
	b.version++
	return true
}
