package autograd

import (
	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/tensor"
)

// Convolution and pooling over 1, 2 or 3 spatial axes, composed from the
// Core: a window's patches are gathered (im2col) by one GatherAxis
// through an index built on the host, whose adjoint is one ScatterAddAxis;
// a convolution is then a batched MatMul over the groups and a pooling a
// reduction over the window. The patches are taken from x viewed as
// [N*C, spatial elements], so a 3-D convolution needs no tensor of more
// than rank 5 (x itself) and tensor.MaxRank (6) is enough for it.
// Layouts are PyTorch's: x [N, C, spatial...], weights
// [out channels, C/groups, kernel...], results [N, channels, out spatial...].

// ConvOptions are a convolution's hyperparameters. Stride, Padding and
// Dilation hold one entry per spatial axis, or one entry for every axis;
// empty, they are 1, 0 and 1 (PyTorch's defaults). Padding is with zeros
// on both sides of each axis.
type ConvOptions struct {
	Stride, Padding, Dilation []int
	// Groups splits the channels into groups convolved separately (0 is 1).
	Groups int
}

// PoolOptions are a pooling window's hyperparameters, per spatial axis as
// in ConvOptions. Kernel is required; an empty Stride is the kernel size
// (PyTorch's default). Padding may be at most half the kernel size.
type PoolOptions struct {
	Kernel, Stride, Padding, Dilation []int
}

// window is the geometry of a sliding window over the spatial axes.
type window struct {
	name                                     string
	spatial                                  int // number of spatial axes
	in, kernel, stride, pad, dil, out, padIn [3]int
}

// kernelSize and outSize are the number of window offsets and of output
// positions; paddedSize the elements of one padded channel.
func (w *window) kernelSize() int { return tensor.Shape(w.kernel[:w.spatial]).Numel() }
func (w *window) outSize() int    { return tensor.Shape(w.out[:w.spatial]).Numel() }
func (w *window) paddedSize() int { return tensor.Shape(w.padIn[:w.spatial]).Numel() }

func (w *window) padded() bool { return w.pad != [3]int{} }

// expand reads one hyperparameter: empty gives def on every axis, one
// entry is repeated, else there must be one per spatial axis, each at
// least least.
func (g *Graph) expand(name, field string, v []int, spatial, def, least int) (out [3]int, ok bool) {
	switch len(v) {
	case 0:
		for i := range spatial {
			out[i] = def
		}
	case 1:
		for i := range spatial {
			out[i] = v[0]
		}
	case spatial:
		copy(out[:], v)
	default:
		g.failf("%s: %s has %d entries %v (want 1 or %d)", name, field, len(v), v, spatial)
		return out, false
	}
	for i := range spatial {
		if out[i] < least {
			g.failf("%s: %s %v: each entry must be at least %d", name, field, v, least)
			return out, false
		}
	}
	return out, true
}

// newWindow checks x [N, C, spatial...] and the window's hyperparameters
// and returns its geometry.
func (g *Graph) newWindow(name string, x *tensor.Tensor, spatial int, kernel [3]int, stride, pad, dil []int) (w window, ok bool) {
	w = window{name: name, spatial: spatial, kernel: kernel}
	if !isFloat(x) {
		g.failf("%s: dtype %v (want float32 or float64)", name, x.DType())
		return w, false
	}
	if x.Rank() != spatial+2 {
		g.failf("%s: input shape %v: want rank %d [batch, channels, %d spatial]", name, x.Shape(), spatial+2, spatial)
		return w, false
	}
	if w.stride, ok = g.expand(name, "Stride", stride, spatial, 1, 1); !ok {
		return w, false
	}
	if w.pad, ok = g.expand(name, "Padding", pad, spatial, 0, 0); !ok {
		return w, false
	}
	if w.dil, ok = g.expand(name, "Dilation", dil, spatial, 1, 1); !ok {
		return w, false
	}
	for i := range spatial {
		w.in[i] = x.Dim(2 + i)
		w.padIn[i] = w.in[i] + 2*w.pad[i]
		span := w.dil[i]*(w.kernel[i]-1) + 1
		if span > w.padIn[i] {
			g.failf("%s: input %v: spatial axis %d of %d (padded %d) is smaller than the window's span %d (kernel %d, dilation %d)",
				name, x.Shape(), i, w.in[i], w.padIn[i], span, w.kernel[i], w.dil[i])
			return w, false
		}
		w.out[i] = (w.padIn[i]-span)/w.stride[i] + 1
	}
	return w, true
}

// outShape returns [n, c, out spatial...].
func (w *window) outShape(n, c int) []int { return append([]int{n, c}, w.out[:w.spatial]...) }

// indices returns, for each window offset k and output position p (k
// major), the element of a padded channel that patch element (k, p)
// reads.
func (w *window) indices() []int32 {
	s := w.spatial
	var pitch [3]int // row-major strides of the padded channel
	p := 1
	for i := s - 1; i >= 0; i-- {
		pitch[i] = p
		p *= w.padIn[i]
	}
	ids := make([]int32, 0, w.kernelSize()*w.outSize())
	var k, o [3]int
	for {
		base := 0
		for i := range s {
			base += k[i] * w.dil[i] * pitch[i]
		}
		o = [3]int{}
		for {
			at := base
			for i := range s {
				at += o[i] * w.stride[i] * pitch[i]
			}
			ids = append(ids, int32(at))
			if !step(o[:s], w.out[:s]) {
				break
			}
		}
		if !step(k[:s], w.kernel[:s]) {
			return ids
		}
	}
}

// step advances the row-major counter c within sizes n; false after the
// last.
func step(c, n []int) bool {
	for i := len(c) - 1; i >= 0; i-- {
		if c[i]++; c[i] < n[i] {
			return true
		}
		c[i] = 0
	}
	return false
}

// padLayout is the layout of the interior of a padded [rows, padIn...]
// array as a [rows, in...] one.
func (w *window) padLayout() device.Layout {
	st := rowMajor(append([]int{1}, w.padIn[:w.spatial]...))
	l := device.Layout{Strides: st}
	for i := range w.spatial {
		l.Offset += w.pad[i] * st[1+i]
	}
	return l
}

// unfold returns the patches of x [N, C, spatial...] as [N, C, K, P] (K
// window offsets, P output positions), padding x with padValue (0 or -Inf,
// exact in every float dtype). Its gradient scatter-adds back into x, on
// the buffers: the index is one row shared by every channel (a stride-0
// view), which Graph's ScatterAddAxis would need materialised per row.
func (g *Graph) unfold(x *tensor.Tensor, w window, padValue float64) *tensor.Tensor {
	name := w.name
	rows, kp, np := x.Dim(0)*x.Dim(1), w.kernelSize()*w.outSize(), w.paddedSize()
	ids := g.allocOf(name, device.Int32, kp)
	if ids == nil {
		return nil
	}
	g.dev.CopyInt32FromHost(ids.Buffer(), w.indices())
	iv := device.View{Buf: ids.Buffer(), Layout: device.Layout{Strides: [device.MaxDims]int{0, 1, 0}}}
	inner := append([]int{rows}, w.in[:w.spatial]...)
	dims := device.DimsOf(inner...)
	interior := w.padLayout()
	outShape := []int{x.Dim(0), x.Dim(1), w.kernelSize(), w.outSize()}
	return g.Apply(&Function{Name: name, Forward: func(g *Graph, in []*tensor.Tensor) *tensor.Tensor {
		src := in[0].Buffer()
		if w.padded() {
			xp := g.scratchLike(in[0], rows, np)
			defer xp.Release()
			g.dev.Fill(xp.Buffer(), float32(padValue))
			g.dev.CopyStrided(dims, device.View{Buf: xp.Buffer(), Layout: interior}, device.Contiguous(in[0].Buffer(), dims))
			src = xp.Buffer()
		}
		out := g.allocOf(name, in[0].DType(), outShape...)
		if out == nil {
			return nil
		}
		g.dev.GatherAxis(out.Buffer(), src, iv, rows, np, 1, kp)
		return out
	}, Backward: func(g *Graph, gout *tensor.Tensor, in []*tensor.Tensor, _ *tensor.Tensor) []*tensor.Tensor {
		dx := g.allocOf(name, in[0].DType(), in[0].Shape()...)
		if dx == nil {
			return nil
		}
		if !w.padded() {
			g.dev.Fill(dx.Buffer(), 0)
			g.dev.ScatterAddAxis(dx.Buffer(), gout.Buffer(), iv, rows, np, 1, kp)
			return []*tensor.Tensor{dx}
		}
		dxp := g.scratchLike(in[0], rows, np)
		defer dxp.Release()
		g.dev.Fill(dxp.Buffer(), 0)
		g.dev.ScatterAddAxis(dxp.Buffer(), gout.Buffer(), iv, rows, np, 1, kp)
		g.dev.CopyStrided(dims, device.Contiguous(dx.Buffer(), dims), device.View{Buf: dxp.Buffer(), Layout: interior})
		return []*tensor.Tensor{dx}
	}}, x)
}

// Conv1D is torch.nn.functional.conv1d: x [N, C, L], weight
// [OC, C/groups, K] and an optional bias [OC] (nil for none) give
// [N, OC, (L + 2 pad - dil (K-1) - 1) / stride + 1]. It is differentiable
// in x, weight and bias.
func (g *Graph) Conv1D(x, weight, bias *tensor.Tensor, opt ConvOptions) *tensor.Tensor {
	return g.conv("Conv1D", 1, x, weight, bias, opt)
}

// Conv2D is torch.nn.functional.conv2d: x [N, C, H, W], weight
// [OC, C/groups, KH, KW] and an optional bias [OC] (nil for none) give
// [N, OC, OH, OW], each output size (in + 2 pad - dil (k-1) - 1) / stride
// + 1. It is differentiable in x, weight and bias.
func (g *Graph) Conv2D(x, weight, bias *tensor.Tensor, opt ConvOptions) *tensor.Tensor {
	return g.conv("Conv2D", 2, x, weight, bias, opt)
}

// Conv3D is torch.nn.functional.conv3d: x [N, C, D, H, W] and weight
// [OC, C/groups, KD, KH, KW], as Conv2D with a third spatial axis. It
// needs no rank above tensor.MaxRank (6): the patches are gathered from x
// viewed as [N*C, D*H*W] and the largest tensor is x itself (rank 5), so
// MaxRank stays 6.
func (g *Graph) Conv3D(x, weight, bias *tensor.Tensor, opt ConvOptions) *tensor.Tensor {
	return g.conv("Conv3D", 3, x, weight, bias, opt)
}

func (g *Graph) conv(name string, spatial int, x, weight, bias *tensor.Tensor, opt ConvOptions) *tensor.Tensor {
	if !g.ok(name, x, weight) || bias != nil && !g.ok(name, bias) {
		return nil
	}
	if weight.DType() != x.DType() || bias != nil && bias.DType() != x.DType() {
		return g.failf("%s: input %v, weight %v: want one dtype for input, weight and bias", name, x.DType(), weight.DType())
	}
	if weight.Rank() != spatial+2 {
		return g.failf("%s: weight shape %v: want rank %d [out channels, in channels / groups, %d kernel sizes]", name, weight.Shape(), spatial+2, spatial)
	}
	groups := max(opt.Groups, 1)
	if opt.Groups < 0 {
		return g.failf("%s: Groups %d is negative", name, opt.Groups)
	}
	var kernel [3]int
	for i := range spatial {
		kernel[i] = weight.Dim(2 + i)
	}
	w, ok := g.newWindow(name, x, spatial, kernel, opt.Stride, opt.Padding, opt.Dilation)
	if !ok {
		return nil
	}
	n, c, oc := x.Dim(0), x.Dim(1), weight.Dim(0)
	if c%groups != 0 || oc%groups != 0 || weight.Dim(1)*groups != c {
		return g.failf("%s: input %v with weight %v and %d groups: want channels (%d) and out channels (%d) divisible by the groups, and weight axis 1 = channels / groups",
			name, x.Shape(), weight.Shape(), groups, c, oc)
	}
	if bias != nil && (bias.Rank() != 1 || bias.Dim(0) != oc) {
		return g.failf("%s: bias shape %v: want [%d]", name, bias.Shape(), oc)
	}
	k, p, cg, ocg := w.kernelSize(), w.outSize(), c/groups, oc/groups
	cols := g.unfold(x, w, 0) // [N, C, K, P]
	cols = g.Reshape(cols, n, groups, cg*k, p)
	cols = g.Reshape(g.Permute(cols, 1, 2, 0, 3), groups, cg*k, n*p)
	out := g.MatMul(g.Reshape(weight, groups, ocg, cg*k), cols, false, false) // [G, OCg, N*P]
	out = g.Permute(g.Reshape(out, groups, ocg, n, p), 2, 0, 1, 3)            // [N, G, OCg, P]
	out = g.Reshape(out, w.outShape(n, oc)...)
	if bias != nil {
		shape := make([]int, spatial+1)
		for i := range shape {
			shape[i] = 1
		}
		shape[0] = oc
		out = g.Add(out, g.Reshape(bias, shape...))
	}
	return out
}
