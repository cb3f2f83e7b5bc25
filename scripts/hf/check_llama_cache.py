"""Checks hfref.llama_forward's KV cache (the path bench.py's generate
--model llama times) on make_fixtures.py's Llama (4 heads over 2 key and
value heads, untied head) and Qwen2 (one key and value head, q/k/v
biases, tied) with their random weights: a prompt of 4 positions then
single positions through the cache give the logits of one forward over all
9, in float64; and last=True gives the last position's. Run with Debian's
python3-torch:

    /usr/bin/python3 scripts/hf/check_llama_cache.py
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hfref  # noqa: E402
from make_fixtures import LLAMA_CONFIG, QWEN2_CONFIG, VOCAB, llama_weights  # noqa: E402

gen = torch.Generator().manual_seed(0)
ids = torch.randint(0, VOCAB, (3, 9), generator=gen)
for name, cfg, bias in (("llama", LLAMA_CONFIG, False), ("qwen2", QWEN2_CONFIG, True)):
    sd = llama_weights(cfg, gen, qkv_bias=bias)
    f64 = lambda x, past=None, last=False: hfref.llama_forward(sd, cfg, x, torch.float64, False, past, last)
    full = f64(ids)
    past = [None] * cfg["num_hidden_layers"]
    cached = torch.cat([f64(ids[:, :4], past)] + [f64(ids[:, t:t + 1], past) for t in range(4, 9)], dim=1)
    diff = (cached - full).abs().max().item()
    ldiff = (f64(ids, last=True)[:, 0] - full[:, -1]).abs().max().item()
    hd = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    want = (3, cfg["num_key_value_heads"], 9, hd)
    print(f"{name}: cached vs one forward: max |diff| {diff:.3g}; last position: {ldiff:.3g}; cache {tuple(past[0][0].shape)}")
    if not (diff < 1e-12 and ldiff < 1e-12 and past[0][0].shape == want):
        sys.exit(f"{name}: llama_forward's KV cache does not match the full forward (cache shape want {want})")
