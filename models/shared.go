package models

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/hilbert-ml/hilbert/autograd"
	"github.com/hilbert-ml/hilbert/nn"
	"github.com/hilbert-ml/hilbert/tensor"
)

// What the language models share around their own layers: the preset
// lookups, the checks of inputs [B, T] and their start position, the
// losses, and the methods of decoder and causalLM.

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

// preset returns the configuration named name among presets, or an error
// naming the kind of preset ("GPT-2 ", "Llama " or "" for the paper's)
// and listing those there are.
func preset[C any](presets map[string]C, kind, name string) (C, error) {
	c, ok := presets[name]
	if !ok {
		return c, fmt.Errorf("models: unknown %spreset %q (have %s)", kind, name, strings.Join(presetNames(presets), ", "))
	}
	return c, nil
}

// presetNames returns the names of presets, sorted.
func presetNames[C any](presets map[string]C) []string {
	return slices.Sorted(maps.Keys(presets))
}

// decoder is what every language model here shares around its own
// layers, embedded in each: the head, the parameters, and the methods
// built on the final-norm hidden states that the model's trunk computes.
type decoder struct {
	// where names the model in errors about its inputs.
	where string
	// layers, dim and context are the model's number of blocks, width and
	// longest sequence.
	layers, dim, context int
	head                 *nn.Linear
	// trunk maps inputs [B, T], checked, placed at positions pos.. after
	// those in cache (nil: none), to the final-norm hidden states
	// [B, T, Dim], appending their keys and values to the cache.
	trunk  func(g *autograd.Graph, inputs *tensor.Tensor, pos int, cache *nn.KVCache) *tensor.Tensor
	params []*tensor.Tensor
}

// Parameters returns the model's parameters, named, in a stable order (a
// head tied to the embedding once, under the embedding's name).
func (m *decoder) Parameters() []*tensor.Tensor { return m.params }

// ForwardCached runs inputs [B, T] (int32 token ids) as the positions
// after those already in cache (nil: none) and returns their logits
// [B, T, Vocab] (the head as a plain matrix product, not fused with a
// loss), appending their keys and values to the cache. A cache needs a
// graph with recording off. Errors are recorded in g.
func (m *decoder) ForwardCached(g *autograd.Graph, inputs *tensor.Tensor, cache *nn.KVCache) *tensor.Tensor {
	return m.head.Forward(g, m.hidden(g, inputs, cache)) // nil, g failed, when hidden is
}

// ForwardCachedLast is ForwardCached's logits of the last position of
// each sequence alone, [B, Vocab] (LastForwarder: Generate's).
func (m *decoder) ForwardCachedLast(g *autograd.Graph, inputs *tensor.Tensor, cache *nn.KVCache) *tensor.Tensor {
	h := m.hidden(g, inputs, cache)
	if h == nil {
		return nil
	}
	b, t, d := h.Dim(0), h.Dim(1), h.Dim(2)
	if t > 1 {
		h = g.Slice(h, 1, t-1, t)
	}
	return m.head.Forward(g, g.Reshape(h, b, d))
}

// hidden returns the final-norm hidden states [B, T, Dim] of inputs
// [B, T] placed after the positions in cache (nil: none), or nil after an
// error.
func (m *decoder) hidden(g *autograd.Graph, inputs *tensor.Tensor, cache *nn.KVCache) *tensor.Tensor {
	if g.Err() != nil {
		return nil
	}
	pos, ok := startPosition(g, m.where, inputs, cache, m.layers, m.context)
	if !ok {
		return nil
	}
	h := m.trunk(g, inputs, pos, cache)
	if g.Err() != nil {
		return nil
	}
	return h
}

// Layers returns the number of blocks (the KV cache's size).
func (m *decoder) Layers() int { return m.layers }

// ContextLen returns the longest sequence the model takes.
func (m *decoder) ContextLen() int { return m.context }

// Save writes the model's parameters to a safetensors checkpoint at path
// (atomically), with metadata.
func (m *decoder) Save(path string, metadata map[string]string) error {
	return nn.SaveTensors(path, m.params, metadata)
}

// Load reads the model's parameters from a safetensors checkpoint,
// checking every tensor's presence, dtype and shape before changing any,
// and returns the file's metadata.
func (m *decoder) Load(path string) (map[string]string, error) {
	return nn.LoadTensors(path, m.params)
}

// causalLM is a decoder whose head may be tied to its token embedding
// (GPT2, Llama): it adds the losses of Forward and Loss, and UntieHead.
type causalLM struct {
	decoder
	// name names the model in errors; embed is its token embedding's
	// weight; model is the model itself, whose parameters UntieHead lists
	// again.
	name  string
	embed *tensor.Tensor
	model any
}

// newCausalLM completes d as the causalLM of model, named name, with the
// token embedding weight embed.
func newCausalLM(model any, name string, embed *tensor.Tensor, d decoder) causalLM {
	d.where, d.params = name+".Forward", nn.Parameters(model)
	return causalLM{decoder: d, name: name, embed: embed, model: model}
}

// Forward runs the model on inputs [B, T] (int32 token ids, T <= Context)
// and returns the logits [B, T, Vocab] and, when targets [B, T] is not
// nil, the mean next-token cross-entropy. Errors are recorded in g (check
// g.Err); on error both results are nil.
func (m *causalLM) Forward(g *autograd.Graph, inputs, targets *tensor.Tensor) (logits, loss *tensor.Tensor) {
	logits = m.ForwardCached(g, inputs, nil)
	if logits == nil || targets == nil {
		return logits, nil
	}
	return logits, crossEntropy(g, m.name, logits, inputs, targets)
}

// Loss returns the mean next-token cross-entropy of inputs [B, T]
// against targets [B, T] with the head and the loss fused
// (autograd.LinearCrossEntropy), so the B*T x Vocab logits never exist
// whole: Forward's loss, for training at full vocabulary.
func (m *causalLM) Loss(g *autograd.Graph, inputs, targets *tensor.Tensor) *tensor.Tensor {
	loss, _ := m.LossHidden(g, inputs, targets)
	return loss
}

// LossHidden is Loss that also returns the final-norm hidden states
// [B*T, Dim] the head reads (the trainer's Hilbert-RMS panel is taken from
// them).
func (m *causalLM) LossHidden(g *autograd.Graph, inputs, targets *tensor.Tensor) (loss, hidden *tensor.Tensor) {
	return headLoss(g, m.name, m.hidden(g, inputs, nil), inputs, targets, m.head, m.dim)
}

// UntieHead gives a model whose head is tied to its token embedding a
// head of its own: a copy of the embedding (the tied head's weight now),
// named head.weight among the Parameters, so an optimizer can update the
// two apart (RowNorm on the head). Called at initialisation it changes no
// output; a head already untied is an error.
func (m *causalLM) UntieHead() error {
	e := m.embed
	if m.head.Weight != e {
		return fmt.Errorf("models: %s.UntieHead: the head is already untied", m.name)
	}
	w, err := tensor.NewOf(e.Device(), e.DType(), e.Shape()...)
	if err != nil {
		return fmt.Errorf("models: %s.UntieHead: %w", m.name, err)
	}
	e.Device().Copy(w.Buffer(), e.Buffer())
	w.SetRequiresGrad(true)
	m.head.Weight = w
	m.params = nn.Parameters(m.model)
	return nil
}
