"""Writes the PyTorch golden data for Hilbert's transformer parity test.

Usage (see make_golden.sh, which also produces the weights):
    /usr/bin/python3 scripts/parity/parity.py WEIGHTS.safetensors models/testdata/parity_golden.safetensors

WEIGHTS is written by Hilbert (models test, -parity-weights flag); its
metadata holds the model config. This script loads those weights into the
PyTorch reference (model.py), runs forward and backward on a fixed batch and
stores the loss and every parameter's gradient. The reference is computed in
float64 so that the Go test measures Hilbert's float32 error against the
exact answer; the same run in float32 PyTorch is recorded in the metadata
(pytorch_f32_*) so the tolerance can be compared with PyTorch's own float32
error.
"""
import hashlib
import json
import sys

import numpy as np
import torch

from model import Transformer, load_safetensors, save_safetensors

BATCH, SEQ, BATCH_SEED = 2, 16, 1234


def run(cfg, weights, inputs, targets, dtype):
    m = Transformer(cfg, dtype)
    sd = {k: torch.tensor(v, dtype=dtype) for k, v in weights.items()}
    m.load_state_dict(sd, strict=True)
    loss = m(torch.tensor(inputs, dtype=torch.long), torch.tensor(targets, dtype=torch.long))
    loss.backward()
    return loss.item(), {n: p.grad.double().numpy() for n, p in m.named_parameters()}


def main(weights_path, out_path):
    torch.set_num_threads(1)
    weights, meta = load_safetensors(weights_path)
    cfg = json.loads(meta["config"])
    rng = np.random.default_rng(BATCH_SEED)
    seq = rng.integers(0, cfg["Vocab"], size=(BATCH, SEQ + 1)).astype(np.int32)
    inputs, targets = seq[:, :-1].copy(), seq[:, 1:].copy()

    loss64, grads64 = run(cfg, weights, inputs, targets, torch.float64)
    loss32, grads32 = run(cfg, weights, inputs, targets, torch.float32)
    # PyTorch float32 error against float64, per tensor relative to the
    # tensor's largest |gradient| (the measure the Go test uses).
    worst = max(np.abs(grads32[n] - grads64[n]).max() / np.abs(grads64[n]).max() for n in grads64)

    out = {"inputs": inputs, "targets": targets, "loss": np.array(loss64, dtype=np.float32)}
    for n, gr in grads64.items():
        out["grad." + n] = gr.astype(np.float32)
    with open(weights_path, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    save_safetensors(out_path, out, {
        "config": meta["config"],
        "weights_sha256": digest,
        "loss_f64": repr(loss64),
        "pytorch_f32_loss_abs_err": repr(abs(loss32 - loss64)),
        "pytorch_f32_grad_max_rel_err": repr(float(worst)),
        "torch_version": torch.__version__,
    })
    print(f"loss f64 {loss64:.9f}  f32 {loss32:.9f}  |diff| {abs(loss32 - loss64):.3g}")
    print(f"PyTorch float32 grads: max err / max|grad| per tensor = {worst:.3g}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
