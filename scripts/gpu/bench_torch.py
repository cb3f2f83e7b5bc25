"""PyTorch eager reference for `hilbert bench model` on a GPU.

Usage: python3 bench_torch.py PRESET BATCH SEQ STEPS [--device cuda|cpu] [--attention sdpa|naive]

Times forward+backward of the paper's transformer (model.py beside this
file, the same architecture Hilbert's parity test checks) under bf16
autocast, and prints one JSON line like Hilbert's bench target.

Attention: model.py computes it naively (the full T x T scores, masked,
softmax, then times V): it is the CPU parity reference and stays so. The
GPU anchor is PyTorch as it would be run, so by default (--attention
sdpa) each block's attention here calls
F.scaled_dot_product_attention(is_causal=True), which on an H200 under
bf16 autocast takes the FlashAttention-style fused kernels. Before timing,
the script checks on a small model in float32 that the SDPA and naive
attention give the same loss and gradients (it exits 1 if not).

Exits 2, saying why, when torch cannot use the device asked for or has no
scaled_dot_product_attention (torch older than 2.0).
"""
import argparse
import json
import sys
import time

try:
    import torch
    import torch.nn.functional as F
except ImportError as e:  # the check's first stage says so too
    print(f"bench_torch.py: cannot import torch: {e}", file=sys.stderr)
    sys.exit(2)

import model
from model import Transformer, rms_norm, rope

PRESETS = {
    "190m": dict(Layers=32, Dim=512),
    "380m": dict(Layers=32, Dim=768),
    "640m": dict(Layers=32, Dim=1024),
    "cpu-128": dict(Layers=4, Dim=128),
}


def sdpa_forward(self, x, cos, sin):
    """model.Attention.forward with the scores, mask, softmax and product
    replaced by one F.scaled_dot_product_attention(is_causal=True) call
    (its default scale is 1/sqrt(head dim), as model.py's)."""
    b, t, d = x.shape
    h, hd = d // self.head_dim, self.head_dim
    q = rope(rms_norm(self.q(x).view(b, t, h, hd)), cos, sin).transpose(1, 2)
    k = rope(rms_norm(self.k(x).view(b, t, h, hd)), cos, sin).transpose(1, 2)
    v = self.v(x).view(b, t, h, hd).transpose(1, 2)
    o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return self.out(o.transpose(1, 2).reshape(b, t, d))


def use_attention(m, kind):
    """Sets every block's attention of m to kind: sdpa or naive."""
    for blk in m.blocks:
        if kind == "sdpa":
            blk.attn.forward = sdpa_forward.__get__(blk.attn)
        elif "forward" in blk.attn.__dict__:
            del blk.attn.forward


def check_sdpa(dev):
    """Loss and gradients of a small float32 model, SDPA against naive."""
    cfg = dict(Layers=2, Dim=128, HeadDim=64, MLPHidden=512, Vocab=512, Context=256, RoPEBase=10000.0)
    torch.manual_seed(3)
    m = Transformer(cfg).to(dev)
    x = torch.randint(0, cfg["Vocab"], (2, 256), device=dev)
    got = {}
    for kind in ("naive", "sdpa"):
        use_attention(m, kind)
        m.zero_grad(set_to_none=True)
        loss = m(x, x)
        loss.backward()
        got[kind] = (loss.item(), torch.cat([p.grad.flatten() for p in m.parameters()]))
    (ln, gn), (ls, gs) = got["naive"], got["sdpa"]
    gerr = ((gs - gn).norm() / gn.norm()).item()
    if abs(ls - ln) > 1e-4 * abs(ln) or gerr > 1e-3:
        print(f"bench_torch.py: SDPA attention disagrees with model.py's: loss {ls} vs {ln}, gradient relative error {gerr:.2e}",
              file=sys.stderr)
        sys.exit(1)
    return abs(ls - ln), gerr


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("preset", choices=sorted(PRESETS))
    ap.add_argument("batch", type=int)
    ap.add_argument("seq", type=int)
    ap.add_argument("steps", type=int)
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--attention", default="sdpa", choices=["sdpa", "naive"])
    a = ap.parse_args()
    if a.batch < 1 or a.seq < 1 or a.steps < 1:
        ap.error(f"batch {a.batch}, seq {a.seq}, steps {a.steps}: each must be at least 1")
    if a.device == "cuda" and not torch.cuda.is_available():
        print(f"bench_torch.py: torch {torch.__version__} (CUDA {torch.version.cuda}) sees no CUDA device", file=sys.stderr)
        sys.exit(2)
    dev = torch.device(a.device)
    sdpa_check = None
    if a.attention == "sdpa":
        if not hasattr(F, "scaled_dot_product_attention"):
            print(f"bench_torch.py: torch {torch.__version__} has no F.scaled_dot_product_attention (torch 2.0 or newer); "
                  "--attention naive times model.py's attention", file=sys.stderr)
            sys.exit(2)
        loss_err, grad_err = check_sdpa(dev)
        sdpa_check = {"loss_abs_err": loss_err, "grad_rel_err": grad_err}

    p = PRESETS[a.preset]
    cfg = dict(p, HeadDim=64, MLPHidden=4 * p["Dim"], Vocab=50257, Context=max(a.seq, 2048), RoPEBase=10000.0)
    torch.manual_seed(1)
    m = Transformer(cfg).to(dev)
    use_attention(m, a.attention)
    x = torch.randint(0, cfg["Vocab"], (a.batch, a.seq), device=dev)
    y = torch.randint(0, cfg["Vocab"], (a.batch, a.seq), device=dev)

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize()

    def step():
        m.zero_grad(set_to_none=False)
        with torch.autocast(dev.type, dtype=torch.bfloat16):
            loss = m(x, y)
        loss.backward()

    step()
    sync()
    t0 = time.perf_counter()
    for _ in range(a.steps):
        step()
    sync()
    per = (time.perf_counter() - t0) / a.steps
    print(json.dumps({"target": "model", "impl": "pytorch-eager-bf16-autocast", "attention": a.attention,
                      "preset": a.preset, "batch": a.batch, "seq": a.seq, "steps": a.steps,
                      "ms_per_step": per * 1000, "tokens_per_s": a.batch * a.seq / per,
                      "device": torch.cuda.get_device_name(0) if dev.type == "cuda" else "cpu",
                      "sdpa_check": sdpa_check,
                      "torch": torch.__version__}))


if __name__ == "__main__":
    main()
