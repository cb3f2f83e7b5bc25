package cuda

import "fmt"

// Stream returns the CUDA stream (CUstream) on which the device runs all
// its work, for a library that enqueues its own work after it (NCCL's
// collectives). Call such a library through OnStream, which makes the
// device's context current.
func (d *Device) Stream() uintptr { return d.stream }

// OnStream runs f on the calling goroutine with the device's CUDA context
// current on its OS thread and the device's lock held (so no kernel of the
// device is enqueued meanwhile), passing the device's stream: work f
// enqueues on that stream runs after the device's kernels enqueued before
// and before those enqueued after. f must not call the Device's methods (the
// lock is held) and must not block on other ranks for long (NCCL's
// collectives only enqueue). It returns the device's sticky error if one is
// recorded, f's error otherwise.
func (d *Device) OnStream(f func(stream uintptr) error) error {
	d.enter()
	defer d.leave()
	if d.err != nil {
		return d.err
	}
	if d.closed {
		return fmt.Errorf("cuda: %s: OnStream on a closed device", d.Name())
	}
	return f(d.stream)
}
