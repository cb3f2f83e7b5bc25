#!/usr/bin/env bash
# run.sh DIR: the GPU-machine half of scripts/gpu-check.sh. Needs only the
# files in DIR (cuda.test, hilbert, ..., this script), the NVIDIA driver and
# the CUDA 13 (or 12) cuBLAS and NVRTC libraries (system,
# HILBERT_CUDA_LIB_DIR, or pip wheels nvidia-cublas / nvidia-cuda-nvrtc in
# a Python site-packages), and python3 with torch for the PyTorch anchor.
#
# Time: one global deadline, GPU_CHECK_DEADLINE seconds (450) from the
# start of this script, keeps the whole run under 8 minutes. Each stage
# runs under timeout(1) for the smaller of its own limit and the time left
# less the kill-after grace (5 s), so no stage can end past the deadline; a
# stage with under 5 s left is skipped with a line that says so, and the
# run's status is then 1 (the check did not finish). A test
# binary's -test.timeout is set 2 s inside its stage's limit, so that a
# hung test prints its goroutines before it is killed.
#
# Order: the figures that matter most come first. Whether python3 has
# torch with CUDA (asked in the background, said after the first stage);
# parity; the 190M step tokens/s of Hilbert (then the profile of one more
# step) and of PyTorch eager, bf16 autocast, SDPA attention; the profile's
# attention share; then the GEMM and fused-kernel benchmarks, geometry,
# NCCL and training stages. The last line before "done" is the summary:
# both 190M tokens/s, their ratio and attention's share.
set -uo pipefail

dir=${1:-$(dirname "${BASH_SOURCE[0]}")}
test=$dir/cuda.test
log=${OUT:-$dir}
deadline=${GPU_CHECK_DEADLINE:-450}
grace=5
t0=$SECONDS
status=0
skipped=()

# stage NAME LIMIT COMMAND...: runs COMMAND, its output shown and kept in
# $log/NAME.log, within min(LIMIT, time left - grace) seconds. A command
# ending in .test gets -test.timeout 2 s inside that.
stage() {
	local name=$1 limit=$2
	shift 2
	local left=$((deadline - (SECONDS - t0) - grace))
	if ((left < 5)); then
		echo "=== gpu-check: $name SKIPPED: out of time ($((deadline - (SECONDS - t0)))s of the ${deadline}s deadline left)"
		status=1
		skipped+=("$name")
		return 0
	fi
	local secs=$((limit < left ? limit : left))
	local extra=()
	if [[ $1 == *.test && $secs -gt 4 ]]; then
		extra=(-test.timeout "$((secs - 2))s")
	fi
	echo "=== gpu-check: $name (limit ${secs}s, $((SECONDS - t0))s elapsed)"
	if ! timeout --kill-after=$grace "$secs" "$@" "${extra[@]}" 2>&1 | tee "$log/$name.log"; then
		echo "=== gpu-check: $name FAILED"
		status=1
	fi
}

command -v nvidia-smi >/dev/null && nvidia-smi -L || echo "gpu-check: nvidia-smi not found"

# The PyTorch anchor needs torch with CUDA: ask python in the background
# (importing torch takes seconds) while the devices stage runs, and say
# what it found right after that stage.
py=$(command -v python3 || command -v python || echo python3)
torch_secs=$((deadline / 10 < 30 ? deadline / 10 : 30)) # a tenth of the deadline, at most 30 s
timeout "$torch_secs" "$py" -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda, "available:", torch.cuda.get_device_name(0) if torch.cuda.is_available() else "NOT available")' >"$log/torch.log" 2>&1 &
torch_pid=$!

# 0. Which libraries load, the GPU, and the first NVRTC compile of the
#    kernels (cached on disk for the stages after it; attention.cu's
#    instantiations take clang some 30 s here, so the limit is generous:
#    the deadline bounds the whole).
stage devices 90 "$dir/hilbert" devices

torch_ok=0
wait "$torch_pid"
torch_rc=$?
torch_line=$(tail -n 1 "$log/torch.log" 2>/dev/null)
if ((torch_rc == 124 || torch_rc == 137)); then
	echo "gpu-check: $py did not import torch within ${torch_secs}s: the PyTorch anchor stage will not run"
elif ((torch_rc != 0)); then
	echo "gpu-check: $py cannot import torch (the PyTorch anchor stage will not run): $torch_line"
elif [[ $torch_line == *"NOT available"* ]]; then
	echo "gpu-check: $torch_line: torch sees no GPU, the PyTorch anchor stage will not run"
else
	echo "gpu-check: $torch_line"
	torch_ok=1
fi

# 1. Every op on CUDA against the CPU backend, flash attention at T=2048.
stage parity 145 "$test" -test.run '^TestGPU' -test.v

if grep -q 'no CUDA device' "$log/parity.log" 2>/dev/null; then
	gpu=0
	echo "=== gpu-check: no usable GPU (see parity.log): skipping the 190M and training stages"
else
	gpu=1
fi

if ((gpu)); then
	# 2. The 190M preset at T 2048: Hilbert's forward+backward (with the
	#    profile of one more step), then PyTorch eager with bf16 autocast
	#    and SDPA attention on the same GPU.
	stage bench-190m-hilbert 70 "$dir/hilbert" bench model -device cuda -autocast bf16 -preset 190m -batch 8 -seq 2048 -steps 5 -profile 30
	if ((torch_ok)); then
		stage bench-190m-pytorch 60 "$py" "$dir/bench_torch.py" 190m 8 2048 5
	else
		echo "=== gpu-check: bench-190m-pytorch FAILED: torch with CUDA is not available (see the torch line at the start)"
		status=1
	fi
	# 3. Attention's share of the step, from the profile table.
	stage attention-share 5 awk -f "$dir/attention_share.awk" "$log/bench-190m-hilbert.log"
fi

# 4. GEMM throughput (float32 and bfloat16), then the fused kernels.
stage bench-gemm 40 "$test" -test.run '^$' -test.bench 'Gemm' -test.benchtime 10x
stage bench-kernels 30 "$test" -test.run '^$' -test.bench 'Attention|CrossEntropy|RMSNorm|AdamW' -test.benchtime 5x

if ((gpu)); then
	# 5. The exact row diameter and Hilbert RMS on the device (V = 50257).
	stage geometry 35 "$dir/geometry.test" -test.run '^TestGPU' -test.v

	# 6. A 1-rank NCCL communicator on the GPU (dist/nccl with the real
	#    libnccl.so.2: system, HILBERT_NCCL_LIB or pip's nvidia-nccl-cu12);
	#    skips, and says why, without NCCL.
	stage nccl 12 "$dir/nccl.test" -test.run '^TestGPU' -test.v

	# 7. A few training steps of a small preset on CUDA with both heads
	#    (bf16 autocast, validation, D(S_t) and Hilbert RMS at the end).
	for head in rownorm adamw; do
		stage "train-$head" 40 "$dir/hilbert" train -device cuda -quiet -preset cpu-128 -head "$head" \
			-train "$dir/data/opticks_train_*.bin" -val "$dir/data/opticks_val_000000.bin" \
			-steps 10 -micro-batch 8 -batch-seqs 16 -val-every 10 -val-tokens 8192 -diag-every 5 \
			-runs "$log/runs" -name "gpu-$head" -overwrite
	done
fi

if grep -q -- '--- SKIP' "$log/parity.log" 2>/dev/null; then
	echo "=== gpu-check: some GPU tests were skipped (see parity.log): no usable GPU?"
fi
if ((${#skipped[@]})); then
	echo "=== gpu-check: skipped for time: ${skipped[*]}"
fi
if ((gpu)); then
	awk -v hilbert="$log/bench-190m-hilbert.log" -v torch="$log/bench-190m-pytorch.log" -f "$dir/summary.awk" || status=1
fi
echo "=== gpu-check: done in $((SECONDS - t0))s, status $status"
exit $status
