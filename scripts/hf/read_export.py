"""Reads a Hugging Face model directory written by Hilbert's hf.Save and
prints what hfref.py's float64 reference computes from it, as JSON.

Usage (from the repository root):
    /usr/bin/python3 scripts/hf/read_export.py DIR GOLDEN.json > OUT.json

GOLDEN.json supplies the tokens [B, T] and the prompt (a fixture's
golden.json). OUT.json holds logits64 (flat [B, T, vocab]), loss64 (the
*ForCausalLM loss with labels = tokens), greedy (as many greedy tokens as
GOLDEN.json's) and the stored dtypes, so a Go test can compare its own
model with what PyTorch reads from the export. models/hf's
TestExportPyTorch runs it when /usr/bin/python3 has torch and otherwise
compares with the committed OUT.json of testdata/export-*.
"""
import json
import os
import sys

import torch

import hfref


def main():
    d, golden_path = sys.argv[1], sys.argv[2]
    with open(golden_path) as f:
        golden = json.load(f)
    cfg, sd = hfref.load_dir(d)
    dtypes = sorted(set(hfref.load_safetensors(os.path.join(d, "model.safetensors"))[1].values()))
    tokens = torch.tensor(golden["tokens"])
    logits = hfref.forward(cfg, sd, tokens, torch.float64, hf_exact=False)
    greedy, gap = hfref.greedy(cfg, sd, golden["prompt"], len(golden["greedy"]), torch.float64, hf_exact=False)
    json.dump({
        "architecture": cfg["architectures"][0],
        "dtypes": dtypes,
        "logits64": [float(x) for x in logits.flatten()],
        "loss64": float(hfref.lm_loss(logits, tokens)),
        "greedy": greedy,
        "gap64": gap,
    }, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
