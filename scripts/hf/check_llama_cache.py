"""Checks hfref.llama_forward's KV cache (the path bench.py's generate
--model llama times): a prompt of 4 positions then single positions through
the cache give the logits of one forward over all 9, in float64, for a
random grouped-query Llama (6 heads over 2 key and value heads); and last=True
gives the last position's. Run with Debian's python3-torch:

    /usr/bin/python3 scripts/hf/check_llama_cache.py
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hfref  # noqa: E402

torch.manual_seed(0)
V, d, H, KV, L = 97, 48, 6, 2, 2
hd = d // H
g = lambda *s: torch.randn(*s, dtype=torch.float64) * 0.2
sd = {"model.embed_tokens.weight": g(V, d), "model.norm.weight": 1 + g(d)}
for i in range(L):
    p = f"model.layers.{i}."
    sd.update({p + "input_layernorm.weight": 1 + g(d), p + "self_attn.q_proj.weight": g(H * hd, d),
               p + "self_attn.k_proj.weight": g(KV * hd, d), p + "self_attn.v_proj.weight": g(KV * hd, d),
               p + "self_attn.o_proj.weight": g(d, H * hd), p + "post_attention_layernorm.weight": 1 + g(d),
               p + "mlp.gate_proj.weight": g(64, d), p + "mlp.up_proj.weight": g(64, d), p + "mlp.down_proj.weight": g(d, 64)})
cfg = {"hidden_size": d, "num_attention_heads": H, "num_key_value_heads": KV, "num_hidden_layers": L, "rms_norm_eps": 1e-5, "rope_theta": 10000.0}
ids = torch.randint(0, V, (3, 9))
full = hfref.llama_forward(sd, cfg, ids, torch.float64, False)
past = [None] * L
parts = [hfref.llama_forward(sd, cfg, ids[:, :4], torch.float64, False, past)]
for t in range(4, 9):
    parts.append(hfref.llama_forward(sd, cfg, ids[:, t:t+1], torch.float64, False, past))
cached = torch.cat(parts, dim=1)
last = hfref.llama_forward(sd, cfg, ids, torch.float64, False, None, last=True)
diff, ldiff = (cached - full).abs().max().item(), (last[:, 0] - full[:, -1]).abs().max().item()
print(f"cached vs one forward: max |diff| {diff:.3g}; last position: {ldiff:.3g}; cache {tuple(past[0][0].shape)}")
if not (diff < 1e-12 and ldiff < 1e-12 and past[0][0].shape == (3, KV, 9, hd)):
    sys.exit("llama_forward's KV cache does not match the full forward")
