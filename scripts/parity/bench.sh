#!/bin/sh
# Tokens/s of the small presets (batch 8 x 256 tokens) in two measures:
# forward+backward (go test -bench BenchmarkTrainStep in models/) and the
# paper's full update (BenchmarkPaperUpdate: forward+backward, clipping,
# Muon on the blocks, AdamW on the embedding, RowNorm on the head), each
# next to the PyTorch reference (scripts/parity/bench.py, Debian's
# python3-torch) in the same run, and their ratio. The full update is also
# timed with the blocks' products under bfloat16 autocast ("update bf16":
# Hilbert's -autocast bf16 against torch.autocast("cpu", bfloat16) on the
# blocks). Both sides use the OpenMP
# build of OpenBLAS (Hilbert's GEMM is still the default choice, see
# "How the GEMM is chosen" in docs/ops-and-backends.md).
# Usage: scripts/parity/bench.sh [preset ...]   (default: d128-l2 d256-l4;
# the full update is timed for those two only)
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
# measure PRESET BENCHMARK LABEL [BENCH.PY FLAGS [GO SUFFIX]]
measure() {
	go_tps=$(go test ./models -run '^$' -bench "^$2/$1${5:-}\$" -benchtime "${steps}x" -count 1 2>/dev/null |
		awk '/tokens\/s/ { for (i = 1; i < NF; i++) if ($(i+1) == "tokens/s") print $i }')
	py_line=$(/usr/bin/python3 "$dir/bench.py" ${4:-} "$1" 8 256 "$steps")
	py_tps=$(echo "$py_line" | awk '{ print $3 }')
	echo "$1 $3 hilbert $go_tps tokens/s"
	echo "$py_line"
	awk -v a="$go_tps" -v b="$py_tps" -v p="$1" -v w="$3" 'BEGIN { printf "%s %s ratio hilbert/pytorch %.2fx\n", p, w, a / b }'
}
for p in $presets; do
	measure "$p" BenchmarkTrainStep forward+backward
	case $p in d128-l2 | d256-l4)
		measure "$p" BenchmarkPaperUpdate update -update
		measure "$p" BenchmarkPaperUpdate "update bf16" "-update -autocast" -bf16
		;;
	esac
done
