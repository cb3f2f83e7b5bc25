package nn

import (
	"fmt"
	"slices"

	"github.com/hilbert-ml/hilbert/autograd"
	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/tensor"
)

// KVCache holds the keys and values of every attention layer of a model
// for the positions generated so far, so that each new token costs one
// position of projections and MLP rather than the whole prefix. It is
// used with graphs whose recording is off. Its tensors outlive graph
// Resets; Release frees them.
//
// Any attention can use it, not only SelfAttention: given the new
// positions x of layer l, an attention reads pos := cache.Len(l) (where x
// starts), projects its keys and values k, v [B, T, H, D] (rotated for
// positions pos onwards, if it rotates), and attends with the keys and
// values cache.Append(g, l, k, v) returns, query i at position pos+i (so
// a causal mask lets it see keys 0..pos+i). models.Generate then runs the
// model one new token at a time (see the user-attention example in
// models).
//
// Each layer keeps its keys and values in buffers [B, room, H, D] with
// room for more positions than it holds (twice as many as it needed when
// it last grew), so that a new position costs a write of that position
// rather than a copy of the whole cache. SelfAttention attends over each
// batch row's part of the buffers where it is.
type KVCache struct {
	layers []kvLayer
}

// kvLayer is one layer of a KVCache.
type kvLayer struct {
	k, v *tensor.Tensor // [B, room, H, D], pooled (Free gives them back), or nil
	n    int            // positions held
	// joined holds Append's copies of the held keys and values [B, n, H,
	// D] when B > 1 (where the filled part of a buffer is not one run of
	// memory), freed by the next Append or Release.
	joined [2]*tensor.Tensor
}

// NewKVCache returns an empty cache for layers attention layers.
func NewKVCache(layers int) *KVCache {
	return &KVCache{layers: make([]kvLayer, layers)}
}

// Layers returns the number of attention layers the cache holds.
func (c *KVCache) Layers() int { return len(c.layers) }

// Len returns the number of cached positions of layer (0 for a layer out
// of range).
func (c *KVCache) Len(layer int) int {
	if layer < 0 || layer >= len(c.layers) {
		return 0
	}
	return c.layers[layer].n
}

// check reports why layer's cache cannot be used in g.
func (c *KVCache) check(g *autograd.Graph, layer int) error {
	if layer < 0 || layer >= len(c.layers) {
		return fmt.Errorf("layer %d of a KV cache of %d layers", layer, len(c.layers))
	}
	if !g.NoGrad() {
		return fmt.Errorf("a KV cache needs a graph with recording off (SetNoGrad(true))")
	}
	return nil
}

// Append joins k, v [B, T, H, D] (the keys and values of the positions
// Len(layer) onwards) to layer's cache and returns all cached keys and
// values, [B, Len(layer), H, D] after the call, valid until the next
// Append to the layer, the graph's Reset or Release, whichever comes
// first. A layer out of range, a graph that records, or keys and values
// whose shapes do not join fail the graph (g.Err names the problem) and
// return nils.
func (c *KVCache) Append(g *autograd.Graph, layer int, k, v *tensor.Tensor) (*tensor.Tensor, *tensor.Tensor) {
	if !c.write(g, layer, k, v) {
		return nil, nil
	}
	l := &c.layers[layer]
	b := l.k.Dim(0)
	if b == 1 {
		return c.row(layer, 0)
	}
	// The rows' filled parts are apart in the buffers: join them in a
	// copy, given back to the device (not the pool, which would keep a
	// buffer of each length) by the next Append or Release.
	for i, buf := range []*tensor.Tensor{l.k, l.v} {
		shape := buf.Shape()
		shape[1] = l.n
		t, err := tensor.NewPooled(g.Device(), buf.DType(), shape...)
		if err != nil {
			g.Fail(fmt.Errorf("nn: KVCache.Append: %w", err))
			return nil, nil
		}
		dims := device.DimsOf(shape...)
		g.Device().CopyStrided(dims, device.Contiguous(t.Buffer(), dims), device.Contiguous(buf.Buffer(), device.DimsOf(buf.Shape()...)))
		l.joined[i] = t
	}
	return l.joined[0], l.joined[1]
}

// write appends k, v [B, T, H, D] to layer's buffers, growing them when
// they are full, and reports whether it did; on failure it fails g.
func (c *KVCache) write(g *autograd.Graph, layer int, k, v *tensor.Tensor) bool {
	fail := func(err error) bool {
		g.Fail(fmt.Errorf("nn: KVCache.Append: %w", err))
		return false
	}
	if g.Err() != nil {
		return false
	}
	if err := c.check(g, layer); err != nil {
		return fail(err)
	}
	if k == nil || v == nil || k.Rank() != 4 || !slices.Equal(k.Shape(), v.Shape()) || k.DType() != v.DType() {
		return fail(fmt.Errorf("keys %v and values %v, want equal shapes [B, T, H, D] of one dtype", tensor.ShapeOf(k), tensor.ShapeOf(v)))
	}
	l := &c.layers[layer]
	l.freeJoined()
	if l.k != nil {
		held := l.k.Shape()
		if k.Dim(0) != held[0] || k.Dim(2) != held[2] || k.Dim(3) != held[3] || k.DType() != l.k.DType() {
			return fail(fmt.Errorf("keys %v %v do not join layer %d's cached %v [%d, %d, %d, %d]", k.DType(), k.Shape(), layer, l.k.DType(), held[0], l.n, held[2], held[3]))
		}
	}
	n := l.n + k.Dim(1)
	if l.k == nil || n > l.k.Dim(1) {
		if err := l.grow(g.Device(), k, 2*n); err != nil {
			return fail(err)
		}
	}
	shape := k.Shape()
	dims := device.DimsOf(shape...)
	room := l.k.Shape()
	for _, p := range [2][2]*tensor.Tensor{{l.k, k}, {l.v, v}} {
		at := device.DimsOf(room...).RowMajor()
		at.Offset = l.n * room[2] * room[3]
		g.Device().CopyStrided(dims, device.View{Buf: p[0].Buffer(), Layout: at}, device.Contiguous(p[1].Buffer(), dims))
	}
	l.n = n
	return true
}

// grow replaces l's buffers by ones with room for room positions of rows
// shaped as like's, holding the l.n positions cached.
func (l *kvLayer) grow(dev device.Device, like *tensor.Tensor, room int) error {
	shape := like.Shape()
	shape[1] = room
	var bufs [2]*tensor.Tensor
	for i := range bufs {
		t, err := tensor.NewPooled(dev, like.DType(), shape...)
		if err != nil {
			bufs[0].Free()
			return err
		}
		bufs[i] = t
	}
	if l.k != nil {
		old := l.k.Shape()
		dims := device.DimsOf(old[0], l.n, old[2], old[3])
		for i, src := range []*tensor.Tensor{l.k, l.v} {
			dst := device.Contiguous(bufs[i].Buffer(), device.DimsOf(shape...))
			dev.CopyStrided(dims, dst, device.Contiguous(src.Buffer(), device.DimsOf(old...)))
			src.Free()
		}
	}
	l.k, l.v = bufs[0], bufs[1]
	return nil
}

// row returns the held keys and values of batch row r of layer, views
// [1, Len(layer), H, D] of the buffers.
func (c *KVCache) row(layer, r int) (k, v *tensor.Tensor) {
	l := &c.layers[layer]
	shape := l.k.Shape()
	at := r * shape[1] * shape[2] * shape[3]
	k, _ = l.k.Part(at, 1, l.n, shape[2], shape[3])
	v, _ = l.v.Part(at, 1, l.n, shape[2], shape[3])
	return k, v
}

// freeJoined gives Append's joined copies back to the device.
func (l *kvLayer) freeJoined() {
	for i, t := range l.joined {
		t.Free()
		l.joined[i] = nil
	}
}

// Release frees the cached tensors (to the device, not the pool); the
// cache is empty afterwards.
func (c *KVCache) Release() {
	for i := range c.layers {
		l := &c.layers[i]
		l.freeJoined()
		l.k.Free()
		l.v.Free()
		*l = kvLayer{}
	}
}
