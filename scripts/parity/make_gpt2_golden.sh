#!/bin/sh
# Regenerates models/testdata/gpt2_golden.safetensors: PyTorch (Debian's
# python3-torch, CPU) builds the tiny GPT-2 with random weights and writes
# the weights, a fixed batch, the logits, loss and every gradient. Run from
# the repository root.
set -eu
/usr/bin/python3 scripts/parity/gpt2.py models/testdata/gpt2_golden.safetensors
go test ./models -run '^TestGPT2ParityPyTorch$' -count=1 -v | grep -E 'logits|gradients|ok|FAIL'
