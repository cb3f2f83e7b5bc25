#!/usr/bin/python3
"""Float64 golden steps of every optimizer of package optim, from PyTorch.

Writes optim/testdata/golden64.json: per case the hyper-parameters, the
initial parameters, one gradient per parameter and update, the schedule
multiplier of each update (the paper's cosine, Total 5, Warmup 1) and the
parameters after each update. AdamW and SGD are torch.optim's; Muon,
RowNorm, Lion and ClipGradNorm are their definitions (optim's doc
comments; Lion's is lucidrains/lion-pytorch's update_fn) written in torch
float64 operations. Run from the repository root with
Debian's python3-torch (1.13, CPU):

    /usr/bin/python3 scripts/optim/golden64.py

Cases are appended, never inserted, so earlier ones keep their random
numbers. Muon's matrix products run on the machine's BLAS, whose
summation order can move their last bits from one machine to another; the
committed file keeps the values first written (a rerun here moved them
by at most 4e-16).
"""
import json
import math

import torch

torch.set_default_dtype(torch.float64)
gen = torch.Generator().manual_seed(23)
STEPS = 5
TOTAL, WARMUP, FINAL = 5, 1, 0.1


def cosine(s):
    if s < WARMUP:
        return s / WARMUP
    if TOTAL - WARMUP == 1:
        return FINAL
    progress = min(1.0, (s - WARMUP) / (TOTAL - WARMUP - 1))
    return FINAL + (1 - FINAL) * 0.5 * (1 + math.cos(math.pi * progress))


SCALES = [cosine(s) for s in range(STEPS)]


def randn(*shape):
    return torch.randn(*shape, generator=gen, dtype=torch.float64)


def flat(t):
    return [float(x) for x in t.reshape(-1).tolist()]


def run(name, kind, config, shapes, update):
    """update(params, grads, step index, lr multiplier) applies one step."""
    params = [randn(*s) for s in shapes]
    init = [p.clone() for p in params]
    grads = [[randn(*s) for s in shapes] for _ in range(STEPS)]
    want = []
    update_state = update(params)
    for s in range(STEPS):
        update_state(grads[s], s, SCALES[s])
        want.append([flat(p) for p in params])
    return {
        "name": name, "kind": kind, "config": config,
        "params": [{"name": f"p{i}", "shape": list(s), "data": flat(p)} for i, (s, p) in enumerate(zip(shapes, init))],
        "grads": [[flat(g) for g in gs] for gs in grads],
        "want": want,
    }


def torch_optim(make):
    def update(params):
        ps = [torch.nn.Parameter(p) for p in params]
        opt = make(ps)
        lr = opt.param_groups[0]["lr"]

        def step(grads, s, scale):
            for p, g in zip(ps, grads):
                p.grad = g.clone()
            opt.param_groups[0]["lr"] = lr * scale
            opt.step()
            for q, p in zip(params, ps):
                q.copy_(p.detach())
        return step
    return update


def muon(cfg):
    a, b, c = 3.4445, -4.7750, 2.0315

    def update(params):
        bufs = [torch.zeros_like(p) for p in params]

        def step(grads, s, scale):
            lr = cfg["LR"] * scale
            for p, g, buf in zip(params, grads, bufs):
                buf.mul_(cfg["Momentum"]).add_(g)
                u = g + cfg["Momentum"] * buf if cfg["Nesterov"] else buf.clone()
                rows, cols = u.shape[0], u[0].numel()
                x = u.reshape(rows, cols)
                x = x / (x.norm() + cfg["Eps"])
                tall = rows > cols
                if tall:
                    x = x.T
                for _ in range(cfg["NSIterations"]):
                    A = x @ x.T
                    B = b * A + c * (A @ A)
                    x = a * x + B @ x
                if tall:
                    x = x.T
                p.mul_(1 - lr * cfg["WeightDecay"])
                p.add_(x.reshape(p.shape), alpha=-lr * math.sqrt(max(1, rows / cols)))
        return step
    return update


def rownorm(cfg):
    def update(params):
        bs = [torch.zeros_like(p) for p in params]
        t = [0]

        def step(grads, s, scale):
            lr = cfg["LR"] * scale
            t[0] += 1
            beta = cfg["Beta"]
            for p, g, B in zip(params, grads, bs):
                B.mul_(beta).add_(g, alpha=1 - beta)
                bhat = (B / (1 - beta ** t[0])).reshape(p.shape[0], -1)

                def rn(m):
                    return m / (m.norm(dim=1, keepdim=True) + cfg["Eps"])

                def proj(m):
                    return m - m.mean(dim=0, keepdim=True)
                if cfg["Projected"]:
                    S = -lr * proj(rn(proj(bhat)))
                else:
                    S = -lr * rn(bhat)
                p.mul_(1 - lr * cfg["WeightDecay"])
                p.add_(S.reshape(p.shape))
        return step
    return update


def lion(cfg):
    def update(params):
        ms = [torch.zeros_like(p) for p in params]

        def step(grads, s, scale):
            lr = cfg["LR"] * scale
            b1, b2 = cfg["Beta1"], cfg["Beta2"]
            for p, g, m in zip(params, grads, ms):
                p.mul_(1 - lr * cfg["WeightDecay"])
                u = (m * b1 + g * (1 - b1)).sign_()
                p.add_(u, alpha=-lr)
                m.mul_(b2).add_(g, alpha=1 - b2)
        return step
    return update


def clip(max_norm):
    def update(params):
        def step(grads, s, scale):
            gs = [g.clone() for g in grads]
            ps = [torch.nn.Parameter(torch.zeros_like(g)) for g in gs]
            for p, g in zip(ps, gs):
                p.grad = g
            torch.nn.utils.clip_grad_norm_(ps, max_norm)
            for q, p in zip(params, ps):
                q.copy_(p.grad)  # "parameters" after a step: the clipped gradients
        return step
    return update


cases = []
adamw = {"LR": 1e-2, "Beta1": 0.9, "Beta2": 0.999, "Eps": 1e-8, "WeightDecay": 0.1}
cases.append(run("adamw", "adamw", adamw, [(3, 4), (4,)], torch_optim(lambda ps: torch.optim.AdamW(
    ps, lr=adamw["LR"], betas=(adamw["Beta1"], adamw["Beta2"]), eps=adamw["Eps"], weight_decay=adamw["WeightDecay"]))))
for name, cfg in [
    ("sgd", {"LR": 0.1}),
    ("sgd-momentum", {"LR": 0.1, "Momentum": 0.9, "Dampening": 0.1, "WeightDecay": 0.01}),
    ("sgd-nesterov", {"LR": 0.1, "Momentum": 0.9, "Nesterov": True, "WeightDecay": 0.01}),
]:
    cases.append(run(name, "sgd", cfg, [(3, 4), (4,)], torch_optim(lambda ps, cfg=cfg: torch.optim.SGD(
        ps, lr=cfg["LR"], momentum=cfg.get("Momentum", 0), dampening=cfg.get("Dampening", 0),
        nesterov=cfg.get("Nesterov", False), weight_decay=cfg.get("WeightDecay", 0)))))
for name, cfg in [
    ("muon", {"LR": 0.02, "Momentum": 0.95, "Nesterov": True, "WeightDecay": 0.1, "NSIterations": 5, "Eps": 1e-5}),
    ("muon-plain", {"LR": 0.02, "Momentum": 0.9, "Nesterov": False, "WeightDecay": 0, "NSIterations": 3, "Eps": 1e-7}),
]:
    cases.append(run(name, "muon", cfg, [(3, 5), (6, 2), (2, 2, 3)], muon(cfg)))
for name, cfg in [
    ("rownorm", {"LR": 0.01, "Beta": 0.95, "Eps": 1e-8, "WeightDecay": 0, "Projected": False}),
    ("rownorm-projected", {"LR": 0.01, "Beta": 0.9, "Eps": 1e-6, "WeightDecay": 0.1, "Projected": True}),
]:
    cases.append(run(name, "rownorm", cfg, [(5, 3), (2, 6)], rownorm(cfg)))
cases.append(run("clip", "clip", {"MaxNorm": 1.5}, [(3, 4), (4,)], clip(1.5)))
# Appended last, so the cases above keep their random numbers.
for name, cfg in [
    ("lion", {"LR": 1e-3, "Beta1": 0.9, "Beta2": 0.99, "WeightDecay": 0}),
    ("lion-decay", {"LR": 3e-3, "Beta1": 0.95, "Beta2": 0.98, "WeightDecay": 0.1}),
]:
    cases.append(run(name, "lion", cfg, [(3, 4), (4,)], lion(cfg)))
# SGD as most code calls it: plain momentum (no dampening, no Nesterov),
# and coupled weight decay without momentum.
for name, cfg in [
    ("sgd-momentum-plain", {"LR": 0.05, "Momentum": 0.9, "WeightDecay": 5e-4}),
    ("sgd-decay", {"LR": 0.1, "WeightDecay": 0.1}),
]:
    cases.append(run(name, "sgd", cfg, [(3, 4), (4,)], torch_optim(lambda ps, cfg=cfg: torch.optim.SGD(
        ps, lr=cfg["LR"], momentum=cfg.get("Momentum", 0), dampening=cfg.get("Dampening", 0),
        nesterov=cfg.get("Nesterov", False), weight_decay=cfg.get("WeightDecay", 0)))))

with open("optim/testdata/golden64.json", "w") as f:
    json.dump({"torch": torch.__version__, "scales": SCALES, "cases": cases}, f, indent=1)
    f.write("\n")
