#!/bin/sh
# Regenerates models/testdata/parity_golden.safetensors: Hilbert writes the
# parity model's weights, PyTorch (Debian's python3-torch, CPU) computes the
# loss and gradients of a fixed batch from them. Run from the repository root.
set -eu
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go test ./models -run '^TestParityPyTorch$' -count=1 -args -parity-weights="$tmp/weights.safetensors" >/dev/null
/usr/bin/python3 scripts/parity/parity.py "$tmp/weights.safetensors" models/testdata/parity_golden.safetensors
go test ./models -run '^TestParityPyTorch$' -count=1 -v | grep -E 'loss|gradients|ok|FAIL'
