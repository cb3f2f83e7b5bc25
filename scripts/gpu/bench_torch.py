"""PyTorch eager reference for `hilbert bench model` on a GPU.

Usage: python3 bench_torch.py PRESET BATCH SEQ STEPS
Times forward+backward of the paper's transformer (model.py beside this
file, the same architecture Hilbert's parity test checks) under bf16
autocast on CUDA, and prints one JSON line like Hilbert's bench target.
"""
import json
import sys
import time

import torch

from model import Transformer

PRESETS = {
    "190m": dict(Layers=32, Dim=512),
    "380m": dict(Layers=32, Dim=768),
    "640m": dict(Layers=32, Dim=1024),
    "cpu-128": dict(Layers=4, Dim=128),
}


def main():
    preset, batch, seq, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    p = PRESETS[preset]
    cfg = dict(p, HeadDim=64, MLPHidden=4 * p["Dim"], Vocab=50257, Context=max(seq, 2048), RoPEBase=10000.0)
    torch.manual_seed(1)
    m = Transformer(cfg).cuda()
    x = torch.randint(0, cfg["Vocab"], (batch, seq), device="cuda")
    y = torch.randint(0, cfg["Vocab"], (batch, seq), device="cuda")

    def step():
        m.zero_grad(set_to_none=False)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = m(x, y)
        loss.backward()

    step()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    torch.cuda.synchronize()
    per = (time.perf_counter() - t0) / steps
    print(json.dumps({"target": "model", "impl": "pytorch-eager-bf16-autocast", "preset": preset, "batch": batch,
                      "seq": seq, "ms_per_step": per * 1000, "tokens_per_s": batch * seq / per,
                      "torch": torch.__version__}))


if __name__ == "__main__":
    main()
