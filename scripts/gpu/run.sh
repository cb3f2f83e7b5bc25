#!/usr/bin/env bash
# run.sh DIR: the GPU-machine half of scripts/gpu-check.sh. Needs only the
# files in DIR (cuda.test, this script), the NVIDIA driver and the CUDA 13
# (or 12) cuBLAS and NVRTC libraries (system, HILBERT_CUDA_LIB_DIR, or pip
# wheels nvidia-cublas / nvidia-cuda-nvrtc in a Python site-packages).
# Stage budgets (seconds) keep the whole run under 8 minutes.
set -uo pipefail

dir=${1:-$(dirname "${BASH_SOURCE[0]}")}
test=$dir/cuda.test
log=${OUT:-$dir}
status=0

stage() { # stage NAME SECONDS ARGS...
	local name=$1 secs=$2
	shift 2
	echo "=== gpu-check: $name (limit ${secs}s)"
	if ! timeout --kill-after=10 "$secs" "$test" "$@" 2>&1 | tee "$log/$name.log"; then
		echo "=== gpu-check: $name FAILED"
		status=1
	fi
}

command -v nvidia-smi >/dev/null && nvidia-smi -L || echo "gpu-check: nvidia-smi not found"

# 1. Every op on CUDA against the CPU backend, flash attention at T=2048
#    (includes the first NVRTC compile of the kernels, then cached).
stage parity 240 -test.run '^TestGPU' -test.v -test.timeout 230s

# 2. GEMM throughput (float32 and bfloat16).
stage bench-gemm 90 -test.run '^$' -test.bench 'Gemm' -test.benchtime 10x -test.timeout 80s

# 3. Fused kernels.
stage bench-kernels 90 -test.run '^$' -test.bench 'Attention|CrossEntropy|RMSNorm|AdamW' -test.benchtime 5x -test.timeout 80s

# 4. HOOK (later): training steps of the paper's model on CUDA and the 190M
#    comparison against PyTorch go here, once the model exists. Keep the
#    total under 8 minutes: stages 1-3 use at most 7 minutes.

if grep -q -- '--- SKIP' "$log/parity.log" 2>/dev/null; then
	echo "=== gpu-check: some GPU tests were skipped (see parity.log): no usable GPU?"
fi
echo "=== gpu-check: done, status $status"
exit $status
