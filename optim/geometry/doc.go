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
// The host functions (RowDiameter, HilbertRMS) work on []float32 slices
// (row-major) and run their products on the GEMM of the device they are
// given: on the CPU (device.HostMemory) on the slices in place, so with
// cpu.New() they are the CPU's GEMM (native, OpenBLAS or gonum) on the
// caller's memory. RowDiameterDevice computes the same exact diameter on
// a device.Buffer where the step lives (CUDA, say), through the device
// interface, copying only a few values per row to the host.
//
// This package depends only on device and device/compose, never on a
// backend, tensors, autograd, nn or optim: a trainer passes a step's buffer
// (tensor.Buffer) or a host copy (tensor.Float32s) and its device.
package geometry
