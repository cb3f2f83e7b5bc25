// Package nn holds the building blocks a user composes into models:
// Linear (optional bias), Embedding, LayerNorm (optional bias), RMSNorm
// (optional gain), Dropout with a train/eval mode set once on a module
// tree (SetTraining), activations (ReLU, GELU, GELUTanh, SiLU), rotary
// position embedding, multi-head self-attention (SelfAttention: causal,
// masks, QK-norm and RoPE as options, with a KV cache for generation) and
// init helpers, plus the module convention that names a model's
// parameters and saves and loads them as safetensors checkpoints. Whole
// models, and the blocks only one model uses (the paper's pre-norm block
// with its SwiGLU MLP), live in package models.
//
// # Module convention
//
// A module is a plain Go struct. Its parameters are exported
// *tensor.Tensor fields; its sub-modules are exported fields holding
// structs (or pointers to structs), and repeated sub-modules are slices or
// arrays of them. Parameters walks a module by reflection and names every
// parameter by its path: the field's `nn:"name"` tag or else its
// lower-cased Go name, with slice elements indexed, as in
// "blocks.3.attn.q.weight". A field tagged `nn:"-"`, an unexported field,
// and fields of any other type (ints, floats, maps, funcs) are not
// parameters. A tensor reachable under two names (a tied weight) is one
// parameter under its first name (Tied lists the others). Forward methods take the autograd.Graph explicitly and
// return nil once the graph holds an error (check g.Err).
//
//	type MLPLM struct {
//	    Embed nn.Embedding
//	    Hidden []nn.Linear
//	    Head  nn.Linear
//	}
//	params := nn.Parameters(&model) // embed.weight, hidden.0.weight, ..., head.weight
//
// This package builds on autograd, tensor, device and safetensors. It must
// not import models, optim, data or anything above them.
package nn
