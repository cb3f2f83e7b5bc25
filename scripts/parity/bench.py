"""The PyTorch side of "hilbert bench parity": each call measures one thing
and prints one JSON line, which the Go command reads (and which a person
can read too).

Usage: /usr/bin/python3 scripts/parity/bench.py MODE [flags]

Modes (flags after the mode; --threads N sets torch's threads, default all):
  gemm      torch.matmul of an M x K by a K x N float32 matrix
            (--shape 2048x768x768 --reps 10): GFLOP/s of the median and of
            the fastest repetition.
  paper     the paper's transformer (scripts/parity/model.py, vocab 50257):
            --layers 2 --dim 128 --batch 8 --seq 256 --steps 3; --update
            paper times the full update (forward+backward, the global
            gradient norm clipped at 1.0, Nesterov Muon with 5
            Newton-Schulz steps on the blocks, AdamW on the embedding,
            RowNorm on the head: ../shared/reference's recipe), --update off
            forward+backward only; --autocast bf16 runs the blocks under
            torch.autocast("cpu", torch.bfloat16) and the head, its loss
            and the optimizers in float32, as Hilbert's -autocast bf16
            (PyTorch's autocast also takes the attention's two products in
            bfloat16, which Hilbert's CPU attention runs in float32);
            --autocast bf16-all puts the whole forward under autocast (the
            head's product too), PyTorch's usual use.
  gpt2      GPT-2 (scripts/hf/hfref.py's Hugging Face-exact forward, fused
            c_attn, tied head, vocab 50257): --layers --dim --heads --batch
            --seq --steps; --update adamw times forward+backward, clipping
            at 1.0 and torch.optim.AdamW on every parameter, --update off
            forward+backward only.
  llama     a Llama (scripts/hf/hfref.py's Hugging Face-exact
            LlamaForCausalLM forward: RMSNorm, rotate-half RoPE, grouped
            query attention, SwiGLU, tied head): --layers --dim --heads
            --kv-heads --mlp --vocab --theta --eps --batch --seq --steps
            --update adamw|off, as gpt2.
  generate  generation with the KV cache, greedy (transformers'
            generate loop: the prompt once, then one position a step, the
            head on the last position alone, logits_to_keep=1), of GPT-2
            (--model gpt2: --layers --dim --heads) or a Llama (--model
            llama and the llama flags; the cache holds the key and value
            heads unrepeated): --batch --prompt 64 --tokens 32 --reps 1.
            prefill_ms is the time to the first token (the prompt's forward
            and its pick), ms_per_token the mean time of each later token.

Every timed measure follows an untimed warm-up of the same work. Weights
are random (normal, std 0.02): speed does not depend on their values.
"""
import argparse
import json
import math
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "hf"))

import hfref  # noqa: E402
from model import Transformer  # noqa: E402

VOCAB = 50257


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


def gpt2_weights(layers, d, context):
    """A GPT-2 state dict in Hugging Face's names and layout (Conv1D
    weights [in, out]), normal(0, 0.02) weights, zero biases, unit gains."""
    g = lambda *s: torch.randn(*s) * 0.02
    sd = {"wte.weight": g(VOCAB, d), "wpe.weight": g(context, d), "ln_f.weight": torch.ones(d), "ln_f.bias": torch.zeros(d)}
    for i in range(layers):
        p = f"h.{i}."
        sd.update({
            p + "ln_1.weight": torch.ones(d), p + "ln_1.bias": torch.zeros(d),
            p + "attn.c_attn.weight": g(d, 3 * d), p + "attn.c_attn.bias": torch.zeros(3 * d),
            p + "attn.c_proj.weight": g(d, d), p + "attn.c_proj.bias": torch.zeros(d),
            p + "ln_2.weight": torch.ones(d), p + "ln_2.bias": torch.zeros(d),
            p + "mlp.c_fc.weight": g(d, 4 * d), p + "mlp.c_fc.bias": torch.zeros(4 * d),
            p + "mlp.c_proj.weight": g(4 * d, d), p + "mlp.c_proj.bias": torch.zeros(d),
        })
    return sd


def gpt2_cfg(a):
    return {"n_embd": a.dim, "n_head": a.heads, "n_layer": a.layers, "layer_norm_epsilon": 1e-5}


def timed(step, steps):
    """Runs step once untimed, then steps times; returns the seconds of
    each timed call."""
    step()
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    return times


def bench_gemm(a):
    m, n, k = (int(x) for x in a.shape.lower().split("x"))
    x, y = torch.rand(m, k) * 2 - 1, torch.rand(k, n) * 2 - 1
    out = torch.empty(m, n)
    times = timed(lambda: torch.matmul(x, y, out=out), a.reps)
    flops = 2.0 * m * n * k
    return {"shape": a.shape, "gflops": flops / statistics.median(times) / 1e9, "gflops_best": flops / min(times) / 1e9, "reps": a.reps}


def bench_paper(a):
    cfg = dict(Layers=a.layers, Dim=a.dim, HeadDim=64, MLPHidden=4 * a.dim, Vocab=VOCAB, Context=a.seq, RoPEBase=10000.0)
    torch.manual_seed(1)
    m = Transformer(cfg)
    x = torch.randint(0, VOCAB, (a.batch, a.seq))
    y = torch.randint(0, VOCAB, (a.batch, a.seq))
    opt = PaperUpdate(m, a.dim) if a.update == "paper" else None

    def cast():
        return torch.autocast("cpu", dtype=torch.bfloat16)

    def step():
        m.zero_grad(set_to_none=False)
        if a.autocast == "bf16-all":
            with cast():
                loss = m(x, y)
        else:
            loss = m(x, y, blocks_context=cast if a.autocast == "bf16" else None)
        loss.backward()
        if opt is not None:
            opt.step()

    return train_result(a, timed(step, a.steps))


def bench_gpt2(a):
    torch.manual_seed(1)
    sd = gpt2_weights(a.layers, a.dim, a.seq)
    params = list(sd.values())
    for p in params:
        p.requires_grad_(True)
    cfg = gpt2_cfg(a)
    x = torch.randint(0, VOCAB, (a.batch, a.seq))
    y = torch.randint(0, VOCAB, (a.batch, a.seq))
    opt = torch.optim.AdamW(params, lr=6e-4, betas=(0.9, 0.95), weight_decay=0.1) if a.update == "adamw" else None

    def step():
        for p in params:
            p.grad = None
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.autocast == "bf16"):
            logits = hfref.gpt2_forward(sd, cfg, x, torch.float32)
            loss = F.cross_entropy(logits.view(-1, VOCAB).float(), y.view(-1))
        loss.backward()
        if opt is not None:
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()

    return train_result(a, timed(step, a.steps))


def llama_weights(a):
    """A tied LlamaForCausalLM state dict in Hugging Face's names and
    layout ([out, in] weights), normal(0, 0.02) weights, unit gains."""
    g = lambda *s: torch.randn(*s) * 0.02
    hd = a.dim // a.heads
    sd = {"model.embed_tokens.weight": g(a.vocab, a.dim), "model.norm.weight": torch.ones(a.dim)}
    for i in range(a.layers):
        p = f"model.layers.{i}."
        sd.update({
            p + "input_layernorm.weight": torch.ones(a.dim),
            p + "self_attn.q_proj.weight": g(a.heads * hd, a.dim),
            p + "self_attn.k_proj.weight": g(a.kv_heads * hd, a.dim),
            p + "self_attn.v_proj.weight": g(a.kv_heads * hd, a.dim),
            p + "self_attn.o_proj.weight": g(a.dim, a.heads * hd),
            p + "post_attention_layernorm.weight": torch.ones(a.dim),
            p + "mlp.gate_proj.weight": g(a.mlp, a.dim),
            p + "mlp.up_proj.weight": g(a.mlp, a.dim),
            p + "mlp.down_proj.weight": g(a.dim, a.mlp),
        })
    return sd


def llama_cfg(a):
    return {"hidden_size": a.dim, "num_attention_heads": a.heads, "num_key_value_heads": a.kv_heads,
            "num_hidden_layers": a.layers, "rms_norm_eps": a.eps, "rope_theta": a.theta}


def bench_llama(a):
    torch.manual_seed(1)
    sd = llama_weights(a)
    params = list(sd.values())
    for p in params:
        p.requires_grad_(True)
    cfg = llama_cfg(a)
    x = torch.randint(0, a.vocab, (a.batch, a.seq))
    y = torch.randint(0, a.vocab, (a.batch, a.seq))
    opt = torch.optim.AdamW(params, lr=6e-4, betas=(0.9, 0.95), weight_decay=0.1) if a.update == "adamw" else None

    def step():
        for p in params:
            p.grad = None
        logits = hfref.llama_forward(sd, cfg, x, torch.float32, True)
        loss = F.cross_entropy(logits.view(-1, a.vocab), y.view(-1))
        loss.backward()
        if opt is not None:
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()

    return train_result(a, timed(step, a.steps))


def train_result(a, times):
    per = sum(times) / len(times)
    return {"tokens_per_s": a.batch * a.seq / per, "ms_per_step": per * 1000, "steps": a.steps,
            "update": a.update, "autocast": a.autocast, "batch": a.batch, "seq": a.seq}


@torch.no_grad()
def bench_generate(a):
    torch.manual_seed(1)
    context = a.prompt + a.tokens
    if a.model == "llama":
        sd, cfg, vocab = llama_weights(a), llama_cfg(a), a.vocab
        forward = lambda ids, past: hfref.llama_forward(sd, cfg, ids, torch.float32, True, past, last=True)
    else:
        sd, cfg, vocab = gpt2_weights(a.layers, a.dim, context), gpt2_cfg(a), VOCAB
        forward = lambda ids, past: hfref.gpt2_forward(sd, cfg, ids, torch.float32, past, last=True)
    prompt = torch.randint(0, vocab, (a.batch, a.prompt))

    def generate():
        """Greedy decoding with the KV cache; returns the time to the
        first token and the times of the later ones."""
        past = [None] * a.layers
        t0 = time.perf_counter()
        logits = forward(prompt, past)
        nxt = logits[:, -1].argmax(-1, keepdim=True)
        first = time.perf_counter() - t0
        later = []
        for _ in range(a.tokens - 1):
            t1 = time.perf_counter()
            logits = forward(nxt, past)
            nxt = logits[:, -1].argmax(-1, keepdim=True)
            later.append(time.perf_counter() - t1)
        return first, later

    generate()  # warm up
    runs = [generate() for _ in range(a.reps)]
    first = statistics.median(r[0] for r in runs)
    per = statistics.median(sum(r[1]) / len(r[1]) for r in runs)
    return {"batch": a.batch, "prompt": a.prompt, "tokens": a.tokens, "reps": a.reps,
            "prefill_ms": first * 1000, "prefill_tokens_per_s": a.batch * a.prompt / first,
            "ms_per_token": per * 1000, "decode_tokens_per_s": a.batch / per,
            "tokens_per_s": a.batch * a.tokens / (first + per * (a.tokens - 1))}


MODES = {"gemm": bench_gemm, "paper": bench_paper, "gpt2": bench_gpt2, "llama": bench_llama, "generate": bench_generate}


def main():
    p = argparse.ArgumentParser(description="PyTorch side of hilbert bench parity")
    p.add_argument("mode", choices=sorted(MODES))
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: all CPUs)")
    p.add_argument("--shape", default="2048x768x768", help="gemm: MxNxK")
    p.add_argument("--reps", type=int, default=10, help="gemm: timed products; generate: timed generations")
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--heads", type=int, default=4, help="gpt2, llama, generate: attention heads")
    p.add_argument("--kv-heads", type=int, default=0, help="llama: key and value heads (0: --heads)")
    p.add_argument("--mlp", type=int, default=0, help="llama: SwiGLU hidden width (0: 4 --dim)")
    p.add_argument("--vocab", type=int, default=VOCAB, help="llama: vocabulary")
    p.add_argument("--theta", type=float, default=10000.0, help="llama: RoPE base")
    p.add_argument("--eps", type=float, default=1e-5, help="llama: RMSNorm epsilon")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--steps", type=int, default=3, help="timed steps after one warm-up")
    p.add_argument("--update", default="off", choices=["off", "paper", "adamw"])
    p.add_argument("--autocast", default="off", choices=["off", "bf16", "bf16-all"])
    p.add_argument("--prompt", type=int, default=64, help="generate: prompt tokens per sequence")
    p.add_argument("--tokens", type=int, default=32, help="generate: new tokens per sequence")
    p.add_argument("--model", default="gpt2", choices=["gpt2", "llama"], help="generate: the model (llama takes the llama flags)")
    a = p.parse_args()
    if a.steps < 1 or a.reps < 1 or a.tokens < 2 or a.batch < 1:
        p.error("want --steps, --reps, --batch >= 1 and --tokens >= 2")
    a.kv_heads = a.kv_heads or a.heads
    a.mlp = a.mlp or 4 * a.dim
    if a.mode == "paper" and a.update == "adamw" or a.mode in ("gpt2", "llama") and a.update == "paper":
        p.error(f"--update {a.update} is not a recipe of {a.mode}")
    torch.set_num_threads(a.threads or os.cpu_count())
    out = MODES[a.mode](a)
    out.update(mode=a.mode, threads=torch.get_num_threads(), torch=torch.__version__)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
