"""Hugging Face-exact GPT2LMHeadModel and LlamaForCausalLM forwards in
PyTorch, without the transformers library, plus a safetensors reader and
writer (F32, F16, BF16) for checkpoints in Hugging Face's layout.

The forwards are written from transformers' modeling_gpt2.py and
modeling_llama.py (eager attention) over a state dict with Hugging Face's
tensor names:

GPT-2: wte, wpe, h.N.{ln_1, attn.c_attn, attn.c_proj, ln_2, mlp.c_fc,
mlp.c_proj}, ln_f; Conv1D weights are [in, out] (y = x W + b); c_attn
holds q, k and v side by side; gelu_new; scores divided by
sqrt(head_dim); the causal mask fills with finfo.min; the LM head is the
token embedding.

Llama (and Mistral, Qwen2): model.embed_tokens, model.layers.N.{
input_layernorm, self_attn.{q,k,v,o}_proj, post_attention_layernorm,
mlp.{gate,up,down}_proj}, model.norm, lm_head (or the embedding when
tie_word_embeddings); RoPE by rotate_half with cos/sin = cat(freqs,
freqs), inv_freq = 1 / theta^(2i/head_dim) (rescaled by rope_scaling of
rope_type llama3 as Llama 3.1/3.2 do); grouped-query attention by
repeat_kv; scores times head_dim^-0.5; SwiGLU MLP; RMSNorm
weight * (x * rsqrt(mean(x^2) + eps)); Qwen2's q/k/v biases
(attention_bias in Llama gives o_proj one too).

Precision. With hf_exact (the float32 reference) the forward is
transformers' code as written, including its float32 islands: RMSNorm
casts its input to float32 and back, the softmax runs with
dtype=float32, and the RoPE tables are computed in float32 and cast to
the activations' dtype. Those islands exist for half-precision
activations; at float64 they would be downcasts that cap the reference
at float32 accuracy, so the float64 reference (hf_exact False) keeps them
in float64. At float32 both are the same computation.
"""
import json
import math
import os
import struct

import numpy as np
import torch

DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16, "F64": torch.float64}


# ---------------------------------------------------------------- safetensors

def save_safetensors(path, tensors, dtype="F32", metadata=None):
    """Writes an ordered dict name -> torch tensor, every float tensor
    stored as dtype (F32, F16 or BF16; values rounded to nearest even)."""
    header = {}
    if metadata:
        header["__metadata__"] = {k: str(v) for k, v in metadata.items()}
    blobs, off = [], 0
    for name, t in tensors.items():
        t = t.detach().contiguous()
        if t.is_floating_point():
            st = dtype
            t = t.to(DTYPES[dtype])
        elif t.dtype == torch.int32:
            st = "I32"
        elif t.dtype == torch.bool:
            st = "BOOL"
        else:
            raise ValueError(f"{name}: dtype {t.dtype}")
        if t.dtype in (torch.bfloat16, torch.float16):
            b = t.view(torch.int16).numpy().astype("<i2").tobytes()
        elif t.dtype == torch.bool:
            b = t.numpy().astype(np.uint8).tobytes()
        else:
            b = t.numpy().astype(t.numpy().dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": st, "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def load_safetensors(path):
    """Reads a safetensors file into an ordered dict name -> torch tensor
    (floats widened exactly to float64) and returns it with its dtypes."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    header.pop("__metadata__", None)
    out, dtypes = {}, {}
    for name, e in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
        b = data[e["data_offsets"][0]:e["data_offsets"][1]]
        dt = e["dtype"]
        if dt in ("F16", "BF16"):
            a = torch.from_numpy(np.frombuffer(b, dtype="<i2").copy()).view(DTYPES[dt])
        elif dt in ("F32", "F64"):
            a = torch.from_numpy(np.frombuffer(b, dtype="<f4" if dt == "F32" else "<f8").copy())
        elif dt == "BOOL":
            a = torch.from_numpy(np.frombuffer(b, dtype=np.uint8).copy()).bool()
        else:
            raise ValueError(f"{path}: {name}: dtype {dt}")
        a = a.reshape(e["shape"])
        out[name] = a.to(torch.float64) if a.is_floating_point() else a
        dtypes[name] = dt
    return out, dtypes


def load_dir(d):
    """Reads a Hugging Face model directory: config.json and
    model.safetensors or the shards of model.safetensors.index.json."""
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    index = os.path.join(d, "model.safetensors.index.json")
    sd = {}
    if os.path.exists(index):
        with open(index) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    for fn in files:
        sd.update(load_safetensors(os.path.join(d, fn))[0])
    return cfg, sd


def strip_prefix(sd, prefix):
    return {k[len(prefix):] if k.startswith(prefix) else k: v for k, v in sd.items()}


# ---------------------------------------------------------------- GPT-2

def gelu_new(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


def cached_len(past):
    """The positions a KV cache (see gpt2_forward) holds: 0 for none."""
    return past[0][0].shape[2] if past and past[0] is not None else 0


def cache_kv(past, i, k, v):
    """Appends layer i's new keys and values [B, heads, T, head_dim] to the
    KV cache past (when given; torch.cat, as transformers' caches do) and
    returns all the layer holds."""
    if past is None:
        return k, v
    if past[i] is not None:
        k, v = torch.cat((past[i][0], k), dim=-2), torch.cat((past[i][1], v), dim=-2)
    past[i] = (k, v)
    return k, v


def gpt2_forward(sd, cfg, ids, dt, past=None, last=False):
    """Logits [B, T, V] of GPT2LMHeadModel for ids [B, T] in dtype dt
    (with last, of the last position alone, [B, 1, V]: transformers'
    logits_to_keep=1, as its generate asks for).

    past, when given, is the KV cache (transformers' past_key_values): a
    list with one entry per layer, None before the first call, then the
    layer's (keys, values) [B, heads, positions, head_dim]. ids are the
    positions after those cached, and their keys and values are appended
    (torch.cat, as transformers' GPT2Attention does)."""
    sd = strip_prefix(sd, "transformer.")
    W = lambda n: sd[n].to(dt)
    b, t = ids.shape
    d, heads, eps = cfg["n_embd"], cfg["n_head"], cfg["layer_norm_epsilon"]
    hd = d // heads
    start = cached_len(past)
    h = W("wte.weight")[ids] + W("wpe.weight")[torch.arange(start, start + t)][None]
    causal = torch.tril(torch.ones(t, start + t, dtype=torch.bool), diagonal=start)
    split = lambda x: x.view(b, t, heads, hd).permute(0, 2, 1, 3)
    for i in range(cfg["n_layer"]):
        p = f"h.{i}."
        a = torch.nn.functional.layer_norm(h, (d,), W(p + "ln_1.weight"), W(p + "ln_1.bias"), eps)
        qkv = torch.addmm(W(p + "attn.c_attn.bias"), a.view(-1, d), W(p + "attn.c_attn.weight")).view(b, t, 3 * d)
        q, k, v = (split(x) for x in qkv.split(d, dim=2))
        k, v = cache_kv(past, i, k, v)
        w = torch.matmul(q, k.transpose(-1, -2))
        w = w / torch.full([], v.size(-1) ** 0.5, dtype=w.dtype)
        w = torch.where(causal, w, torch.full([], torch.finfo(w.dtype).min, dtype=w.dtype))
        w = torch.softmax(w, dim=-1).type(v.dtype)
        o = torch.matmul(w, v).permute(0, 2, 1, 3).contiguous().view(b, t, d)
        o = torch.addmm(W(p + "attn.c_proj.bias"), o.view(-1, d), W(p + "attn.c_proj.weight")).view(b, t, d)
        h = h + o
        m = torch.nn.functional.layer_norm(h, (d,), W(p + "ln_2.weight"), W(p + "ln_2.bias"), eps)
        m = gelu_new(torch.addmm(W(p + "mlp.c_fc.bias"), m.view(-1, d), W(p + "mlp.c_fc.weight")))
        m = torch.addmm(W(p + "mlp.c_proj.bias"), m, W(p + "mlp.c_proj.weight")).view(b, t, d)
        h = h + m
    h = torch.nn.functional.layer_norm(h, (d,), W("ln_f.weight"), W("ln_f.bias"), eps)
    if last:
        h = h[:, -1:]
    head = sd["lm_head.weight"].to(dt) if "lm_head.weight" in sd else W("wte.weight")
    return h @ head.T


# ---------------------------------------------------------------- Llama

def rms_norm(x, w, eps, hf_exact):
    if hf_exact:
        dt = x.dtype
        x = x.to(torch.float32)
        var = x.pow(2).mean(-1, keepdim=True)
        x = x * torch.rsqrt(var + eps)
        return w * x.to(dt)
    return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def rope_tables(cfg, t, dt, hf_exact):
    hd = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    theta = cfg.get("rope_theta", 10000.0)
    ct = torch.float32 if hf_exact else torch.float64
    inv_freq = 1.0 / (theta ** (torch.arange(0, hd, 2, dtype=torch.int64).to(ct) / hd))
    sc = cfg.get("rope_scaling")
    if sc:
        # transformers' _compute_llama3_parameters
        assert sc["rope_type"] == "llama3"
        factor, lo, hi = sc["factor"], sc["low_freq_factor"], sc["high_freq_factor"]
        old = sc["original_max_position_embeddings"]
        low_wavelen, high_wavelen = old / lo, old / hi
        wavelen = 2 * math.pi / inv_freq
        inv_freq_llama = torch.where(wavelen > low_wavelen, inv_freq / factor, inv_freq)
        smooth = (old / wavelen - lo) / (hi - lo)
        smoothed = (1 - smooth) * inv_freq_llama / factor + smooth * inv_freq_llama
        medium = ~(wavelen < high_wavelen) * ~(wavelen > low_wavelen)
        inv_freq = torch.where(medium, smoothed, inv_freq_llama)
    pos = torch.arange(t).to(ct)
    freqs = (inv_freq[:, None] @ pos[None, :]).T  # [T, hd/2]
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(dt), emb.sin().to(dt)


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def repeat_kv(x, n):
    b, h, t, d = x.shape
    if n == 1:
        return x
    return x[:, :, None, :, :].expand(b, h, n, t, d).reshape(b, h * n, t, d)


def llama_forward(sd, cfg, ids, dt, hf_exact, past=None, last=False):
    """Logits [B, T, V] of LlamaForCausalLM (Mistral, Qwen2) for ids
    [B, T] in dtype dt (see the module comment for hf_exact); with last,
    of the last position alone.

    past, when given, is the KV cache as gpt2_forward's: per layer None,
    then (keys, values) [B, kv heads, positions, head_dim], the keys
    rotated and both before repeat_kv (as transformers' DynamicCache holds
    them); ids are the positions after those cached."""
    W = lambda n: sd[n].to(dt)
    B = lambda n: sd[n].to(dt) if n in sd else 0.0
    b, t = ids.shape
    heads, kv = cfg["num_attention_heads"], cfg.get("num_key_value_heads") or cfg["num_attention_heads"]
    hd = cfg.get("head_dim") or cfg["hidden_size"] // heads
    eps = cfg["rms_norm_eps"]
    start = cached_len(past)
    cos, sin = rope_tables(cfg, start + t, dt, hf_exact)
    cos, sin = cos[None, None, start:], sin[None, None, start:]
    mask = torch.full((t, start + t), torch.finfo(dt).min, dtype=dt).triu(start + 1)
    x = W("model.embed_tokens.weight")[ids]
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        r = rms_norm(x, W(p + "input_layernorm.weight"), eps, hf_exact)
        proj = lambda n, nh: (r @ W(p + f"self_attn.{n}.weight").T + B(p + f"self_attn.{n}.bias")).view(b, t, nh, hd).transpose(1, 2)
        q, k, v = proj("q_proj", heads), proj("k_proj", kv), proj("v_proj", kv)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k, v = cache_kv(past, i, k, v)
        k, v = repeat_kv(k, heads // kv), repeat_kv(v, heads // kv)
        s = torch.matmul(q, k.transpose(2, 3)) * (hd ** -0.5) + mask
        if hf_exact:
            s = torch.softmax(s, dim=-1, dtype=torch.float32).to(q.dtype)
        else:
            s = torch.softmax(s, dim=-1)
        o = torch.matmul(s, v).transpose(1, 2).reshape(b, t, heads * hd)
        x = x + o @ W(p + "self_attn.o_proj.weight").T + B(p + "self_attn.o_proj.bias")
        r = rms_norm(x, W(p + "post_attention_layernorm.weight"), eps, hf_exact)
        g = torch.nn.functional.silu(r @ W(p + "mlp.gate_proj.weight").T)
        x = x + (g * (r @ W(p + "mlp.up_proj.weight").T)) @ W(p + "mlp.down_proj.weight").T
    x = rms_norm(x, W("model.norm.weight"), eps, hf_exact)
    if last:
        x = x[:, -1:]
    head = W("lm_head.weight") if "lm_head.weight" in sd else W("model.embed_tokens.weight")
    return x @ head.T


# ---------------------------------------------------------------- both

def forward(cfg, sd, ids, dt, hf_exact=True):
    arch = cfg["architectures"][0]
    if arch == "GPT2LMHeadModel":
        return gpt2_forward(sd, cfg, ids, dt)
    if arch in ("LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM"):
        return llama_forward(sd, cfg, ids, dt, hf_exact)
    raise ValueError(f"architecture {arch}")


def lm_loss(logits, ids):
    """The *ForCausalLM loss with labels = ids: next-token cross-entropy
    of positions 0..T-2, mean over the batch."""
    v = logits.shape[-1]
    return torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, v), ids[:, 1:].reshape(-1))


def greedy(cfg, sd, prompt, n, dt, hf_exact=True):
    """n greedy tokens after prompt (a list), recomputing the whole
    sequence each step, and the smallest top-1 minus top-2 logit gap."""
    seq, gap = list(prompt), math.inf
    for _ in range(n):
        last = forward(cfg, sd, torch.tensor([seq]), dt, hf_exact)[0, -1]
        top = torch.topk(last, 2).values
        gap = min(gap, float(top[0] - top[1]))
        seq.append(int(torch.argmax(last)))
    return seq[len(prompt):], gap
