#!/usr/bin/env bash
# run.sh DIR: the GPU-machine half of scripts/gpu-check.sh. Needs only the
# files in DIR (cuda.test, this script), the NVIDIA driver and the CUDA 13
# (or 12) cuBLAS and NVRTC libraries (system, HILBERT_CUDA_LIB_DIR, or pip
# wheels nvidia-cublas / nvidia-cuda-nvrtc in a Python site-packages).
# Stage budgets (seconds) keep the whole run under 8 minutes (480 s in all).
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

# cmd NAME SECONDS COMMAND...: a stage that runs a command, not the test binary.
cmd() {
	local name=$1 secs=$2
	shift 2
	echo "=== gpu-check: $name (limit ${secs}s)"
	if ! timeout --kill-after=10 "$secs" "$@" 2>&1 | tee "$log/$name.log"; then
		echo "=== gpu-check: $name FAILED"
		status=1
	fi
}

command -v nvidia-smi >/dev/null && nvidia-smi -L || echo "gpu-check: nvidia-smi not found"

# 0. Which libraries load, the GPU, and the first NVRTC compile of the
#    kernels (cached for the stages after it).
cmd devices 25 "$dir/hilbert" devices

# 1. Every op on CUDA against the CPU backend, flash attention at T=2048.
stage parity 145 -test.run '^TestGPU' -test.v -test.timeout 135s

# 2. GEMM throughput (float32 and bfloat16).
stage bench-gemm 40 -test.run '^$' -test.bench 'Gemm' -test.benchtime 10x -test.timeout 35s

# 3. Fused kernels.
stage bench-kernels 30 -test.run '^$' -test.bench 'Attention|CrossEntropy|RMSNorm|AdamW' -test.benchtime 5x -test.timeout 25s


if grep -q 'no CUDA device' "$log/parity.log" 2>/dev/null; then
	echo "=== gpu-check: no usable GPU (see parity.log): skipping the training and 190M stages"
else

# 3b. The exact row diameter and Hilbert RMS on the device (V = 50257).
cmd geometry 35 "$dir/geometry.test" -test.run '^TestGPU' -test.v -test.timeout 30s

# 3c. A 1-rank NCCL communicator on the GPU (dist/nccl with the real
#     libnccl.so.2: system, HILBERT_NCCL_LIB or pip's nvidia-nccl-cu12);
#     skips, and says why, without NCCL.
cmd nccl 10 "$dir/nccl.test" -test.run '^TestGPU' -test.v -test.timeout 8s

# 4. A few training steps of a small preset on CUDA with both heads
#    (bf16 autocast, validation, D(S_t) and Hilbert RMS at the end).
for head in rownorm adamw; do
	cmd "train-$head" 40 "$dir/hilbert" train -device cuda -quiet -preset cpu-128 -head "$head" \
		-train "$dir/data/opticks_train_*.bin" -val "$dir/data/opticks_val_000000.bin" \
		-steps 10 -micro-batch 8 -batch-seqs 16 -val-every 10 -val-tokens 8192 -diag-every 5 \
		-runs "$log/runs" -name "gpu-$head" -overwrite
done

# 5. The 190M preset at T 2048: Hilbert's forward+backward next to PyTorch
#    eager with bf16 autocast on the same GPU.
cmd bench-190m-hilbert 60 "$dir/hilbert" bench model -device cuda -autocast bf16 -preset 190m -batch 8 -seq 2048 -steps 5 -profile 30
# Attention's share of the step, from the profile table just printed.
cmd attention-share 5 awk -f "$dir/attention_share.awk" "$log/bench-190m-hilbert.log"
py=$(command -v python3 || command -v python)
cmd bench-190m-pytorch 50 "$py" "$dir/bench_torch.py" 190m 8 2048 5

fi

if grep -q -- '--- SKIP' "$log/parity.log" 2>/dev/null; then
	echo "=== gpu-check: some GPU tests were skipped (see parity.log): no usable GPU?"
fi
echo "=== gpu-check: done, status $status"
exit $status
