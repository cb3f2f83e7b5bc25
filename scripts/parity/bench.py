"""Times the PyTorch reference transformer: a forward+backward pass, or with
-update the paper's full update (forward+backward, the global gradient norm
clipped at 1.0, Nesterov Muon with 5 Newton-Schulz steps on the blocks,
AdamW on the embedding, RowNorm on the head; ../shared/reference's recipe).

With -autocast the blocks run under torch.autocast("cpu", bfloat16), the
head, its loss and the optimizers in float32, as Hilbert's -autocast bf16
(PyTorch's autocast also takes the attention's two products in bfloat16,
which Hilbert's CPU attention runs in float32); -autocast-all puts the whole
forward under autocast (the head's product too), PyTorch's usual use.

Usage: /usr/bin/python3 scripts/parity/bench.py [-update] [-autocast|-autocast-all] PRESET [BATCH SEQ STEPS]
Prints one line: "<preset> pytorch <tokens/s> tokens/s ...". Presets mirror
models.Preset's small CPU presets (same architecture, vocab 50257).
"""
import contextlib
import os
import sys
import time

import torch

from model import Transformer

PRESETS = {
    "d128-l2": dict(Layers=2, Dim=128),
    "d256-l4": dict(Layers=4, Dim=256),
    "cpu-128": dict(Layers=4, Dim=128),
    "cpu-256": dict(Layers=8, Dim=256),
}


def newton_schulz(g, steps=5, eps=1e-5):
    """The paper's quintic Newton-Schulz orthogonalisation, in float32."""
    x = g.t() if g.shape[0] > g.shape[1] else g
    x = x / (x.norm() + eps)
    a, b, c = 3.4445, -4.7750, 2.0315
    for _ in range(steps):
        m = x @ x.t()
        x = a * x + (b * m + c * m @ m) @ x
    return x.t() if g.shape[0] > g.shape[1] else x


class PaperUpdate:
    """The paper's optimizer recipe at scale 1 of the schedule: Muon (8e-3,
    momentum 0.95, Nesterov, weight decay 0.1) on the block matrices, AdamW
    (4e-3, betas 0.9/0.999, eps 1e-10, weight decay 0.1) on the embedding,
    RowNorm (3.2e-3 * 512/d, beta 0.95, eps 1e-8) on the head."""

    def __init__(self, m, d, scale=0.5):
        self.m, self.scale = m, scale
        self.blocks = [p for p in m.blocks.parameters()]
        self.bufs = [torch.zeros_like(p) for p in self.blocks]
        self.adamw = torch.optim.AdamW([m.embed.weight], lr=4e-3 * scale, betas=(0.9, 0.999), eps=1e-10, weight_decay=0.1)
        self.head_lr = 3.2e-3 * 512 / d * scale
        self.head_buf = torch.zeros_like(m.head.weight)
        self.t = 0

    @torch.no_grad()
    def step(self):
        torch.nn.utils.clip_grad_norm_(self.m.parameters(), 1.0, error_if_nonfinite=True)
        lr = 8e-3 * self.scale
        for p, buf in zip(self.blocks, self.bufs):
            buf.mul_(0.95).add_(p.grad)
            u = newton_schulz(p.grad + 0.95 * buf)
            u *= max(1.0, p.shape[0] / p.shape[1]) ** 0.5
            p.mul_(1 - lr * 0.1).sub_(lr * u)
        self.adamw.step()
        self.t += 1
        self.head_buf.mul_(0.95).add_(0.05 * self.m.head.weight.grad)
        bhat = self.head_buf / (1 - 0.95 ** self.t)
        u = bhat / (bhat.norm(dim=1, keepdim=True) + 1e-8)
        self.m.head.weight.sub_(self.head_lr * u)


def main():
    args = sys.argv[1:]
    update = "-update" in args
    autocast = "-autocast" in args or "-autocast-all" in args
    whole = "-autocast-all" in args
    args = [a for a in args if a not in ("-update", "-autocast", "-autocast-all")]
    preset = args[0]
    batch, seq, steps = (int(a) for a in (args[1:4] if len(args) > 1 else (8, 256, 3)))
    torch.set_num_threads(int(os.environ.get("THREADS", os.cpu_count())))
    p = PRESETS[preset]
    cfg = dict(p, HeadDim=64, MLPHidden=4 * p["Dim"], Vocab=50257, Context=256, RoPEBase=10000.0)
    torch.manual_seed(1)
    m = Transformer(cfg)
    x = torch.randint(0, cfg["Vocab"], (batch, seq))
    y = torch.randint(0, cfg["Vocab"], (batch, seq))

    opt = PaperUpdate(m, p["Dim"]) if update else None

    def cast():
        return torch.autocast("cpu", dtype=torch.bfloat16) if autocast else contextlib.nullcontext()

    def step():
        m.zero_grad(set_to_none=False)
        if whole:
            with cast():
                loss = m(x, y)
        else:
            loss = m(x, y, blocks_context=cast)
        loss.backward()
        if opt is not None:
            opt.step()

    step()  # warm up
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    dt = (time.perf_counter() - t0) / steps
    what = "update" if update else "forward+backward"
    if autocast:
        what += ", bf16 autocast of the " + ("whole forward" if whole else "blocks")
    print(f"{preset} pytorch {batch * seq / dt:.1f} tokens/s ({dt * 1000:.0f} ms/step, {torch.get_num_threads()} threads, torch {torch.__version__}, {what})")


if __name__ == "__main__":
    main()
