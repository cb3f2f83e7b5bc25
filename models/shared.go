package models

import (
	"fmt"

	"github.com/hilbert-ml/hilbert/autograd"
	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/nn"
	"github.com/hilbert-ml/hilbert/tensor"
)

// What the language models share around their own layers: the checks of
// inputs [B, T] and their start position, the losses, and untying a head.

// startPosition checks inputs [B, T] of the model named name (in errors)
// and returns the position of their first token, after those already in
// cache (nil: none) of a model of layers layers. Inputs of another rank,
// or positions past context, are an error recorded in g (ok false).
func startPosition(g *autograd.Graph, name string, inputs *tensor.Tensor, cache *nn.KVCache, layers, context int) (pos int, ok bool) {
	if inputs == nil || inputs.Rank() != 2 {
		g.Fail(fmt.Errorf("models: %s: inputs %v: want [batch, seq]", name, tensor.ShapeOf(inputs)))
		return 0, false
	}
	if cache != nil && layers > 0 {
		pos = cache.Len(0)
	}
	if t := inputs.Dim(1); pos+t > context {
		g.Fail(fmt.Errorf("models: %s: positions %d..%d exceed the context of %d", name, pos, pos+t-1, context))
		return 0, false
	}
	return pos, true
}

// headLoss is a model's LossHidden from its final-norm hidden states h
// [B, T, Dim] (nil after an error): the head and the mean next-token
// cross-entropy fused (autograd.LinearCrossEntropy), and h as [B*T, Dim].
func headLoss(g *autograd.Graph, model string, h, inputs, targets *tensor.Tensor, head *nn.Linear, dim int) (loss, hidden *tensor.Tensor) {
	if h == nil {
		return nil, nil
	}
	if targets == nil || !targets.SameShape(inputs) {
		g.Fail(fmt.Errorf("models: %s.Loss: targets %v for inputs %v: want equal shapes", model, tensor.ShapeOf(targets), inputs.Shape()))
		return nil, nil
	}
	h = g.Reshape(h, inputs.Len(), dim)
	return g.LinearCrossEntropy(h, head.Weight, targets, 0), h
}

// crossEntropy is the mean cross-entropy of logits [B, T, V] against
// targets [B, T].
func crossEntropy(g *autograd.Graph, model string, logits, inputs, targets *tensor.Tensor) *tensor.Tensor {
	if !targets.SameShape(inputs) {
		g.Fail(fmt.Errorf("models: %s.Forward: targets %v for inputs %v: want equal shapes", model, targets.Shape(), inputs.Shape()))
		return nil
	}
	rows, v := inputs.Len(), logits.Dim(2)
	flat, err := targets.Reshape(rows)
	if err != nil {
		g.Fail(fmt.Errorf("models: %s targets: %w", model, err))
		return nil
	}
	return g.CrossEntropy(g.Reshape(logits, rows, v), flat)
}

// untieHead gives head a weight of its own, a copy of the embedding weight
// e it is tied to, as a new parameter (model names the model in errors);
// a head already untied is an error.
func untieHead(model string, head *nn.Linear, e *tensor.Tensor) error {
	if head.Weight != e {
		return fmt.Errorf("models: %s.UntieHead: the head is already untied", model)
	}
	var w *tensor.Tensor
	var err error
	if e.DType() == device.Float64 {
		w, err = tensor.FromFloat64(e.Device(), e.Float64s(), e.Shape()...)
	} else {
		w, err = tensor.FromFloat32(e.Device(), e.Float32s(), e.Shape()...)
	}
	if err != nil {
		return fmt.Errorf("models: %s.UntieHead: %w", model, err)
	}
	w.SetRequiresGrad(true)
	head.Weight = w
	return nil
}
