"""Compares the loss curves of training runs (their metrics.jsonl): for each
pair given, the largest and the mean |difference| of the training loss over
the updates both logged, and of the validation loss over the validations
both ran, with the final values.

Usage: /usr/bin/python3 scripts/parity/curves.py A=RUN_A:RUN_B [NAME=RUN_C:RUN_D ...]
(RUN a run's folder, RUNS/NAME, or its metrics.jsonl). For the bfloat16
autocast check: bf16-vs-f32=RUNS/bf16/opticks:RUNS/f32/opticks
seed1-vs-seed0=RUNS/f32seed1/opticks:RUNS/f32/opticks.
"""
import json
import os
import sys


def load(path):
    if os.path.isdir(path):
        path = os.path.join(path, "metrics.jsonl")
    train, val = {}, {}
    for line in open(path):
        r = json.loads(line)
        if "loss" in r:
            train[r["step"]] = r["loss"]
        if "val_loss" in r:
            val[r["step"]] = r["val_loss"]
    return train, val


def diff(a, b):
    steps = sorted(set(a) & set(b))
    d = [abs(a[s] - b[s]) for s in steps]
    last = steps[-1]
    return max(d), sum(d) / len(d), len(d), last, a[last], b[last]


def main():
    for arg in sys.argv[1:]:
        name, _, pair = arg.partition("=")
        pa, pb = pair.split(":")
        (ta, va), (tb, vb) = load(pa), load(pb)
        for what, x, y in (("train loss", ta, tb), ("val loss", va, vb)):
            mx, mean, n, last, xl, yl = diff(x, y)
            print(f"{name:16s} {what:10s} max |diff| {mx:.4f}  mean |diff| {mean:.4f}  over {n} points; "
                  f"at step {last}: {xl:.4f} vs {yl:.4f}")


if __name__ == "__main__":
    main()
