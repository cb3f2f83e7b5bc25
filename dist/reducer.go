package dist

import (
	"cmp"
	"fmt"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/compose"
	"github.com/hilbert-ml/hilbert/tensor"
)

// DefaultBucketBytes is ReducerOptions.BucketBytes's default: 4 MiB of
// float32 gradients per bucket (1M floats).
const DefaultBucketBytes = 4 << 20

// ReducerOptions configures a Reducer.
type ReducerOptions struct {
	// BucketBytes is the size a bucket is filled to: parameters are taken in
	// reverse order (the order a backward pass finishes them) and a bucket
	// is closed once it holds at least this many bytes of gradients, so a
	// parameter larger than it has a bucket of its own. Zero means
	// DefaultBucketBytes.
	BucketBytes int
}

// bucket is a run of consecutive parameters whose gradients are averaged by
// one all-reduce.
type bucket struct {
	params  []int         // indices into Reducer.params, in bucket order
	offsets []int         // element offset of each parameter in flat
	flat    device.Buffer // the packed gradients; nil for a lone parameter, reduced in place
	buf     device.Buffer // what is all-reduced this step: flat, or the lone gradient
	pending int           // parameters not yet reported ready this step
}

// Reducer averages the gradients of a fixed, ordered parameter list over the
// ranks of a communicator, in buckets, as data-parallel training needs after
// every rank's backward pass.
//
// Used with autograd's OnGradReady hook (Ready), a bucket's all-reduce starts
// as soon as the last of its gradients is final, on a background goroutine,
// while the backward pass goes on; Wait reduces the buckets not yet started,
// waits for all and writes the averages back into the gradients. Used
// without the hook, Wait does all the work after the backward pass (which is
// also how gradient accumulation uses it: nothing is reduced until Wait
// after the last micro-batch). Buckets are started in a fixed order (bucket
// 0 first, then 1, ...) whatever the order their gradients become ready, so
// every rank issues the same all-reduces in the same order.
//
// Gradients are packed into a bucket's buffer with the parameters' device's
// Copy, and written back scaled by 1/size, on the goroutine that calls Ready
// and Wait (the backward pass's); the background goroutine only sums the
// packed buffer over ranks (or, for a parameter with a bucket of its own,
// averages its gradient in place, which the backward pass no longer
// touches). The average is the float32 sum over ranks (as the
// communicator's library adds them) times 1/size, which for a power-of-two
// rank count is exactly the sum divided by the count. A parameter without a
// gradient contributes zeros and receives the average in a new gradient.
//
// Overlap pays where communication progresses without the cores the
// backward pass runs on. On CPU ranks under MPI it does not: a rank waiting
// in MPI_Allreduce for a slower peer spins on a core its own backward pass
// needs. For the cpu-128 preset on 2 ranks of one core each
// (TestMPIStepTime), Wait alone after the backward pass added 2-6% to the
// step, the hook made it 1.2x (with OMPI_MCA_mpi_yield_when_idle=1) to 6x
// slower: on CPUs, call Wait without the hook.
//
// Every step that reported gradients must end with Wait, a step whose
// backward pass failed included: the other ranks' all-reduces wait for this
// rank's, and Wait is what readies the Reducer for the next step.
//
// With one rank (Single) Ready and Wait do nothing. A Reducer is used from
// one goroutine; Close stops its background goroutine.
type Reducer struct {
	comm    Communicator
	params  []*tensor.Tensor
	index   map[*tensor.Tensor]int // parameter -> its position in params
	bucket  []int                  // parameter -> its bucket
	buckets []bucket
	noop    bool
	// per step
	ready   []bool // parameter reported this step
	next    int    // next bucket to start
	started int    // buckets started and not yet collected
	err     error  // first misuse reported by Ready
	// background all-reduces
	work chan *bucket
	done chan error
}

// NewReducer groups params' gradients into buckets for c. Every parameter
// must be a distinct float32 tensor of one device; every rank must pass the
// same list (shapes and order).
func NewReducer(c Communicator, params []*tensor.Tensor, opts ReducerOptions) (*Reducer, error) {
	if c == nil {
		return nil, fmt.Errorf("dist: reducer: nil communicator")
	}
	if opts.BucketBytes < 0 {
		return nil, fmt.Errorf("dist: reducer: negative bucket size %d bytes", opts.BucketBytes)
	}
	limit := opts.BucketBytes
	limit = cmp.Or(limit, DefaultBucketBytes)
	r := &Reducer{comm: c, params: params, index: make(map[*tensor.Tensor]int, len(params)), noop: c.Size() == 1}
	dev, err := r.indexParams()
	if err != nil {
		return nil, err
	}
	if r.noop {
		return r, nil
	}
	if err := r.makeBuckets(dev, limit); err != nil {
		r.free()
		return nil, err
	}
	r.reset()
	// The goroutine holds its own copies of the channels: Close clears the
	// fields (and may run before the goroutine first reads them).
	work := make(chan *bucket, len(r.buckets))
	done := make(chan error, len(r.buckets))
	r.work, r.done = work, done
	go func() {
		for b := range work {
			op := Average // a lone gradient, reduced in place
			if b.flat != nil {
				op = Sum // scaled by 1/size as Wait unpacks it
			}
			done <- c.AllReduce(b.buf, op)
		}
	}()
	return r, nil
}

// indexParams checks the parameters (distinct float32 tensors of one
// device), indexes them and returns their device.
func (r *Reducer) indexParams() (device.Device, error) {
	var dev device.Device
	for i, p := range r.params {
		if p == nil {
			return nil, fmt.Errorf("dist: reducer: parameter %d is nil", i)
		}
		if p.DType() != device.Float32 {
			return nil, fmt.Errorf("dist: reducer: parameter %d %v is %v; gradients are all-reduced in float32", i, p.Shape(), p.DType())
		}
		if dev == nil {
			dev = p.Device()
		} else if p.Device() != dev {
			return nil, fmt.Errorf("dist: reducer: parameter %d %v is on %s, parameter 0 on %s", i, p.Shape(), p.Device().Name(), dev.Name())
		}
		if j, dup := r.index[p]; dup {
			return nil, fmt.Errorf("dist: reducer: parameter %d %v is parameter %d again", i, p.Shape(), j)
		}
		r.index[p] = i
	}
	return dev, nil
}

// makeBuckets groups the parameters, last first (the order backward
// produces their gradients), into buckets of about limit bytes; a bucket
// of several gradients gets a flat buffer on dev.
func (r *Reducer) makeBuckets(dev device.Device, limit int) error {
	r.bucket = make([]int, len(r.params))
	r.ready = make([]bool, len(r.params))
	var cur bucket
	size := 0
	closeBucket := func() error {
		if len(cur.params) > 1 {
			buf, err := dev.Alloc(device.Float32, size)
			if err != nil {
				return fmt.Errorf("dist: reducer: bucket of %d gradients (%d floats): %w", len(cur.params), size, err)
			}
			cur.flat = buf
		}
		r.buckets = append(r.buckets, cur)
		cur, size = bucket{}, 0
		return nil
	}
	for i := len(r.params) - 1; i >= 0; i-- {
		r.bucket[i] = len(r.buckets)
		cur.params = append(cur.params, i)
		cur.offsets = append(cur.offsets, size)
		size += r.params[i].Len()
		if 4*size >= limit {
			if err := closeBucket(); err != nil {
				return err
			}
		}
	}
	if len(cur.params) > 0 {
		return closeBucket()
	}
	return nil
}

// Buckets returns the number of buckets (0 with one rank, where nothing is
// reduced).
func (r *Reducer) Buckets() int { return len(r.buckets) }

// reset makes every bucket wait for all its parameters again.
func (r *Reducer) reset() {
	for i := range r.buckets {
		r.buckets[i].pending = len(r.buckets[i].params)
	}
	clear(r.ready)
	r.next, r.started, r.err = 0, 0, nil
}

// Ready reports that p's gradient is final for this step; it is the hook to
// pass to autograd's Graph.OnGradReady. A parameter not in the list is
// ignored. Once every gradient of the next bucket(s) in order is ready, their
// all-reduces start in the background.
func (r *Reducer) Ready(p *tensor.Tensor) {
	if r.noop {
		return
	}
	i, ok := r.index[p]
	if !ok {
		return
	}
	if r.ready[i] {
		if r.err == nil {
			r.err = fmt.Errorf("dist: reducer: the gradient of parameter %d %v was reported ready twice in one step (with gradient accumulation, set the hook only for the last micro-batch's backward pass)", i, p.Shape())
		}
		return
	}
	r.ready[i] = true
	b := &r.buckets[r.bucket[i]]
	b.pending--
	r.startReady()
}

// startReady starts, in bucket order, every bucket whose gradients are all
// ready.
func (r *Reducer) startReady() {
	for r.next < len(r.buckets) && r.buckets[r.next].pending == 0 {
		b := &r.buckets[r.next]
		if err := r.pack(b); err != nil {
			// Not sent: the other ranks' all-reduce of this bucket waits
			// (bounded by the communicator's timeout); Wait returns err.
			if r.err == nil {
				r.err = err
			}
			r.next++
			continue
		}
		r.work <- b
		r.next++
		r.started++
	}
}

// pack fills b's all-reduce buffer from its parameters' gradients (zeros for
// a parameter without one).
func (r *Reducer) pack(b *bucket) error {
	if b.flat == nil {
		g, err := r.grad(b.params[0])
		if err != nil {
			return err
		}
		b.buf = g.Buffer()
		return nil
	}
	b.buf = b.flat
	dev := b.flat.Device()
	for k, i := range b.params {
		dst := b.flat.Slice(b.offsets[k], r.params[i].Len())
		if r.params[i].Grad() == nil {
			dev.Fill(dst, 0)
			continue
		}
		g, err := r.grad(i)
		if err != nil {
			return err
		}
		dev.Copy(dst, g.Buffer())
	}
	return nil
}

// grad returns parameter i's gradient, giving it a zero one if it has none.
func (r *Reducer) grad(i int) (*tensor.Tensor, error) {
	p := r.params[i]
	if g := p.Grad(); g != nil {
		if g.Len() != p.Len() || g.DType() != device.Float32 || g.Device() != p.Device() {
			return nil, fmt.Errorf("dist: reducer: gradient of parameter %d %v is %v %v on %s, expected float32 of its shape on %s",
				i, p.Shape(), g.DType(), g.Shape(), g.Device().Name(), p.Device().Name())
		}
		return g, nil
	}
	g, err := tensor.NewOf(p.Device(), device.Float32, p.Shape()...)
	if err != nil {
		return nil, fmt.Errorf("dist: reducer: gradient of parameter %d %v: %w", i, p.Shape(), err)
	}
	p.SetGrad(g)
	return g, nil
}

// Wait starts the buckets not started yet (all of them when Ready was never
// called), waits for every all-reduce, and leaves in each parameter's
// gradient the average over ranks. It returns the first error, after which
// the gradients are undefined and the communicator is likely unusable. It
// readies the Reducer for the next step.
func (r *Reducer) Wait() error {
	if r.noop {
		return nil
	}
	for i := range r.buckets {
		r.buckets[i].pending = 0
	}
	r.startReady()
	var err error
	for ; r.started > 0; r.started-- {
		if e := <-r.done; e != nil && err == nil {
			err = fmt.Errorf("dist: reducer: %w", e)
		}
	}
	if err == nil {
		err = r.err
	}
	for k := range r.buckets {
		if err != nil {
			break
		}
		err = r.unpack(&r.buckets[k])
	}
	r.reset()
	return err
}

// unpack writes b's summed buffer back into the gradients, scaled by
// 1/size (one pass over memory for both).
func (r *Reducer) unpack(b *bucket) error {
	if b.flat == nil {
		return nil // reduced in place
	}
	dev := b.flat.Device()
	inv := 1 / float32(r.comm.Size())
	for k, i := range b.params {
		g, err := r.grad(i)
		if err != nil {
			return err
		}
		compose.Scale(dev, g.Buffer(), b.flat.Slice(b.offsets[k], r.params[i].Len()), inv)
	}
	return nil
}

// Close stops the background goroutine and frees the buckets' buffers. Call
// it after Wait, never during a step.
func (r *Reducer) Close() error {
	if r.work != nil {
		close(r.work)
		r.work = nil
	}
	r.free()
	return nil
}

// free releases the packed buffers.
func (r *Reducer) free() {
	for k := range r.buckets {
		if b := &r.buckets[k]; b.flat != nil {
			b.flat.Device().Free(b.flat)
			b.flat = nil
		}
	}
}

// BroadcastTensors copies root's values of ts into every rank's ts (float32
// tensors of equal shapes on every rank), in order: how data-parallel
// training starts every rank from rank 0's initial weights. With one rank it
// does nothing.
func BroadcastTensors(c Communicator, ts []*tensor.Tensor, root int) error {
	if c.Size() == 1 {
		return nil
	}
	for i, t := range ts {
		if t == nil {
			return fmt.Errorf("dist: broadcast: tensor %d is nil", i)
		}
		if t.DType() != device.Float32 {
			return fmt.Errorf("dist: broadcast: tensor %d %s %v is %v, expected float32", i, t.Name, t.Shape(), t.DType())
		}
		if t.Len() == 0 {
			continue
		}
		if err := c.Broadcast(t.Buffer(), root); err != nil {
			return fmt.Errorf("dist: broadcast of tensor %d %s %v: %w", i, t.Name, t.Shape(), err)
		}
		t.MarkModified()
	}
	return nil
}
