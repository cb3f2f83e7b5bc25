"""Writes the PyTorch golden data for Hilbert's GPT-2 parity test.

Usage (from the repository root):
    /usr/bin/python3 scripts/parity/gpt2.py models/testdata/gpt2_golden.safetensors

Builds a tiny GPT-2 (the models "gpt2-tiny" shape: 2 layers, width 48 in
3 heads of 16, the smallest head the CUDA attention kernels take; vocab
64, context 16) in PyTorch, written out layer by layer as nanoGPT's
model.py has it (pre-LayerNorm blocks with biases, causal
attention, GELU with the tanh approximation, learned positions, LM head
tied to the token embedding), with separate q, k, v projections so the
parameter names match Hilbert's. Every weight, bias and LayerNorm gain is
drawn at random (not GPT-2's ones and zeros) so every path has a
non-trivial gradient. It stores, in one safetensors file:

    weight.NAME   the weights (float32), in Hilbert's parameter names
    inputs, targets   a fixed batch [2, 16] (int32)
    logits        [2, 16, 64] and loss, computed in float64
    grad.NAME     every parameter's gradient, computed in float64

Gradient errors are measured per tensor against the tensor's largest
|gradient|, floored at 1e-3 of the largest over all tensors (the key
biases' exact gradient is zero). The metadata records PyTorch's own float32 error against its float64 run
(pytorch_f32_*), the measure the Go test's tolerances are stated against.
"""
import json
import math
import sys

import numpy as np
import torch

from model import save_safetensors

CFG = {"Layers": 2, "Dim": 48, "Heads": 3, "Vocab": 64, "Context": 16}
BATCH, SEQ, SEED = 2, 16, 4321


class Attention(torch.nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.q, self.k, self.v, self.out = (torch.nn.Linear(d, d) for _ in range(4))

    def forward(self, x):
        b, t, d = x.shape
        h = lambda l: l(x).view(b, t, self.heads, d // self.heads).transpose(1, 2)
        q, k, v = h(self.q), h(self.k), h(self.v)
        s = q @ k.transpose(-2, -1) / math.sqrt(d // self.heads)
        mask = torch.ones(t, t, dtype=torch.bool).triu(1)
        s = s.masked_fill(mask, float("-inf"))
        y = torch.softmax(s, dim=-1) @ v
        return self.out(y.transpose(1, 2).reshape(b, t, d))


class Block(torch.nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.ln1 = torch.nn.LayerNorm(d)
        self.attn = Attention(d, heads)
        self.ln2 = torch.nn.LayerNorm(d)
        self.fc = torch.nn.Linear(d, 4 * d)
        self.proj = torch.nn.Linear(4 * d, d)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.proj(torch.nn.functional.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT2(torch.nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d = cfg["Dim"]
        self.tok = torch.nn.Embedding(cfg["Vocab"], d)
        self.pos = torch.nn.Embedding(cfg["Context"], d)
        self.blocks = torch.nn.ModuleList(Block(d, cfg["Heads"]) for _ in range(cfg["Layers"]))
        self.norm = torch.nn.LayerNorm(d)

    def forward(self, inputs, targets):
        t = inputs.shape[1]
        x = self.tok(inputs) + self.pos.weight[:t]
        for b in self.blocks:
            x = b(x)
        logits = self.norm(x) @ self.tok.weight.T  # the tied head
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
        return logits, loss


def run(weights, inputs, targets, dtype):
    m = GPT2(CFG).to(dtype)
    m.load_state_dict({k: torch.tensor(v, dtype=dtype) for k, v in weights.items()}, strict=True)
    logits, loss = m(torch.tensor(inputs, dtype=torch.long), torch.tensor(targets, dtype=torch.long))
    loss.backward()
    grads = {n: p.grad.double().numpy() for n, p in m.named_parameters()}
    return logits.detach().double().numpy(), loss.item(), grads


def main(out_path):
    torch.set_num_threads(1)
    torch.manual_seed(SEED)
    m = GPT2(CFG)
    weights = {}
    for n, p in m.state_dict().items():
        w = torch.randn(p.shape) * 0.3
        if n.endswith(("ln1.weight", "ln2.weight", "norm.weight")):
            w = 1 + w
        weights[n] = w.numpy().astype(np.float32)
    rng = np.random.default_rng(SEED)
    seq = rng.integers(0, CFG["Vocab"], size=(BATCH, SEQ + 1)).astype(np.int32)
    inputs, targets = seq[:, :-1].copy(), seq[:, 1:].copy()

    logits64, loss64, grads64 = run(weights, inputs, targets, torch.float64)
    logits32, loss32, grads32 = run(weights, inputs, targets, torch.float32)
    # Per tensor, relative to its largest |gradient|, floored at 1e-3 of
    # the largest over all tensors: the key biases' exact gradient is zero
    # (a shift of every score of a row), so theirs is rounding noise.
    floor = 1e-3 * max(np.abs(g).max() for g in grads64.values())
    grad_err = max(np.abs(grads32[n] - grads64[n]).max() / max(np.abs(grads64[n]).max(), floor) for n in grads64)
    logit_err = np.abs(logits32 - logits64).max() / np.abs(logits64).max()

    out = {"inputs": inputs, "targets": targets, "loss": np.array(loss64, dtype=np.float32),
           "logits": logits64.astype(np.float32)}
    for n, w in weights.items():
        out["weight." + n] = w
    for n, g in grads64.items():
        out["grad." + n] = g.astype(np.float32)
    save_safetensors(out_path, out, {
        "config": json.dumps(CFG),
        "loss_f64": repr(loss64),
        "pytorch_f32_loss_rel_err": repr(abs(loss32 - loss64) / abs(loss64)),
        "pytorch_f32_logits_max_rel_err": repr(float(logit_err)),
        "pytorch_f32_grad_max_rel_err": repr(float(grad_err)),
        "torch_version": torch.__version__,
    })
    print(f"loss f64 {loss64:.9f}  f32 {loss32:.9f}")
    print(f"PyTorch float32: logits err/max {logit_err:.3g}, grads max err/max|grad| per tensor {grad_err:.3g}")


if __name__ == "__main__":
    main(sys.argv[1])
