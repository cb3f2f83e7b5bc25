"""Times a forward+backward pass of the PyTorch reference transformer.

Usage: /usr/bin/python3 scripts/parity/bench.py PRESET [BATCH SEQ STEPS]
Prints one line: "<preset> pytorch <tokens/s> tokens/s". Presets mirror
models.Preset's small CPU presets (same architecture, vocab 50257).
"""
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


def main():
    preset = sys.argv[1]
    batch, seq, steps = (int(a) for a in (sys.argv[2:5] if len(sys.argv) > 2 else (8, 256, 3)))
    torch.set_num_threads(int(os.environ.get("THREADS", os.cpu_count())))
    p = PRESETS[preset]
    cfg = dict(p, HeadDim=64, MLPHidden=4 * p["Dim"], Vocab=50257, Context=256, RoPEBase=10000.0)
    torch.manual_seed(1)
    m = Transformer(cfg)
    x = torch.randint(0, cfg["Vocab"], (batch, seq))
    y = torch.randint(0, cfg["Vocab"], (batch, seq))

    def step():
        m.zero_grad(set_to_none=False)
        m(x, y).backward()

    step()  # warm up
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    dt = (time.perf_counter() - t0) / steps
    print(f"{preset} pytorch {batch * seq / dt:.1f} tokens/s ({dt * 1000:.0f} ms/step, {torch.get_num_threads()} threads, torch {torch.__version__})")


if __name__ == "__main__":
    main()
