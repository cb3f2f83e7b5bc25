package autograd

import (
	"math"

	"github.com/hilbert-ml/hilbert/tensor"
)

// MaxPool1D is torch.nn.functional.max_pool1d: the largest element of each
// window of x [N, C, L] (padding counts as -Inf), giving [N, C, OL]. Its
// gradient goes to the window's largest element, split evenly among ties
// (PyTorch gives it to one of them).
func (g *Graph) MaxPool1D(x *tensor.Tensor, opt PoolOptions) *tensor.Tensor {
	return g.pool("MaxPool1D", 1, x, opt, true)
}

// MaxPool2D is torch.nn.functional.max_pool2d over x [N, C, H, W], as
// MaxPool1D.
func (g *Graph) MaxPool2D(x *tensor.Tensor, opt PoolOptions) *tensor.Tensor {
	return g.pool("MaxPool2D", 2, x, opt, true)
}

// AvgPool1D is torch.nn.functional.avg_pool1d with its defaults: the mean
// of each window of x [N, C, L], padding counted as zeros
// (count_include_pad), giving [N, C, OL].
func (g *Graph) AvgPool1D(x *tensor.Tensor, opt PoolOptions) *tensor.Tensor {
	return g.pool("AvgPool1D", 1, x, opt, false)
}

// AvgPool2D is torch.nn.functional.avg_pool2d over x [N, C, H, W], as
// AvgPool1D. Dilation must be 1 (as in PyTorch).
func (g *Graph) AvgPool2D(x *tensor.Tensor, opt PoolOptions) *tensor.Tensor {
	return g.pool("AvgPool2D", 2, x, opt, false)
}

func (g *Graph) pool(name string, spatial int, x *tensor.Tensor, opt PoolOptions, isMax bool) *tensor.Tensor {
	if !g.ok(name, x) {
		return nil
	}
	if len(opt.Kernel) == 0 {
		return g.failf("%s: PoolOptions.Kernel is empty (want 1 or %d sizes)", name, spatial)
	}
	kernel, ok := g.expand(name, "Kernel", opt.Kernel, spatial, 1, 1)
	if !ok {
		return nil
	}
	stride := opt.Stride
	if len(stride) == 0 {
		stride = kernel[:spatial]
	}
	if !isMax && len(opt.Dilation) > 0 {
		for _, d := range opt.Dilation {
			if d != 1 {
				return g.failf("%s: Dilation %v: average pooling takes no dilation", name, opt.Dilation)
			}
		}
	}
	w, ok := g.newWindow(name, x, spatial, kernel, stride, opt.Padding, opt.Dilation)
	if !ok {
		return nil
	}
	for i := range spatial {
		if 2*w.pad[i] > w.kernel[i] {
			return g.failf("%s: Padding %v with Kernel %v: padding must be at most half the kernel", name, opt.Padding, opt.Kernel)
		}
	}
	n, c := x.Dim(0), x.Dim(1)
	var out *tensor.Tensor
	if isMax {
		out = g.MaxAxis(g.unfold(x, w, math.Inf(-1)), 2, false)
	} else {
		out = g.MeanAxis(g.unfold(x, w, 0), 2, false)
	}
	return g.Reshape(out, w.outShape(n, c)...)
}
