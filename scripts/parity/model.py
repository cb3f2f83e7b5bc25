"""The paper's transformer in PyTorch, and a minimal safetensors reader/writer.

This is the reference Hilbert's models.Transformer is checked against
(scripts/parity/parity.py) and timed against (scripts/parity/bench.py).
Parameter names match Hilbert's: embed.weight, blocks.N.attn.{q,k,v,out}.weight,
blocks.N.mlp.{gate,up,down}.weight, head.weight.

Needs only torch and numpy (Debian's python3-torch, python3-numpy; run with
/usr/bin/python3). The safetensors code is here because Debian ships no
python3-safetensors; it follows the format exactly (8-byte little-endian
header length, JSON header, raw little-endian data).
"""
import contextlib
import json
import math
import struct

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

EPS = 1e-6

_NP = {"F32": np.float32, "F64": np.float64, "I32": np.int32, "I64": np.int64}


def load_safetensors(path):
    """Returns (dict name -> numpy array, metadata dict)."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__", {}) or {}
    data = raw[8 + n:]
    out = {}
    for name, e in header.items():
        b, en = e["data_offsets"]
        arr = np.frombuffer(data[b:en], dtype=np.dtype(_NP[e["dtype"]]).newbyteorder("<"))
        out[name] = arr.reshape(e["shape"]).copy()
    return out, meta


def save_safetensors(path, tensors, metadata=None):
    """Writes an ordered dict name -> numpy array (float32 or int32)."""
    header = {}
    if metadata:
        header["__metadata__"] = {k: str(v) for k, v in metadata.items()}
    blobs, off = [], 0
    for name, a in tensors.items():
        a = np.asarray(a).copy(order="C")  # (ascontiguousarray would make 0-d arrays 1-d)
        dt = {np.dtype(np.float32): "F32", np.dtype(np.int32): "I32"}[a.dtype]
        b = a.astype(a.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": dt, "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def rms_norm(x):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS)


def rope_tables(seq, head_dim, base, dtype):
    half = head_dim // 2
    freq = base ** (-2.0 * np.arange(half, dtype=np.float64) / head_dim)
    ang = np.arange(seq, dtype=np.float64)[:, None] * freq[None, :]
    # Hilbert computes the tables in float64 and stores them in float32.
    cos = torch.tensor(np.cos(ang).astype(np.float32), dtype=dtype)
    sin = torch.tensor(np.sin(ang).astype(np.float32), dtype=dtype)
    return cos, sin


def rope(x, cos, sin):
    """Half-split rotary embedding of x [B, T, H, D]."""
    t, half = x.shape[1], x.shape[3] // 2
    c, s = cos[:t][None, :, None, :], sin[:t][None, :, None, :]
    l, r = x[..., :half], x[..., half:]
    return torch.cat([l * c - r * s, r * c + l * s], dim=-1)


class Attention(nn.Module):
    def __init__(self, d, head_dim):
        super().__init__()
        self.q = nn.Linear(d, d, bias=False)
        self.k = nn.Linear(d, d, bias=False)
        self.v = nn.Linear(d, d, bias=False)
        self.out = nn.Linear(d, d, bias=False)
        self.head_dim = head_dim

    def forward(self, x, cos, sin):
        b, t, d = x.shape
        h, hd = d // self.head_dim, self.head_dim
        q = rope(rms_norm(self.q(x).view(b, t, h, hd)), cos, sin).transpose(1, 2)
        k = rope(rms_norm(self.k(x).view(b, t, h, hd)), cos, sin).transpose(1, 2)
        v = self.v(x).view(b, t, h, hd).transpose(1, 2)
        att = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(hd))
        mask = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
        att = att.masked_fill(mask, float("-inf")).softmax(-1)
        o = (att @ v).transpose(1, 2).reshape(b, t, d)
        return self.out(o)


class MLP(nn.Module):
    def __init__(self, d, hidden):
        super().__init__()
        self.gate = nn.Linear(d, hidden, bias=False)
        self.up = nn.Linear(d, hidden, bias=False)
        self.down = nn.Linear(hidden, d, bias=False)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))


class Block(nn.Module):
    def __init__(self, d, head_dim, hidden):
        super().__init__()
        self.attn = Attention(d, head_dim)
        self.mlp = MLP(d, hidden)

    def forward(self, x, cos, sin):
        x = x + self.attn(rms_norm(x), cos, sin)
        return x + self.mlp(rms_norm(x))


class Transformer(nn.Module):
    """cfg: dict with Layers, Dim, HeadDim, MLPHidden, Vocab, Context, RoPEBase."""

    def __init__(self, cfg, dtype=torch.float32):
        super().__init__()
        d = cfg["Dim"]
        self.embed = nn.Embedding(cfg["Vocab"], d)
        self.blocks = nn.ModuleList(
            [Block(d, cfg["HeadDim"], cfg["MLPHidden"]) for _ in range(cfg["Layers"])])
        self.head = nn.Linear(d, cfg["Vocab"], bias=False)
        for p in self.parameters():
            nn.init.normal_(p, 0.0, cfg.get("InitStd", 0.02))
        self.to(dtype)
        cos, sin = rope_tables(cfg["Context"], cfg["HeadDim"], cfg["RoPEBase"], dtype)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)

    def forward(self, inputs, targets, blocks_context=None):
        """The mean cross-entropy; blocks_context, when given, returns a
        context manager the blocks run in (bench.py's autocast)."""
        x = self.embed(inputs)
        with blocks_context() if blocks_context else contextlib.nullcontext():
            for blk in self.blocks:
                x = blk(x, self.cos, self.sin)
        logits = self.head(rms_norm(x))
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.reshape(-1))
