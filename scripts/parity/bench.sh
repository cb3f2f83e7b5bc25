#!/bin/sh
# Forward+backward tokens/s of the small presets (batch 8 x 256 tokens):
# Hilbert (go test -bench BenchmarkTrainStep in models/) next to the PyTorch
# reference (scripts/parity/bench.py, Debian's python3-torch) in the same
# run, and their ratio. Both use the OpenMP build of OpenBLAS.
# Usage: scripts/parity/bench.sh [preset ...]   (default: cpu-128 cpu-256)
# STEPS (default 3) sets the timed steps per side.
# On a CPU that OpenBLAS 0.3.21 does not recognise (its kernels then fall
# back to the generic Prescott ones, several times slower, and PyTorch with
# them), set OPENBLAS_CORETYPE=Cooperlake (or SkylakeX) for a fair reference.
set -eu
export LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-openmp${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export HILBERT_OPENBLAS=${HILBERT_OPENBLAS:-/usr/lib/x86_64-linux-gnu/openblas-openmp/libopenblas.so.0}
steps=${STEPS:-3}
presets=${*:-d128-l2 d256-l4}
dir=$(dirname "$0")
for p in $presets; do
	go_tps=$(go test ./models -run '^$' -bench "^BenchmarkTrainStep/$p\$" -benchtime "${steps}x" -count 1 2>/dev/null |
		awk '/tokens\/s/ { for (i = 1; i < NF; i++) if ($(i+1) == "tokens/s") print $i }')
	py_line=$(/usr/bin/python3 "$dir/bench.py" "$p" 8 256 "$steps")
	py_tps=$(echo "$py_line" | awk '{ print $3 }')
	echo "$p hilbert $go_tps tokens/s"
	echo "$py_line"
	awk -v a="$go_tps" -v b="$py_tps" -v p="$p" 'BEGIN { printf "%s ratio hilbert/pytorch %.2fx\n", p, a / b }'
done
