// Package geometry holds the paper's measurements of an LM-head update in
// the geometry that softmax induces on logits: the Hilbert distance
// between logit vectors, the exact row diameter D(S) of a step S (V x d),
// and the Hilbert RMS of a step over a fixed panel of hidden states.
//
// For a step S of the head U (V x d) and a hidden state h, the logits move
// by S h, and the softmax distribution moves by the Hilbert distance
// ||S h||_var = max_i (S h)_i - min_i (S h)_i <= D(S) ||h||, where
// D(S) = max_{i<j} ||s_i - s_j||_2 is the diameter of S's rows.
//
// Everything here works on host []float32 slices (row-major) and uses the
// framework's GEMM (device/cpu.Sgemm: OpenBLAS when present). It depends
// only on device/cpu, never on tensors, autograd, nn or optim: a trainer
// copies a step to the host (tensor.Float32s) and calls in.
package geometry
