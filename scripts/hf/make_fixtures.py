"""Writes the Hugging Face checkpoint fixtures of package models/hf.

Usage (from the repository root):
    /usr/bin/python3 scripts/hf/make_fixtures.py models/hf/testdata

Each fixture is a directory in Hugging Face's exact layout (config.json
plus model.safetensors, or shards and model.safetensors.index.json) with
random weights, and a golden.json computed by hfref.py's forwards from
the files as written (read back, so the golden sees the stored values):

    gpt2          GPT2LMHeadModel, F32, names without a prefix as on the
                  Hub, attn.bias / attn.masked_bias buffers, no lm_head
    gpt2-bf16     the same weights in BF16, names under transformer.,
                  lm_head.weight present (tied: equal to wte)
    llama         LlamaForCausalLM, F32, 4 heads over 2 KV heads (GQA),
                  untied lm_head
    llama-bf16    the same weights in BF16
    llama-sharded the same F32 weights in two shards with an index
    qwen2         Qwen2ForCausalLM, F16, q/k/v biases, 1 KV head, tied
                  embeddings, rope_theta 1e6
    llama3-scaled LlamaForCausalLM, F32, tied embeddings, rope_scaling of
                  rope_type llama3 (rope_theta 100 puts one frequency in
                  each of the kept and the interpolated bands)

golden.json holds tokens [2, 9]; logits64 (float64 reference, flat
[2, 7, vocab]) and loss64 (the *ForCausalLM loss with labels = tokens);
logits32 and loss32 from transformers' float32 code as written
(hf_exact, see hfref.py); prompt (8 tokens), greedy (30 greedy tokens,
equal under both references) and the smallest top-1/top-2 logit gap met
while generating (gap64), so a test knows the margin it has.

Weights are drawn at a large scale (std 0.3, norms 1 + 0.1 N) so that
logits spread over several units and greedy decoding has clear winners.
"""
import json
import os
import sys

import torch

import hfref

# SEQ - 1 = 8: the loss averages 2 x 8 = 16 rows, a power of two, chosen
# when autograd scaled a float64 mean by a float32 reciprocal (1/12 cost
# 3e-8 relative); its reciprocal is exact in float64 now.
VOCAB, BATCH, SEQ, PROMPT, NEW = 64, 2, 9, 8, 30

GPT2_CONFIG = {
    "activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"], "attn_pdrop": 0.1,
    "bos_token_id": VOCAB - 1, "embd_pdrop": 0.1, "eos_token_id": VOCAB - 1, "initializer_range": 0.02,
    "layer_norm_epsilon": 1e-05, "model_type": "gpt2", "n_ctx": 40, "n_embd": 16, "n_head": 4,
    "n_inner": None, "n_layer": 2, "n_positions": 40, "reorder_and_upcast_attn": False, "resid_pdrop": 0.1,
    "scale_attn_by_inverse_layer_idx": False, "scale_attn_weights": True, "summary_activation": None,
    "summary_first_dropout": 0.1, "summary_proj_to_labels": True, "summary_type": "cls_index",
    "summary_use_proj": True, "torch_dtype": "float32", "transformers_version": "4.46.0", "use_cache": True,
    "vocab_size": VOCAB,
}

LLAMA_CONFIG = {
    "architectures": ["LlamaForCausalLM"], "attention_bias": False, "attention_dropout": 0.0, "bos_token_id": 1,
    "eos_token_id": 2, "head_dim": 4, "hidden_act": "silu", "hidden_size": 16, "initializer_range": 0.02,
    "intermediate_size": 40, "max_position_embeddings": 64, "mlp_bias": False, "model_type": "llama",
    "num_attention_heads": 4, "num_hidden_layers": 2, "num_key_value_heads": 2, "pretraining_tp": 1,
    "rms_norm_eps": 1e-05, "rope_scaling": None, "rope_theta": 10000.0, "tie_word_embeddings": False,
    "torch_dtype": "float32", "transformers_version": "4.46.0", "use_cache": True, "vocab_size": VOCAB,
}

QWEN2_CONFIG = {
    "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 1, "eos_token_id": 2,
    "hidden_act": "silu", "hidden_size": 16, "initializer_range": 0.02, "intermediate_size": 40,
    "max_position_embeddings": 64, "max_window_layers": 2, "model_type": "qwen2", "num_attention_heads": 4,
    "num_hidden_layers": 2, "num_key_value_heads": 1, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
    "sliding_window": 64, "tie_word_embeddings": True, "torch_dtype": "float16",
    "transformers_version": "4.46.0", "use_cache": True, "use_sliding_window": False, "vocab_size": VOCAB,
}


def randn(gen, *shape, std=0.3):
    return (torch.randn(*shape, generator=gen, dtype=torch.float64) * std).to(torch.float32)


def gain(gen, n):
    return (1 + torch.randn(n, generator=gen, dtype=torch.float64) * 0.1).to(torch.float32)


def gpt2_weights(cfg, gen):
    d, L, ctx = cfg["n_embd"], cfg["n_layer"], cfg["n_positions"]
    sd = {"wte.weight": randn(gen, VOCAB, d), "wpe.weight": randn(gen, ctx, d)}
    for i in range(L):
        p = f"h.{i}."
        sd[p + "ln_1.weight"], sd[p + "ln_1.bias"] = gain(gen, d), randn(gen, d, std=0.1)
        sd[p + "attn.bias"] = torch.tril(torch.ones(ctx, ctx)).view(1, 1, ctx, ctx)
        sd[p + "attn.masked_bias"] = torch.tensor(-1e4)
        sd[p + "attn.c_attn.weight"], sd[p + "attn.c_attn.bias"] = randn(gen, d, 3 * d), randn(gen, 3 * d, std=0.1)
        sd[p + "attn.c_proj.weight"], sd[p + "attn.c_proj.bias"] = randn(gen, d, d), randn(gen, d, std=0.1)
        sd[p + "ln_2.weight"], sd[p + "ln_2.bias"] = gain(gen, d), randn(gen, d, std=0.1)
        sd[p + "mlp.c_fc.weight"], sd[p + "mlp.c_fc.bias"] = randn(gen, d, 4 * d), randn(gen, 4 * d, std=0.1)
        sd[p + "mlp.c_proj.weight"], sd[p + "mlp.c_proj.bias"] = randn(gen, 4 * d, d), randn(gen, d, std=0.1)
    sd["ln_f.weight"], sd["ln_f.bias"] = gain(gen, d), randn(gen, d, std=0.1)
    return sd


def llama_weights(cfg, gen, qkv_bias=False):
    d, L, f = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["intermediate_size"]
    h, kv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = cfg.get("head_dim") or d // h
    sd = {"model.embed_tokens.weight": randn(gen, VOCAB, d)}
    for i in range(L):
        p = f"model.layers.{i}."
        sd[p + "input_layernorm.weight"] = gain(gen, d)
        for n, rows in (("q_proj", h * hd), ("k_proj", kv * hd), ("v_proj", kv * hd)):
            sd[p + f"self_attn.{n}.weight"] = randn(gen, rows, d)
            if qkv_bias:
                sd[p + f"self_attn.{n}.bias"] = randn(gen, rows, std=0.1)
        sd[p + "self_attn.o_proj.weight"] = randn(gen, d, h * hd)
        sd[p + "post_attention_layernorm.weight"] = gain(gen, d)
        sd[p + "mlp.gate_proj.weight"] = randn(gen, f, d)
        sd[p + "mlp.up_proj.weight"] = randn(gen, f, d)
        sd[p + "mlp.down_proj.weight"] = randn(gen, d, f)
    sd["model.norm.weight"] = gain(gen, d)
    if not cfg["tie_word_embeddings"]:
        sd["lm_head.weight"] = randn(gen, VOCAB, d)
    return sd


def write_dir(d, cfg, sd, dtype, shards=1):
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
        f.write("\n")
    meta = {"format": "pt"}
    if shards == 1:
        hfref.save_safetensors(os.path.join(d, "model.safetensors"), sd, dtype, meta)
        return
    names = list(sd)
    per = (len(names) + shards - 1) // shards
    weight_map, total = {}, 0
    for s in range(shards):
        fn = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        part = {n: sd[n] for n in names[s * per:(s + 1) * per]}
        hfref.save_safetensors(os.path.join(d, fn), part, dtype, meta)
        for n, t in part.items():
            weight_map[n] = fn
            total += t.numel() * 4
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2, sort_keys=True)
        f.write("\n")


def golden(d, tokens, prompt):
    """Reads the fixture back and writes its golden.json."""
    cfg, sd = hfref.load_dir(d)
    l64 = hfref.forward(cfg, sd, tokens, torch.float64, hf_exact=False)
    l32 = hfref.forward(cfg, sd, tokens, torch.float32, hf_exact=True)
    g64, gap64 = hfref.greedy(cfg, sd, prompt, NEW, torch.float64, hf_exact=False)
    g32, gap32 = hfref.greedy(cfg, sd, prompt, NEW, torch.float32, hf_exact=True)
    if g64 != g32:
        raise SystemExit(f"{d}: float32 and float64 greedy tokens differ: {g64} {g32}")
    rel32 = float((l32.double() - l64).abs().max() / l64.abs().max())
    out = {
        "tokens": tokens.tolist(),
        "logits64": [float(x) for x in l64.flatten()],
        "loss64": float(hfref.lm_loss(l64, tokens)),
        "logits32": [float(x) for x in l32.flatten()],
        "loss32": float(hfref.lm_loss(l32, tokens)),
        "pytorch_f32_logits_max_rel_err": rel32,
        "prompt": prompt,
        "greedy": g64,
        "gap64": gap64,
    }
    with open(os.path.join(d, "golden.json"), "w") as f:
        json.dump(out, f)
        f.write("\n")
    print(f"{d}: loss {out['loss64']:.6f}, float32 logits rel err {rel32:.2g}, greedy gap {gap64:.3g}")


def main():
    root = sys.argv[1]
    gen = torch.Generator().manual_seed(2212)
    tokens = torch.randint(0, VOCAB, (BATCH, SEQ), generator=gen)
    prompt = torch.randint(0, VOCAB, (PROMPT,), generator=gen).tolist()

    g = gpt2_weights(GPT2_CONFIG, gen)
    write_dir(os.path.join(root, "gpt2"), GPT2_CONFIG, g, "F32")
    prefixed = {"transformer." + k: v for k, v in g.items() if not k.endswith((".attn.bias", ".attn.masked_bias"))}
    prefixed["lm_head.weight"] = g["wte.weight"]
    write_dir(os.path.join(root, "gpt2-bf16"), dict(GPT2_CONFIG, torch_dtype="bfloat16"), prefixed, "BF16")

    ll = llama_weights(LLAMA_CONFIG, gen)
    write_dir(os.path.join(root, "llama"), LLAMA_CONFIG, ll, "F32")
    write_dir(os.path.join(root, "llama-bf16"), dict(LLAMA_CONFIG, torch_dtype="bfloat16"), ll, "BF16")
    write_dir(os.path.join(root, "llama-sharded"), LLAMA_CONFIG, ll, "F32", shards=2)

    q = llama_weights(QWEN2_CONFIG, gen, qkv_bias=True)
    write_dir(os.path.join(root, "qwen2"), QWEN2_CONFIG, q, "F16")

    l3cfg = dict(LLAMA_CONFIG, tie_word_embeddings=True, rope_theta=100.0, rope_scaling={
        "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
        "original_max_position_embeddings": 64, "rope_type": "llama3"})
    write_dir(os.path.join(root, "llama3-scaled"), l3cfg, llama_weights(l3cfg, gen), "F32")

    for name in ("gpt2", "gpt2-bf16", "llama", "llama-bf16", "llama-sharded", "qwen2", "llama3-scaled"):
        golden(os.path.join(root, name), tokens, prompt)


if __name__ == "__main__":
    main()
