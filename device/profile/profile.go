// Package profile wraps a device.Device and accounts the time of every
// kernel call, grouped by operation and shape, so that a training step can
// be broken down on any backend: "where do the milliseconds go".
//
// While recording, each call is followed by the device's Synchronize, so
// the time of a call is the time until its work is done, also on an
// asynchronous backend such as CUDA. That serialisation costs throughput:
// measure speed with recording off, then record a step or two.
package profile

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/compose"
)

// Op is the accumulated cost of one kind of call.
type Op struct {
	// Name is the device method, e.g. "Gemm" or "Attention".
	Name string
	// Detail tells calls of one method apart where their cost differs by
	// shape: "M x N x K" and transposes for Gemm, the shape for attention
	// and cross-entropy; empty otherwise.
	Detail string
	// Calls counts the calls and Time sums their durations.
	Calls int
	Time  time.Duration
	// Flops sums the floating-point operations of the calls where they are
	// well defined (Gemm: 2 M N K per product; attention: AttentionFlops);
	// 0 elsewhere.
	Flops float64
}

// GFlops returns the achieved rate of an Op with Flops, or 0.
func (o Op) GFlops() float64 {
	if o.Time <= 0 {
		return 0
	}
	return o.Flops / o.Time.Seconds() / 1e9
}

var (
	_ device.Device   = (*Device)(nil)
	_ device.Fused    = (*Device)(nil)
	_ compose.Wrapper = (*Device)(nil)
)

type key struct{ name, detail string }

// Device is a device.Device that records the time of its calls while
// recording is on. It forwards every method of the Core and of every
// capability of package device explicitly (no embedding, so that a method
// added to an interface cannot go untimed: the wrapper stops compiling
// until it forwards it) and times all of them but Name. A capability the
// wrapped device lacks runs as its composition from device/compose,
// recorded as "Name/composed" (see ops.go). Capabilities declared outside
// package device are timed through Around (it is a compose.Wrapper). It
// is safe for concurrent use if the wrapped device is.
type Device struct {
	inner device.Device

	mu        sync.Mutex
	recording bool
	ops       map[key]*Op
}

// Wrap returns a profiling wrapper of d with recording off.
func Wrap(d device.Device) *Device { return &Device{inner: d, ops: map[key]*Op{}} }

// Unwrap returns the wrapped device.
func (p *Device) Unwrap() device.Device { return p.inner }

// Record turns recording on or off. Turning it on synchronizes first, so
// that earlier work is not charged to the first recorded call.
func (p *Device) Record(on bool) {
	if on {
		_ = p.inner.Synchronize()
	}
	p.mu.Lock()
	p.recording = on
	p.mu.Unlock()
}

// Reset forgets what was recorded.
func (p *Device) Reset() {
	p.mu.Lock()
	p.ops = map[key]*Op{}
	p.mu.Unlock()
}

// Ops returns the recorded operations, the most expensive first.
func (p *Device) Ops() []Op {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]Op, 0, len(p.ops))
	for _, o := range p.ops {
		out = append(out, *o)
	}
	slices.SortFunc(out, func(a, b Op) int {
		if c := cmp.Compare(b.Time, a.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Name+a.Detail, b.Name+b.Detail)
	})
	return out
}

// start returns the start time of a call, or the zero time when not
// recording.
func (p *Device) start() time.Time {
	p.mu.Lock()
	on := p.recording
	p.mu.Unlock()
	if !on {
		return time.Time{}
	}
	return time.Now()
}

// stop waits for the call started at t0 (a recording start) and charges
// it to (name, detail).
func (p *Device) stop(t0 time.Time, name, detail string, flops float64) {
	_ = p.inner.Synchronize() // errors stay sticky for the caller's Synchronize
	dt := time.Since(t0)
	k := key{name: name, detail: detail}
	p.mu.Lock()
	o := p.ops[k]
	if o == nil {
		o = &Op{Name: name, Detail: k.detail}
		p.ops[k] = o
	}
	o.Calls++
	o.Time += dt
	o.Flops += flops
	p.mu.Unlock()
}

// WriteTable writes the top operations (all if top <= 0) as an aligned
// table with each one's share of the recorded total, then the total.
func (p *Device) WriteTable(w io.Writer, top int) error {
	ops := p.Ops()
	var total time.Duration
	for _, o := range ops {
		total += o.Time
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "%-22s %-34s %7s %11s %6s %9s\n", "op", "detail", "calls", "total ms", "share", "GFLOP/s")
	for i, o := range ops {
		if top > 0 && i == top {
			var rest time.Duration
			for _, r := range ops[top:] {
				rest += r.Time
			}
			fmt.Fprintf(&sb, "%-22s %-34s %7s %11.3f %5.1f%%\n", fmt.Sprintf("(%d more)", len(ops)-top), "", "", ms(rest), share(rest, total))
			break
		}
		rate := ""
		if o.Flops > 0 {
			rate = fmt.Sprintf("%9.1f", o.GFlops())
		}
		fmt.Fprintf(&sb, "%-22s %-34s %7d %11.3f %5.1f%% %9s\n", o.Name, o.Detail, o.Calls, ms(o.Time), share(o.Time, total), rate)
	}
	fmt.Fprintf(&sb, "%-22s %-34s %7s %11.3f\n", "total", "", "", ms(total))
	_, err := io.WriteString(w, sb.String())
	return err
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

func share(d, total time.Duration) float64 {
	if total <= 0 {
		return 0
	}
	return 100 * float64(d) / float64(total)
}
